// The rank explorer (helpers/explorer.py): three sliders (n, d_h, L) over the build's grids, an SVG curve of the
// predicted hardmax rank / n against d_h at the chosen n, and three readouts. Plain DOM and SVG: no library, no
// request. Every number shown is looked up in the grids; nothing is interpolated.
function rankExplorer(id) {
  "use strict";
  const root = document.getElementById(id);
  const G = JSON.parse(document.getElementById(id + "-data").textContent);
  const SVG = "http://www.w3.org/2000/svg";
  const W = 640, H = 300, left = 56, right = 16, top = 14, bottom = 44;
  const yMax = 0.7;
  const dMin = G.d[0], dMax = G.d[G.d.length - 1];
  const x = d => left + (W - left - right) * Math.log2(d / dMin) / Math.log2(dMax / dMin);
  const y = v => top + (H - top - bottom) * (1 - v / yMax);
  const fmt3 = v => Number(v.toPrecision(3)).toString();
  const el = (tag, attrs, parent, ns) => {
    const e = ns ? document.createElementNS(SVG, tag) : document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (parent) parent.appendChild(e);
    return e;
  };

  // the controls: each slider moves over the indices of its grid
  const controls = el("div", {class: "rank-explorer-controls",
                              style: "display: flex; flex-wrap: wrap; gap: 0.4em 2em; margin-bottom: 0.5em"}, root);
  const slider = (name, label, values, start) => {
    const row = el("label", {class: "rank-explorer-control"}, controls);
    row.appendChild(document.createTextNode(label + " "));
    const input = el("input", {type: "range", id: id + "-" + name, min: 0, max: values.length - 1, step: 1,
                               value: start, "aria-label": label}, row);
    const shown = el("output", {id: id + "-" + name + "-value", style: "display: inline-block; min-width: 3em"}, row);
    return {input, shown, values};
  };
  const nIndex = Math.floor(G.n.length / 2);
  const sN = slider("n", "sequence length n", G.n, nIndex);
  const sD = slider("d", "head dimension dₕ", G.d, Math.min(G.d.indexOf(8) >= 0 ? G.d.indexOf(8) : 0, G.d.length - 1));
  const sL = slider("L", "logit scale L", G.L, Math.max(G.L.indexOf(16), 0));

  // the chart: axes, the plateau and its (1 - eps) level, the curve, the chosen point and the critical width
  const svg = el("svg", {viewBox: `0 0 ${W} ${H}`, width: "100%", role: "img", class: "rank-explorer-chart",
                         "aria-label": "predicted hardmax rank over n against the head dimension"}, root, true);
  const axis = el("g", {stroke: "currentColor", fill: "currentColor", "font-size": 11}, svg, true);
  el("line", {x1: left, y1: y(0), x2: W - right, y2: y(0)}, axis, true);
  el("line", {x1: left, y1: top, x2: left, y2: y(0)}, axis, true);
  for (let d = dMin; d <= dMax; d *= 2) {
    el("line", {x1: x(d), y1: y(0), x2: x(d), y2: y(0) + 4}, axis, true);
    el("text", {x: x(d), y: y(0) + 16, "text-anchor": "middle", stroke: "none"}, axis, true).textContent = d;
  }
  for (let v = 0; v <= yMax + 1e-9; v += 0.1) {
    el("line", {x1: left - 4, y1: y(v), x2: left, y2: y(v)}, axis, true);
    el("text", {x: left - 7, y: y(v) + 4, "text-anchor": "end", stroke: "none"}, axis, true).textContent = v.toFixed(1);
  }
  el("text", {x: (left + W - right) / 2, y: H - 6, "text-anchor": "middle", stroke: "none"}, axis, true)
    .textContent = "head dimension dₕ";
  el("text", {x: 14, y: (top + y(0)) / 2, "text-anchor": "middle", stroke: "none",
              transform: `rotate(-90 14 ${(top + y(0)) / 2})`}, axis, true).textContent = "predicted hardmax rank / n";
  const plateau = el("line", {stroke: "gray", "stroke-dasharray": "6 4"}, svg, true);
  const level = el("line", {stroke: "gray", "stroke-dasharray": "2 3"}, svg, true);
  const critical = el("line", {stroke: "#d55e00", "stroke-width": 1.5}, svg, true);
  const curve = el("path", {id: id + "-curve", fill: "none", stroke: "#0072b2", "stroke-width": 2}, svg, true);
  const dot = el("circle", {r: 5, fill: "#0072b2"}, svg, true);

  // the readouts
  const value = el("p", {id: id + "-rank", class: "rank-explorer-readout"}, root);
  const width = el("p", {id: id + "-width", class: "rank-explorer-readout"}, root);
  const code = el("p", {id: id + "-code", class: "rank-explorer-readout"}, root);

  function draw() {
    const i = +sN.input.value, j = +sD.input.value, k = +sL.input.value;
    const n = G.n[i], d = G.d[j], L = G.L[k], f = G.fraction[i], p = G.plateau[i], c = G.critical[i];
    sN.shown.textContent = n;
    sD.shown.textContent = d;
    sL.shown.textContent = L;
    curve.setAttribute("d", G.d.map((dd, m) => (m ? "L" : "M") + x(dd).toFixed(2) + " " + y(f[m]).toFixed(2)).join(" "));
    for (const [line, v] of [[plateau, p], [level, (1 - G.eps) * p]]) {
      line.setAttribute("x1", left); line.setAttribute("x2", W - right);
      line.setAttribute("y1", y(v)); line.setAttribute("y2", y(v));
    }
    const inside = c <= dMax;
    critical.setAttribute("visibility", inside ? "visible" : "hidden");
    critical.setAttribute("x1", x(Math.min(c, dMax))); critical.setAttribute("x2", x(Math.min(c, dMax)));
    critical.setAttribute("y1", top); critical.setAttribute("y2", y(0));
    dot.setAttribute("cx", x(d)); dot.setAttribute("cy", y(f[j]));
    value.textContent = `At n = ${n} and dₕ = ${d}, the predicted hardmax rank / n is ${fmt3(f[j])} ` +
      `(a rank of about ${fmt3(f[j] * n)} of ${n}), against a plateau of ${fmt3(p)} (dashed) as dₕ grows ` +
      `without bound.`;
    width.textContent = `The prediction comes within ${Math.round(100 * G.eps)} % of its plateau (dotted) at ` +
      `dₕ = ${c}` + (inside ? " (the orange line)." : `, beyond the ${dMax} dimensions drawn here.`);
    const dr = G.d_rand[i][k];
    code.textContent = dr === null
      ? `At logit scale L = ${L}, no dimension lets a random code put mass ${1 - G.eps} on its target among ` +
        `${n} keys: L must exceed ln((n - 1)(1 - ε)/ε) = ${fmt3(G.least_L[i])}.`
      : `At logit scale L = ${L}, a random code puts mass ${1 - G.eps} on its target among ${n} keys from ` +
        `d = ${fmt3(dr)} dimensions on.`;
  }
  for (const s of [sN, sD, sL]) s.input.addEventListener("input", draw);
  draw();
}
