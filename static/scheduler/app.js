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
