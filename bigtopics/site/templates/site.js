// bigtopics site: shared code of index.html, topic.html and doc.html (no network: data/*.js only).
// Data files call BT.put(name, value); BT.load(name) inserts <script src="data/<name>.js">, which
// works from file:// as well as from a web server. Pages are built with DOM calls (text is never
// parsed as HTML). BT.search looks a query up in the search index (site/search_index.py): it
// loads data/search.js (the first term of each shard), then only the shards of the query's words.
// A topic is named by its number (from 0) and its label (data/site.js: its top words, or the
// user's from --topic-labels), as text like every other value.
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
  function topicName(k, site) { return "topic " + k + ": " + site.topics[k].label; }
  function topicLink(k, site) {
    return el("a", {href: "topic.html#k=" + k, class: "topic", style: "border-color:" + color(k)}, [topicName(k, site)]);
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

  // A line chart of ys over numeric xs (opts: title, xLabel, yLabel, fromZero: y axis from 0;
  // labels: the text of each x, when the xs are 0, 1, 2, ... standing for months or days). A y of
  // null (an empty bin) leaves a gap in the line.
  function lineChart(xs, ys, opts) {
    var W = 680, H = 240, L = 70, R = 20, T = 28, B = 44;
    var all = xs.map(function (x, i) { return [x, ys[i] !== null && isFinite(ys[i]) ? ys[i] : null]; });
    var pts = all.filter(function (p) { return p[1] !== null; });
    var xText = function (x) { return opts.labels ? opts.labels[x] : num(x); };
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
    ticks(x0, x1, 6).filter(function (t) { return !opts.labels || (t === Math.round(t) && opts.labels[t] !== undefined); }).forEach(function (t) {
      svg.appendChild(el("svg:text", {x: sx(t), y: H - B + 15, "text-anchor": "middle", class: "tick", text: xText(t)}));
    });
    svg.appendChild(el("svg:line", {x1: L, x2: W - R, y1: H - B, y2: H - B, class: "axis"}));
    svg.appendChild(el("svg:line", {x1: L, x2: L, y1: T, y2: H - B, class: "axis"}));
    var runs = [[]];  // the line's pieces between empty bins
    all.forEach(function (p) { if (p[1] === null) runs.push([]); else runs[runs.length - 1].push(p); });
    runs.filter(function (r) { return r.length; }).forEach(function (r) {
      svg.appendChild(el("svg:polyline", {class: "line", points: r.map(function (p) { return sx(p[0]).toFixed(1) + "," + sy(p[1]).toFixed(1); }).join(" ")}));
    });
    pts.forEach(function (p) { svg.appendChild(el("svg:circle", {cx: sx(p[0]), cy: sy(p[1]), r: 2.5, class: "dot"}, [el("svg:title", {text: xText(p[0]) + ": " + num(p[1])})])); });
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
      return el("tr", {}, [el("td", {text: String(r[0])}), el("td", {}, r[1] === null ? ["no tokens"] : [bar(r[1], max), " " + pct(r[1])])]);
    }));
  }

  // -- search -------------------------------------------------------------------------------
  var DIGIT = {}, MAX_PREFIX_SHARDS = 4;
  "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".split("").forEach(function (c, i) { DIGIT[c.charCodeAt(0)] = i; });

  // The words of a text as the index cuts them (search_index.words): lowercased, accents off,
  // runs of letters and digits.
  function words(text) {
    return String(text).toLowerCase().normalize("NFKD").replace(/\p{M}/gu, "").match(/[\p{L}\p{N}]+/gu) || [];
  }

  // Postings as search_index.encode writes them: varint differences of keys 2 * book + in-title.
  function decode(text) {
    var keys = new Int32Array(text.length), n = 0, value = 0, shift = 0, total = 0;
    for (var i = 0; i < text.length; i++) {
      var d = DIGIT[text.charCodeAt(i)];
      value += (d & 31) * Math.pow(2, shift);
      shift += 5;
      if (d < 32) { total += value; keys[n++] = total; value = 0; shift = 0; }
    }
    return keys.subarray(0, n);
  }

  // The last shard whose first term is not after term (-1: before every shard).
  function shardOf(firsts, term) {
    var lo = -1, hi = firsts.length - 1;
    while (lo < hi) { var mid = (lo + hi + 1) >> 1; if (firsts[mid] <= term) lo = mid; else hi = mid - 1; }
    return lo;
  }

  // The books holding a word (or, prefix, a word starting with it): {books, title} ascending by
  // book, title[i] 1 if the word is in that book's title; notes for the reader.
  function lookUp(index, term, prefix, notes) {
    var first = shardOf(index.shards, term), last = prefix ? shardOf(index.shards, term + "\uffff") : first;
    if (prefix && last - Math.max(first, 0) + 1 > MAX_PREFIX_SHARDS) {
      notes.push("\u201c" + term + "*\u201d: too many words start with it; matched as a whole word");
      prefix = false; last = first;
    }
    if (last < 0) return Promise.resolve({books: new Int32Array(0), title: new Uint8Array(0)});
    var shards = [];
    for (var s = Math.max(first, 0); s <= last; s++) shards.push(load("search/" + s));
    return Promise.all(shards).then(function (parts) {
      var entries = [].concat.apply([], parts).filter(function (e) { return prefix ? e[0].indexOf(term) === 0 : e[0] === term; });
      return Promise.all(entries.map(function (e) {
        return typeof e[2] === "string" ? e[2] : load("terms/" + e[2]);
      }));
    }).then(function (texts) {
      var lists = texts.map(decode), size = lists.reduce(function (a, l) { return a + l.length; }, 0);
      var keys = new Int32Array(size), at = 0;
      lists.forEach(function (l) { keys.set(l, at); at += l.length; });
      if (lists.length > 1) keys.sort();
      var books = new Int32Array(size), title = new Uint8Array(size), n = 0;
      for (var i = 0; i < size; i++) {
        var b = keys[i] >> 1;
        if (n && books[n - 1] === b) title[n - 1] |= keys[i] & 1;
        else { books[n] = b; title[n] = keys[i] & 1; n++; }
      }
      return {books: books.subarray(0, n), title: title.subarray(0, n)};
    });
  }

  // The books holding every word of the query (a word ending in * matches the words starting
  // with it): {books: those whose title holds every word first, then the others, each in the
  // library's order; inTitle: how many come first; terms; notes}. Loads data/search.js, the
  // shards of the query's words and the own files of those of their words that have one.
  function search(query) {
    var terms = [], notes = [];
    String(query).split(/\s+/).forEach(function (part) {
      var ws = words(part), star = /\*$/.test(part);
      ws.forEach(function (w, i) { terms.push({word: w, prefix: star && i === ws.length - 1}); });
    });
    if (!terms.length) return Promise.resolve({books: [], inTitle: 0, terms: terms, notes: notes});
    return load("search").then(function (index) {
      return Promise.all(terms.map(function (t) { return lookUp(index, t.word, t.prefix, notes); }));
    }).then(function (found) {
      found.sort(function (a, b) { return a.books.length - b.books.length; });
      var books = Array.prototype.slice.call(found[0].books), title = Array.prototype.slice.call(found[0].title);
      found.slice(1).forEach(function (f) {
        var keepB = [], keepT = [], j = 0;
        for (var i = 0; i < books.length; i++) {
          while (j < f.books.length && f.books[j] < books[i]) j++;
          if (j < f.books.length && f.books[j] === books[i]) { keepB.push(books[i]); keepT.push(title[i] & f.title[j]); }
        }
        books = keepB; title = keepT;
      });
      var first = books.filter(function (b, i) { return title[i]; }), rest = books.filter(function (b, i) { return !title[i]; });
      return {books: first.concat(rest), inTitle: first.length, terms: terms, notes: notes};
    });
  }

  // [title, id, byline] of each book (data/titles/<book / titles_per_shard>.js).
  function bookRows(books) {
    return load("search").then(function (index) {
      var per = index.titles_per_shard;
      return Promise.all(books.map(function (b) { return load("titles/" + Math.floor(b / per)); })).then(function (shards) {
        return shards.map(function (rows, i) { return rows[books[i] % per]; });
      });
    });
  }

  function fail(where, error) {
    where.appendChild(el("p", {class: "error", text: String(error && error.message || error)}));
  }

  return {put: put, load: load, el: el, params: params, color: color, pct: pct, num: num, topicName: topicName, topicLink: topicLink,
          bookLink: bookLink, bar: bar, lineChart: lineChart, barChart: barChart, fail: fail, words: words,
          decode: decode, search: search, bookRows: bookRows};
})();
