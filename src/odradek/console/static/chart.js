/* odradek console: a tiny hand-written SVG line chart of the brokers' throughput.
 * Polls the element's data-src (/api/throughput) every data-interval ms (default 5 s; the console scrapes at most that often) and draws bytes in and out per second,
 * summed over the brokers. No dependencies; every text node is set with textContent. */
(function () {
  "use strict";
  var el = document.getElementById("chart");
  if (!el) { return; }
  var legend = document.getElementById("chart-legend");
  var NS = "http://www.w3.org/2000/svg";
  var COLORS = { bytesin: "#2f5bd3", bytesout: "#1f9d55" };
  var W = 600, H = 160, PAD = 40;

  function human(v) {
    var units = ["B/s", "KiB/s", "MiB/s", "GiB/s"], i = 0;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i += 1; }
    return (i === 0 ? Math.round(v) : v.toFixed(1)) + " " + units[i];
  }

  function sums(data, name) {
    var out = [], urls = Object.keys(data.series);
    for (var i = 0; i < data.t.length; i += 1) {
      var total = null;
      urls.forEach(function (u) {
        var v = data.series[u][name][i];
        if (v !== null && v !== undefined) { total = (total || 0) + v; }
      });
      out.push(total);
    }
    return out;
  }

  function node(tag, attrs) {
    var n = document.createElementNS(NS, tag);
    Object.keys(attrs).forEach(function (k) { n.setAttribute(k, attrs[k]); });
    return n;
  }

  function draw(data) {
    var svg = node("svg", { viewBox: "0 0 " + W + " " + H, preserveAspectRatio: "none", id: "chart-svg" });
    var lines = { bytesin: sums(data, "bytesin"), bytesout: sums(data, "bytesout") };
    var max = 1;
    Object.keys(lines).forEach(function (k) { lines[k].forEach(function (v) { if (v !== null && v > max) { max = v; } }); });
    var n = Math.max(data.t.length, 2);
    svg.appendChild(node("line", { x1: PAD, y1: H - 20, x2: W, y2: H - 20, stroke: "#ccd" }));
    var label = node("text", { x: 2, y: 12, "font-size": 10, fill: "#667" });
    label.textContent = human(max);
    svg.appendChild(label);
    Object.keys(lines).forEach(function (k) {
      var pts = [];
      lines[k].forEach(function (v, i) {
        if (v === null) { return; }
        var x = PAD + (W - PAD) * i / (n - 1), y = (H - 20) - (H - 30) * v / max;
        pts.push(x.toFixed(1) + "," + y.toFixed(1));
      });
      if (pts.length > 1) {
        svg.appendChild(node("polyline", { points: pts.join(" "), fill: "none", stroke: COLORS[k], "stroke-width": 1.5, "class": "series-" + k }));
      }
    });
    while (el.firstChild) { el.removeChild(el.firstChild); }
    el.appendChild(svg);
    if (legend) {
      while (legend.firstChild) { legend.removeChild(legend.firstChild); }
      Object.keys(lines).forEach(function (k) {
        var last = lines[k].filter(function (v) { return v !== null; }).pop();
        var s = document.createElement("span");
        s.style.color = COLORS[k];
        s.textContent = k + ": " + (last === undefined ? "-" : human(last));
        legend.appendChild(s);
      });
      Object.keys(data.errors || {}).forEach(function (u) {
        var e = document.createElement("span");
        e.className = "error";
        e.textContent = u + ": " + data.errors[u];
        legend.appendChild(e);
      });
    }
  }

  function poll() {
    fetch(el.getAttribute("data-src"), { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (d) { if (d) { draw(d); } })
      .catch(function () { /* the next poll retries */ });
  }
  poll();
  setInterval(poll, Math.max(1000, parseInt(el.getAttribute("data-interval"), 10) || 5000));
}());
