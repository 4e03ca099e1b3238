// The expiry countdown: each [data-expires] element says how long its proposal has left.
(function () {
  "use strict";
  function span(seconds) {
    var minutes = Math.floor(seconds / 60), hours = Math.floor(minutes / 60);
    if (hours) { return hours + " h " + (minutes % 60) + " min"; }
    if (minutes) { return minutes + " min " + (seconds % 60) + " s"; }
    return seconds + " s";
  }
  function tick() {
    var now = Date.now();
    document.querySelectorAll("[data-expires]").forEach(function (element) {
      var at = Date.parse(element.getAttribute("data-expires"));
      var left = Math.round((at - now) / 1000);
      element.textContent = left > 0
        ? "expires in " + span(left)
        : "expired " + span(-left) + " ago: a new proposal needs a new decision";
    });
  }
  document.addEventListener("DOMContentLoaded", function () { window.setInterval(tick, 1000); });
})();
