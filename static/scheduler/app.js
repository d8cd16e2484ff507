// Small behaviour the pages share; everything works without it, only less safely.
(function () {
  "use strict";
  // Destructive actions ask first: <form data-confirm="Cancel run 12?">.
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var question = form && form.getAttribute && form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) {
      event.preventDefault();
      event.stopImmediatePropagation();
    }
  }, true);
  // A followed log stays scrolled to its end while the reader is at the end.
  document.addEventListener("htmx:beforeSwap", function (event) {
    var list = document.getElementById("log-lines");
    if (list && event.detail.target === list) {
      var box = list.parentElement;
      list.dataset.atEnd = String(box.scrollTop + box.clientHeight >= box.scrollHeight - 4);
    }
  });
  document.addEventListener("htmx:afterSwap", function (event) {
    var list = document.getElementById("log-lines");
    if (list && event.detail.target === list && list.dataset.atEnd === "true") {
      list.parentElement.scrollTop = list.parentElement.scrollHeight;
    }
  });
})();
// Phone widths (app.css, max-width 640px): the navigation folds behind the Menu button,
// and each table with a header reads as cards, every cell labelled with its column.
(function () {
  "use strict";
  document.documentElement.classList.add("js");
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest(".menu-toggle");
    if (!button) { return; }
    var nav = document.getElementById(button.getAttribute("aria-controls"));
    var open = button.getAttribute("aria-expanded") !== "true";
    button.setAttribute("aria-expanded", String(open));
    if (nav) { nav.classList.toggle("open", open); }
  });
  function labelCells() {
    document.querySelectorAll("main table").forEach(function (table) {
      var head = table.tHead && table.tHead.rows[0];
      if (!head) { return; }
      var names = [];
      Array.prototype.forEach.call(head.cells, function (th) {
        for (var i = 0; i < (th.colSpan || 1); i++) { names.push(th.textContent.trim()); }
      });
      table.classList.add("cards");
      Array.prototype.forEach.call(table.tBodies, function (body) {
        Array.prototype.forEach.call(body.rows, function (row) {
          var at = 0;
          Array.prototype.forEach.call(row.cells, function (cell) {
            var name = cell.colSpan > 1 ? "" : names[at];
            if (name) { cell.setAttribute("data-label", name); } else { cell.removeAttribute("data-label"); }
            at += cell.colSpan || 1;
          });
        });
      });
    });
  }
  document.addEventListener("DOMContentLoaded", labelCells);
  document.addEventListener("htmx:afterSettle", labelCells);
})();
