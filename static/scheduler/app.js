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
  // A refreshed list keeps the row being read where it is: the first row in view is remembered before the swap, and
  // the page scrolls by however far the new rows moved it (a cell that grew, a reason that wrapped).
  var reading = null;
  document.addEventListener("htmx:beforeSwap", function (event) {
    reading = null;
    var rows = event.detail.target.querySelectorAll ? event.detail.target.querySelectorAll("tr[data-run]") : [];
    for (var i = 0; i < rows.length; i++) {
      var top = rows[i].getBoundingClientRect().top;
      if (top >= 0) { reading = {run: rows[i].getAttribute("data-run"), top: top}; break; }
    }
  });
  document.addEventListener("htmx:afterSettle", function () {
    if (!reading || window.scrollY === 0) { reading = null; return; }
    var row = document.querySelector('tr[data-run="' + reading.run + '"]');
    if (row) { window.scrollBy(0, row.getBoundingClientRect().top - reading.top); }
    reading = null;
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
// Live parts (issue 37): polls send only what changed, ages count on by themselves, a lost server is said so.
(function () {
  "use strict";
  // A poll sends back the ETag of the part it holds; a 304 (nothing changed) leaves the part as it is.
  var etags = {};
  function pollKey(detail) { return (detail.elt && detail.elt.id || "") + " " + (detail.path || ""); }
  document.addEventListener("htmx:configRequest", function (event) {
    var d = event.detail;
    if (d.verb === "get" && etags[pollKey(d)]) { d.headers["If-None-Match"] = etags[pollKey(d)]; }
  });
  document.addEventListener("htmx:beforeSwap", function (event) {
    if (event.detail.xhr && event.detail.xhr.status === 304) {
      event.detail.shouldSwap = false;
      event.detail.isError = false;
    }
  });
  // Ages (<span data-age="6.4">6.4 s</span>) count on between answers, as the server's `seconds` filter writes them.
  function seconds(value) {
    if (value < 60) { return value < 10 ? value.toFixed(1) + " s" : Math.round(value) + " s"; }
    var minutes = Math.floor(value / 60), secs = Math.floor(value % 60);
    if (minutes < 60) { return minutes + " min " + secs + " s"; }
    return Math.floor(minutes / 60) + " h " + (minutes % 60) + " min";
  }
  function tick() {
    var now = Date.now();
    document.querySelectorAll("[data-age]").forEach(function (el) {
      if (el._ageFrom !== el.getAttribute("data-age")) {
        el._ageFrom = el.getAttribute("data-age");
        el._ageSince = now;
      }
      var base = parseFloat(el._ageFrom);
      if (!isNaN(base)) { el.textContent = seconds(base + (now - el._ageSince) / 1000); }
    });
  }
  setInterval(tick, 1000);
  document.addEventListener("htmx:afterSettle", tick);
  // Connection lost: a banner with the time of the last answer, and every relative time greyed, until one comes.
  var lastAnswer = new Date(), lost = false;
  function clock(moment) {
    var zone = document.querySelector("header.top .zone");
    var options = {hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false, timeZoneName: "short"};
    try {
      if (zone) { options.timeZone = zone.textContent.trim(); }
      return moment.toLocaleTimeString("en-GB", options);
    } catch (err) {
      delete options.timeZone;
      return moment.toLocaleTimeString("en-GB", options);
    }
  }
  function connectionLost(why) {
    var banner = document.getElementById("connection-lost");
    if (!banner) {
      banner = document.createElement("p");
      banner.id = "connection-lost";
      banner.className = "connection-lost";
      banner.setAttribute("role", "alert");
      var main = document.getElementById("main");
      if (!main) { return; }
      main.insertBefore(banner, main.firstChild);
    }
    banner.textContent = "Connection lost (" + why + "): showing data from " + clock(lastAnswer) +
      ". Retrying; this page updates again when the server answers.";
    document.documentElement.classList.add("offline");
    lost = true;
  }
  document.addEventListener("htmx:sendError", function () { connectionLost("no answer from the server"); });
  document.addEventListener("htmx:timeout", function () { connectionLost("the server did not answer in time"); });
  document.addEventListener("htmx:responseError", function (event) {
    var status = event.detail.xhr ? event.detail.xhr.status : 0;
    if (status >= 500 || status === 0) { connectionLost("the server answered " + status); }
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    var xhr = event.detail.xhr;
    if (!xhr || xhr.status < 200 || xhr.status >= 400) { return; }
    var etag = xhr.getResponseHeader("ETag");
    if (etag && event.detail.requestConfig && event.detail.requestConfig.verb === "get") {
      etags[pollKey({elt: event.detail.elt, path: event.detail.requestConfig.path})] = etag;
    }
    lastAnswer = new Date();
    if (lost) {
      lost = false;
      document.documentElement.classList.remove("offline");
      var banner = document.getElementById("connection-lost");
      if (banner) { banner.remove(); }
    }
  });
  // "Run 40 is stopping…" holds only until the run is final: the run page stops polling then.
  function dropStaleFlashes() {
    var live = document.getElementById("run-live");
    if (live && !live.hasAttribute("hx-get")) {
      document.querySelectorAll(".messages li.until-final").forEach(function (li) { li.remove(); });
    }
  }
  document.addEventListener("DOMContentLoaded", dropStaleFlashes);
  document.addEventListener("htmx:afterSettle", dropStaleFlashes);
})();
// Keyboard shortcuts (README, "Keyboard"): g then o/r/t/s/b/a goes to a page, / focuses "go to run #",
// ? lists them. Never while typing in a field, nor with Ctrl, Alt or Meta held.
(function () {
  "use strict";
  var PAGES = {o: ["/", "Overview"], r: ["/runs/", "Runs"], t: ["/timeline/", "Timeline"],
               s: ["/schedules/", "Schedules"], b: ["/backfills/", "Backfills"], a: ["/audit/", "Audit"]};
  var pendingG = 0;
  function typing(target) {
    if (!target || !target.tagName) { return false; }
    var tag = target.tagName.toLowerCase();
    return tag === "input" || tag === "textarea" || tag === "select" || target.isContentEditable;
  }
  function help() {
    var dialog = document.getElementById("shortcuts");
    if (!dialog) {
      dialog = document.createElement("dialog");
      dialog.id = "shortcuts";
      dialog.setAttribute("aria-labelledby", "shortcuts-h");
      var rows = "<dt><kbd>/</kbd></dt><dd>go to run # (the box in the header)</dd>" +
        "<dt><kbd>?</kbd></dt><dd>this list</dd>";
      Object.keys(PAGES).forEach(function (key) {
        rows += "<dt><kbd>g</kbd> <kbd>" + key + "</kbd></dt><dd>" + PAGES[key][1] + "</dd>";
      });
      dialog.innerHTML = '<h2 id="shortcuts-h">Keyboard shortcuts</h2><dl>' + rows +
        '</dl><form method="dialog"><button type="submit">Close</button></form>';
      document.body.appendChild(dialog);
    }
    if (!dialog.open) { dialog.showModal(); }
  }
  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.altKey || event.metaKey || typing(event.target)) { return; }
    if (document.querySelector("dialog[open]")) { return; }
    var key = event.key;
    if (pendingG && Date.now() - pendingG < 1500 && PAGES[key]) {
      pendingG = 0;
      event.preventDefault();
      var link = Array.prototype.find.call(document.querySelectorAll("#site-nav a"), function (a) {
        return a.textContent.trim() === PAGES[key][1];
      });
      window.location.assign(link ? link.href : PAGES[key][0]);
      return;
    }
    pendingG = key === "g" ? Date.now() : 0;
    if (key === "/") {
      var box = document.getElementById("goto-run");
      if (box) { event.preventDefault(); box.focus(); }
    } else if (key === "?") {
      event.preventDefault();
      help();
    }
  });
})();
