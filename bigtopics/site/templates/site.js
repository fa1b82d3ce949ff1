// bigtopics site: shared code of index.html, topic.html and doc.html (no network: data/*.js only).
// Data files call BT.put(name, value); BT.load(name) inserts <script src="data/<name>.js">, which
// works from file:// as well as from a web server. Pages are built with DOM calls (text is never
// parsed as HTML).
var BT = (function () {
  "use strict";
  var values = {}, waiting = {};

  function put(name, value) {
    values[name] = value;
    (waiting[name] || []).forEach(function (w) { w.resolve(value); });
    delete waiting[name];
  }

  function load(name) {
    return new Promise(function (resolve, reject) {
      if (Object.prototype.hasOwnProperty.call(values, name)) { resolve(values[name]); return; }
      var first = !waiting[name];
      (waiting[name] = waiting[name] || []).push({resolve: resolve, reject: reject});
      if (!first) return;
      var script = document.createElement("script");
      script.src = "data/" + name + ".js";
      script.onerror = function () {
        (waiting[name] || []).forEach(function (w) { w.reject(new Error("cannot read data/" + name + ".js")); });
        delete waiting[name];
      };
      document.head.appendChild(script);
    });
  }

  // el("a", {href: "x", class: "c"}, ["text", child, ...]): an element; strings become text nodes.
  function el(tag, attrs, children) {
    var node = tag.indexOf("svg:") === 0
      ? document.createElementNS("http://www.w3.org/2000/svg", tag.slice(4)) : document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") node.textContent = attrs[k];
      else if (k.indexOf("on") === 0) node.addEventListener(k.slice(2), attrs[k]);
      else if (attrs[k] !== null && attrs[k] !== undefined) node.setAttribute(k, attrs[k]);
    });
    (children || []).forEach(function (c) {
      if (c === null || c === undefined) return;
      node.appendChild(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
    });
    return node;
  }

  function params() {
    var out = {};
    location.hash.replace(/^#/, "").split("&").forEach(function (part) {
      var i = part.indexOf("=");
      if (i > 0) out[decodeURIComponent(part.slice(0, i))] = decodeURIComponent(part.slice(i + 1).replace(/\+/g, " "));
    });
    return out;
  }

  function color(k) { return "hsl(" + ((k * 137.508) % 360).toFixed(0) + ",55%,52%)"; }
  function pct(x, digits) { return (100 * x).toFixed(digits === undefined ? 1 : digits) + "%"; }
  function num(x) { return Math.abs(x) >= 1e4 ? Math.round(x).toLocaleString("en") : String(+x.toPrecision(4)); }
  function topicLink(k, site) {
    var words = site ? " " + site.topics[k].words.slice(0, 3).join(" ") : "";
    return el("a", {href: "topic.html#k=" + k, class: "topic", style: "border-color:" + color(k)}, ["topic " + k + words]);
  }
  function bookLink(b, text, doc) {
    return el("a", {href: "doc.html#b=" + b + (doc !== undefined ? "&s=" + doc : "")}, [text]);
  }
  function bar(x, max, k) {
    return el("span", {class: "bar", style: "width:" + (200 * x / (max || 1)).toFixed(1) + "px;background:" +
      (k === undefined ? "#4a7fb5" : color(k))});
  }

  function ticks(lo, hi, n) {
    var step = Math.pow(10, Math.floor(Math.log10((hi - lo) / n || 1)));
    [1, 2, 5, 10].some(function (m) { if ((hi - lo) / (step * m) <= n) { step *= m; return true; } return false; });
    var out = [];
    for (var t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) out.push(+t.toPrecision(10));
    return out;
  }

  // A line chart of ys over numeric xs (opts: title, xLabel, yLabel, fromZero: y axis from 0).
  function lineChart(xs, ys, opts) {
    var W = 680, H = 240, L = 70, R = 20, T = 28, B = 44;
    var pts = xs.map(function (x, i) { return [x, ys[i]]; }).filter(function (p) { return p[1] !== null && isFinite(p[1]); });
    var svg = el("svg:svg", {width: W, height: H, class: "chart", role: "img", "aria-label": opts.title});
    svg.appendChild(el("svg:text", {x: W / 2, y: 17, "text-anchor": "middle", class: "title", text: opts.title}));
    if (!pts.length) { svg.appendChild(el("svg:text", {x: W / 2, y: H / 2, "text-anchor": "middle", text: "no data"})); return svg; }
    var x0 = Math.min.apply(null, pts.map(function (p) { return p[0]; })), x1 = Math.max.apply(null, pts.map(function (p) { return p[0]; }));
    var y0 = Math.min.apply(null, pts.map(function (p) { return p[1]; })), y1 = Math.max.apply(null, pts.map(function (p) { return p[1]; }));
    if (opts.fromZero) { y0 = Math.min(0, y0); y1 = Math.max(0, y1); }
    if (x1 === x0) { x0 -= 1; x1 += 1; }
    if (y1 === y0) { y0 -= Math.abs(y0) * 0.1 || 1; y1 += Math.abs(y1) * 0.1 || 1; }
    var sx = function (x) { return L + (x - x0) / (x1 - x0) * (W - L - R); };
    var sy = function (y) { return H - B - (y - y0) / (y1 - y0) * (H - T - B); };
    ticks(y0, y1, 4).forEach(function (t) {
      svg.appendChild(el("svg:line", {x1: L, x2: W - R, y1: sy(t), y2: sy(t), class: "grid"}));
      svg.appendChild(el("svg:text", {x: L - 5, y: sy(t) + 4, "text-anchor": "end", class: "tick", text: num(t)}));
    });
    ticks(x0, x1, 6).forEach(function (t) {
      svg.appendChild(el("svg:text", {x: sx(t), y: H - B + 15, "text-anchor": "middle", class: "tick", text: num(t)}));
    });
    svg.appendChild(el("svg:line", {x1: L, x2: W - R, y1: H - B, y2: H - B, class: "axis"}));
    svg.appendChild(el("svg:line", {x1: L, x2: L, y1: T, y2: H - B, class: "axis"}));
    svg.appendChild(el("svg:polyline", {class: "line", points: pts.map(function (p) { return sx(p[0]).toFixed(1) + "," + sy(p[1]).toFixed(1); }).join(" ")}));
    pts.forEach(function (p) { svg.appendChild(el("svg:circle", {cx: sx(p[0]), cy: sy(p[1]), r: 2.5, class: "dot"}, [el("svg:title", {text: num(p[0]) + ": " + num(p[1])})])); });
    svg.appendChild(el("svg:text", {x: (L + W - R) / 2, y: H - 8, "text-anchor": "middle", class: "label", text: opts.xLabel}));
    svg.appendChild(el("svg:text", {x: 14, y: (T + H - B) / 2, "text-anchor": "middle", class: "label",
      transform: "rotate(-90 14 " + (T + H - B) / 2 + ")", text: opts.yLabel}));
    return svg;
  }

  // Horizontal bars of shares for named values (a text metadata field).
  function barChart(names, ys, opts) {
    var rows = names.map(function (n, i) { return [n, ys[i]]; });
    var max = Math.max.apply(null, ys.concat([1e-12]));
    return el("table", {class: "barchart", "aria-label": opts.title}, rows.map(function (r) {
      return el("tr", {}, [el("td", {text: String(r[0])}), el("td", {}, [bar(r[1], max), " " + pct(r[1])])]);
    }));
  }

  function fail(where, error) {
    where.appendChild(el("p", {class: "error", text: String(error && error.message || error)}));
  }

  return {put: put, load: load, el: el, params: params, color: color, pct: pct, num: num, topicLink: topicLink,
          bookLink: bookLink, bar: bar, lineChart: lineChart, barChart: barChart, fail: fail};
})();
