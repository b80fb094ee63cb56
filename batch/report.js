// Open the timeline a link points at, so that following a run link from the table shows it.
function openTarget() {
  var el = document.getElementById(decodeURIComponent(location.hash.slice(1)));
  if (el && el.tagName === "DETAILS") { el.open = true; }
}
addEventListener("hashchange", openTarget);
openTarget();

// The item filters: every filter set must hold for an item to show.
(function () {
  var show = document.getElementById("f-show"), metric = document.getElementById("f-metric"),
      cls = document.getElementById("f-class"), text = document.getElementById("f-text"),
      count = document.getElementById("f-count");
  if (!show) { return; }
  var items = Array.prototype.slice.call(document.querySelectorAll("tbody.item"));
  function apply() {
    var q = text.value.trim().toLowerCase(), shown = 0;
    items.forEach(function (it) {
      var d = it.dataset, ok = true;
      if (show.value === "fail") { ok = d.fail === "1"; }
      if (show.value === "fixed" || show.value === "broken") { ok = d.outcome === show.value; }
      if (show.value === "flaky") { ok = d.flaky === "true"; }
      if (ok && metric.value) { ok = (" " + d.fails + " ").indexOf(" " + metric.value + " ") >= 0; }
      if (ok && cls.value) { ok = d.class === cls.value; }
      if (ok && q) { ok = it.textContent.toLowerCase().indexOf(q) >= 0; }
      it.hidden = !ok;
      if (ok) { shown++; }
    });
    count.textContent = shown + " of " + items.length + " " + count.dataset.unit;
  }
  [show, metric, cls].forEach(function (el) { el.addEventListener("change", apply); });
  text.addEventListener("input", apply);
  apply();
})();
