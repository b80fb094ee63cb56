// flowrun serve: live updates over server-sent events, and copy buttons.
// Everything inserted here was rendered and escaped by the server.
"use strict";

// A list (runs, batches, a batch's items) re-rendered by the server. An
// item opened (a <details> under an element with an id) stays open, and
// a list holding the focus of a field being typed in waits: the update
// would lose the text.
// A live stream ends with its page: a browser holds at most six
// connections to a server, and pages kept for the back button would
// otherwise keep theirs, stalling the next page after six.
function live(url) {
  var es = new EventSource(url);
  window.addEventListener("pagehide", function () { es.close(); });
  return es;
}

document.querySelectorAll("[data-live]").forEach(function (el) {
  var es = live(el.dataset.live);
  es.addEventListener("rows", function (m) {
    var active = document.activeElement;
    if (active && el.contains(active) && (active.tagName === "INPUT" || active.tagName === "TEXTAREA")) { return; }
    var open = Array.prototype.map.call(el.querySelectorAll("details[open]"), function (d) {
      var owner = d.closest("[id]");
      return owner && owner !== el ? owner.id : null;
    });
    el.innerHTML = JSON.parse(m.data);
    open.forEach(function (id) {
      var owner = id && document.getElementById(id);
      var d = owner && owner.querySelector("details");
      if (d) { d.open = true; }
    });
  });
});

// A run's timeline and graph.
var timeline = document.getElementById("timeline");
if (timeline) {
  var es = live(timeline.dataset.stream);
  es.addEventListener("event", function (m) {
    var d = JSON.parse(m.data);
    if (timeline.querySelector('tr[data-seq="' + d.seq + '"]')) return;
    timeline.insertAdjacentHTML("beforeend", d.row);
    if (d.node && d.state) {
      // A map's or parallel node's join box stands where its node does.
      [d.node, d.node + "__join"].forEach(function (id) {
        document.querySelectorAll('g[data-node="' + CSS.escape(id) + '"]').forEach(function (g) {
          g.setAttribute("data-state", d.state);
        });
      });
      document.querySelectorAll('g[data-node="__start"]').forEach(function (g) { g.setAttribute("data-state", "done"); });
      document.querySelectorAll("svg.graph").forEach(markTaken);
    }
    if (d.path) refreshInspector(d.path);
    if (d.cost !== undefined) {
      var cost = document.getElementById("cost");
      var usd = parseFloat(cost.dataset.usd) + d.cost;
      cost.dataset.usd = usd;
      cost.textContent = formatUSD(usd);
      var tokens = document.getElementById("tokens");
      tokens.textContent = parseInt(tokens.textContent, 10) + d.tokens;
      var turns = document.getElementById("turns");
      turns.textContent = parseInt(turns.textContent, 10) + 1;
    }
    if (d.tally) {
      var n = document.getElementById(d.tally);
      if (n) n.textContent = parseInt(n.textContent, 10) + 1;
    }
  });
  es.addEventListener("text", function (m) { showText(JSON.parse(m.data)); });
  es.addEventListener("status", function (m) {
    var s = JSON.parse(m.data);
    var el = document.getElementById("status");
    if (el && el.dataset.status !== s) {
      // The run waits, stopped or ended: the page's controls change with it.
      es.close();
      location.reload();
    }
  });
}

// markTaken draws the path a live run has taken so far by the rule the
// server draws it with (taken in web/funcs.go): a line from a node that
// finished to one that ran, an on_error line (dashed) left out.
var ran = { done: true, running: true, waiting: true, failed: true };
function markTaken(svg) {
  var state = {};
  svg.querySelectorAll("g.gnode").forEach(function (g) { state[g.dataset.node] = g.dataset.state; });
  svg.querySelectorAll("path.edge").forEach(function (p) {
    var on = !p.classList.contains("dashed") && state[p.dataset.from] === "done" && ran[state[p.dataset.to]] === true;
    p.classList.toggle("taken", on);
    p.setAttribute("marker-end", on ? "url(#arrow-taken)" : "url(#arrow)");
  });
}

// showText shows a model reply as it streams in, one box per node path,
// removed when the reply is recorded (the inspector then shows it).
function showText(d) {
  var box = document.getElementById("stream");
  var part = null;
  box.querySelectorAll(".stream-part").forEach(function (p) {
    if (p.dataset.path === d.path) part = p;
  });
  if (d.done) {
    if (part) part.remove();
    box.hidden = !box.querySelector(".stream-part");
    return;
  }
  if (!part) {
    part = document.createElement("div");
    part.className = "stream-part";
    part.dataset.path = d.path;
    var link = document.createElement("a");
    link.className = "mono";
    link.href = "?path=" + encodeURIComponent(d.path) + "#inspector";
    link.textContent = d.path;
    var pre = document.createElement("pre");
    pre.className = "text stream-text";
    part.appendChild(link);
    part.appendChild(pre);
    box.appendChild(part);
  }
  var text = part.querySelector("pre");
  if (d.reset) text.textContent = "";
  text.textContent += d.text;
  text.scrollTop = text.scrollHeight;
  box.hidden = false;
}

// refreshInspector renders the open inspector again when an event of its
// node arrives: one request at a time, and one more if events came while
// it ran.
var inspecting = false, inspectAgain = false;
function refreshInspector(path) {
  var ins = document.getElementById("inspector");
  if (!ins || ins.dataset.path !== path) return;
  if (inspecting) { inspectAgain = true; return; }
  inspecting = true;
  fetch(location.pathname + "/inspector?path=" + encodeURIComponent(path), { credentials: "same-origin" })
    .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
    .then(function (html) {
      var cur = document.getElementById("inspector");
      if (cur && cur.dataset.path === path) cur.outerHTML = html;
    })
    .catch(function () {})
    .then(function () {
      inspecting = false;
      if (inspectAgain) { inspectAgain = false; refreshInspector(path); }
    });
}

document.addEventListener("click", function (ev) {
  var b = ev.target.closest("button[data-copy]");
  if (!b) return;
  var src = document.getElementById(b.dataset.copy);
  if (src && navigator.clipboard) {
    navigator.clipboard.writeText(src.textContent).then(function () { b.textContent = "Copied"; });
  }
});

// formatUSD writes an amount as figures.USD does on the server, so that
// the live total reads like every other amount (TestFormatUSDMatchesFigures).
function formatUSD(v) {
  if (v < 0) return "-" + formatUSD(-v);
  if (v === 0) return "$0";
  if (v >= 100) return "$" + v.toFixed(0);
  if (v >= 1) return "$" + v.toFixed(2);
  var s = v.toFixed(Math.max(4, 1 - Math.floor(Math.log10(v)))).replace(/0+$/, "");
  var cents = s.length - s.indexOf(".") - 1;
  return "$" + s + "00".slice(0, Math.max(0, 2 - cents));
}
