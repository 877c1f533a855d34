// mlemu console: the little behaviour the server-rendered pages need. No library, no build.
"use strict";

// Copy buttons next to the curl and Python snippets of "try it".
function setUpCopyButtons() {
  document.querySelectorAll("button.copy").forEach(function (button) {
    button.addEventListener("click", function () {
      var source = document.getElementById(button.dataset.copy);
      if (!source) { return; }
      var done = function () { button.textContent = "Copied"; };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(source.textContent).then(done, function () {
          button.textContent = "Select and copy";
        });
      } else {
        var range = document.createRange();
        range.selectNodeContents(source);
        var selection = window.getSelection();
        selection.removeAllRanges();
        selection.addRange(range);
        button.textContent = "Selected: press Ctrl+C";
      }
    });
  });
}

// Metrics: fetch the charts again every few seconds (the server draws them).
function setUpRefresh() {
  var box = document.getElementById("charts");
  if (!box || !box.dataset.refresh) { return; }
  var refresh = function () {
    if (document.hidden) { return; }
    fetch(box.dataset.refresh, {credentials: "same-origin", headers: {"Accept": "text/html"}})
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (html) {
        if (html === null) { return; }
        // The fragment comes from this server with every name escaped by its templates.
        var parsed = new DOMParser().parseFromString(html, "text/html");
        box.replaceChildren.apply(box, Array.from(parsed.body.childNodes));
      })
      .catch(function () { /* the next tick tries again */ });
  };
  window.setInterval(refresh, 5000);
}

// Overview: reload while batch jobs run (their state, counts and log tail are live), but never
// while the user is typing in a form.
function setUpLiveReload() {
  var live = document.querySelector("[data-reload]");
  if (!live) { return; }
  window.setTimeout(function () {
    var active = document.activeElement;
    if (active && active.form) { setUpLiveReload(); return; }
    window.location.reload();
  }, Number(live.dataset.reload) * 1000);
}

document.addEventListener("DOMContentLoaded", function () {
  setUpCopyButtons();
  setUpRefresh();
  setUpLiveReload();
});
