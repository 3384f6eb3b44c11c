// Draws the report's charts as inline SVG from the JSON embedded in #report-data.
// Text goes in through textContent only (never innerHTML): log text cannot become markup.
// When every chart is drawn, a hidden #charts-ready element records how many have shapes.
(function () {
  "use strict";
  const NS = "http://www.w3.org/2000/svg";
  const data = JSON.parse(document.getElementById("report-data").textContent);
  const COLORS = data.colors;

  function el(tag, attrs, parent) {
    const node = document.createElementNS(NS, tag);
    for (const key in attrs) node.setAttribute(key, attrs[key]);
    if (parent) parent.appendChild(node);
    return node;
  }
  function label(parent, x, y, str, attrs) {
    const node = el("text", Object.assign({ x: x, y: y }, attrs || {}), parent);
    node.textContent = str;
    return node;
  }
  function tip(node, str) {
    el("title", {}, node).textContent = str;
  }
  function color(name, i) {
    return COLORS[name] || COLORS._cycle[i % COLORS._cycle.length];
  }
  function size(svg, w, h) {
    svg.setAttribute("viewBox", "0 0 " + w + " " + h);
  }
  function empty(svg, msg) {
    size(svg, 600, 40);
    label(svg, 10, 24, msg, { class: "empty" });
  }
  function legend(svg, names) {
    const box = document.createElement("div");
    box.className = "legend";
    names.forEach(function (name, i) {
      const item = document.createElement("span");
      const swatch = document.createElement("i");
      swatch.style.background = color(name, i);
      item.appendChild(swatch);
      item.appendChild(document.createTextNode(name));
      box.appendChild(item);
    });
    svg.parentNode.insertBefore(box, svg.nextSibling);
  }
  function niceMax(v) {
    if (v <= 0) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    return [1, 2, 5, 10].map(function (m) { return m * p; }).find(function (c) { return c >= v; });
  }

  // Stacked vertical bars: categories on x, one stack segment per series.
  function stacked(svg, spec) {
    if (!spec.categories.length) return empty(svg, "nothing in this window");
    const W = 640, H = 260, L = 44, R = 10, T = 12, B = 40;
    size(svg, W, H);
    const totals = spec.categories.map(function (_, i) {
      return spec.series.reduce(function (s, ser) { return s + ser.values[i]; }, 0);
    });
    const max = spec.percent ? 1 : niceMax(Math.max.apply(null, totals));
    const y = function (v) { return H - B - (v / max) * (H - T - B); };
    for (let k = 0; k <= 4; k++) {
      const v = (max * k) / 4;
      el("line", { class: "grid", x1: L, x2: W - R, y1: y(v), y2: y(v) }, svg);
      label(svg, L - 6, y(v) + 4, spec.percent ? Math.round(v * 100) + "%" : String(+v.toFixed(1)), { "text-anchor": "end" });
    }
    const band = (W - L - R) / spec.categories.length;
    const bw = Math.min(56, band * 0.7);
    spec.categories.forEach(function (cat, i) {
      let acc = 0;
      const x = L + band * i + (band - bw) / 2;
      spec.series.forEach(function (ser, j) {
        const raw = ser.values[i];
        if (!raw) return;
        const v = spec.percent ? raw / totals[i] : raw;
        const r = el("rect", { x: x, y: y(acc + v), width: bw, height: y(acc) - y(acc + v), fill: color(ser.name, j) }, svg);
        tip(r, cat + " · " + ser.name + ": " + raw + (spec.unit ? " " + spec.unit : ""));
        acc += v;
      });
      label(svg, L + band * i + band / 2, H - B + 16, cat, { "text-anchor": "middle" });
    });
    el("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }, svg);
    legend(svg, spec.series.map(function (s) { return s.name; }));
  }

  // Heat map: rows × columns, cell shade by value.
  function heatmap(svg, spec) {
    if (!spec.rows.length) return empty(svg, "no XID in this window");
    const cell = 26, L = 90, T = 10, B = 30, W = 1260;
    const cw = Math.min(120, (W - L - 20) / spec.cols.length);
    const H = T + cell * spec.rows.length + B;
    size(svg, W, H);
    const max = Math.max.apply(null, spec.cells.map(function (c) { return c.value; }));
    spec.rows.forEach(function (row, i) { label(svg, L - 6, T + cell * i + cell / 2 + 4, row, { "text-anchor": "end" }); });
    spec.cols.forEach(function (col, j) { label(svg, L + cw * j + cw / 2, H - B + 16, col, { "text-anchor": "middle" }); });
    spec.rows.forEach(function (_, i) {
      spec.cols.forEach(function (_, j) {
        el("rect", { x: L + cw * j + 1, y: T + cell * i + 1, width: cw - 2, height: cell - 2, fill: "#f0f4f8" }, svg);
      });
    });
    spec.cells.forEach(function (c) {
      const shade = 0.2 + 0.8 * Math.log(1 + c.value) / Math.log(1 + max);
      const r = el("rect", { x: L + cw * c.col + 1, y: T + cell * c.row + 1, width: cw - 2, height: cell - 2,
        fill: "rgba(197, 48, 48, " + shade.toFixed(3) + ")" }, svg);
      tip(r, spec.rows[c.row] + " " + spec.cols[c.col] + ": " + c.value + " XID lines (" + c.detail + ")");
      label(svg, L + cw * c.col + cw / 2, T + cell * c.row + cell / 2 + 4, String(c.value),
        { "text-anchor": "middle", fill: shade > 0.55 ? "#fff" : "#1f2933" });
    });
  }

  // Horizontal bars: one row per item, segments per series.
  function hbars(svg, spec) {
    if (!spec.items.length) return empty(svg, spec.empty || "nothing in this window");
    const row = 24, L = 190, R = 40, T = 8;
    const W = 640, H = T + row * spec.items.length + 8;
    size(svg, W, H);
    const totals = spec.items.map(function (it) { return it.values.reduce(function (a, b) { return a + b; }, 0); });
    const max = niceMax(Math.max.apply(null, totals));
    const scale = (W - L - R) / max;
    spec.items.forEach(function (it, i) {
      const y = T + row * i;
      label(svg, L - 6, y + row / 2 + 4, it.label, { "text-anchor": "end" });
      let x = L;
      it.values.forEach(function (v, j) {
        if (!v) return;
        const name = spec.series[j];
        const r = el("rect", { x: x, y: y + 4, width: v * scale, height: row - 8,
          fill: it.highlight === false ? "#bcccdc" : color(name, j) }, svg);
        tip(r, it.label + " · " + name + ": " + v + (it.detail ? " — " + it.detail : ""));
        x += v * scale;
      });
      label(svg, x + 4, y + row / 2 + 4, String(totals[i]));
    });
    el("line", { class: "axis", x1: L, x2: L, y1: T, y2: H - 8 }, svg);
    legend(svg, spec.series);
  }

  // Evidence timeline: time on x, one lane per node (rank in the tooltip), dot colour = role.
  function timeline(svg, spec) {
    if (!spec.points.length) return empty(svg, "no evidence");
    const lane = 24, L = 90, R = 20, T = 14, B = 30, W = 1260;
    const H = T + lane * spec.lanes.length + B;
    size(svg, W, H);
    const t0 = spec.t0, t1 = Math.max(spec.t1, spec.t0 + 1);
    const x = function (t) { return L + ((t - t0) / (t1 - t0)) * (W - L - R); };
    spec.lanes.forEach(function (name, i) {
      const y = T + lane * i + lane / 2;
      el("line", { class: "grid", x1: L, x2: W - R, y1: y, y2: y }, svg);
      label(svg, L - 6, y + 4, name, { "text-anchor": "end" });
    });
    for (let k = 0; k <= 4; k++) {
      const t = t0 + ((t1 - t0) * k) / 4;
      const anchor = k === 0 ? "start" : k === 4 ? "end" : "middle";
      label(svg, x(t), H - B + 16, new Date(t).toISOString().slice(11, 23), { "text-anchor": anchor });
    }
    if (spec.fault !== null) {
      const fx = x(spec.fault);
      el("line", { x1: fx, x2: fx, y1: T, y2: H - B, stroke: "#c53030", "stroke-dasharray": "4 3" }, svg);
      label(svg, fx + 4, T + 9, "first fault", { fill: "#c53030" });
    }
    spec.points.forEach(function (p) {
      const c = el("circle", { cx: x(p.t), cy: T + lane * p.lane + lane / 2, r: p.role === "root_candidate" ? 6 : 4,
        fill: color(p.role, 0), stroke: "#fff", "stroke-width": 1 }, svg);
      tip(c, p.label);
    });
    el("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }, svg);
  }

  const DRAW = { stacked: stacked, heatmap: heatmap, hbars: hbars, timeline: timeline };
  let drawn = 0;
  document.querySelectorAll("svg.chart").forEach(function (svg) {
    const spec = data.charts[svg.dataset.chart];
    DRAW[spec.type](svg, spec);
    if (svg.querySelector("rect, circle, path")) drawn += 1;
  });
  const marker = document.createElement("div");
  marker.id = "charts-ready";
  marker.hidden = true;
  marker.dataset.charts = String(drawn);
  document.body.appendChild(marker);
})();
