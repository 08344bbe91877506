// replayguard dashboard charts: decisions per second by outcome, and the
// sequence health of every source. Both are plain SVG drawn by this file,
// not a charting library: the dashboard must work offline from assets
// embedded in the binary, the two pictures (stacked bars, a grid of
// squares) take a few dozen lines each, and a library would be tens of
// kilobytes more to embed, audit and keep up to date. The SVG elements
// carry data-* attributes, so the page's tests read what was drawn.
// Loaded before app.js, which calls countRate, loadRates, drawRates and
// drawSources.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const RATE_WINDOW = 300;   // seconds on the rates chart
const SOURCE_ROWS = 80;    // table rows for sources without gaps; gappy ones are all listed

function svgEl(tag, attrs, cls) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (cls) e.setAttribute("class", cls);
  return e;
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
function niceCeil(v) {
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

const clockOf = (sec) => new Date(sec * 1000).toLocaleTimeString([], { hour12: false });

// ---- decisions per second -------------------------------------------------

// The server's history (GET /api/v1/rates) seeds the buckets; decision
// events after the position it was counted to add to them. Bucket times are
// the server's (audit record times), and the chart's right edge is the
// server's clock as this page estimates it (skew), so a browser whose clock
// is off still draws each second where it belongs.
const rates = {
  buckets: new Map(), // unix second -> count per OUTCOMES index
  position: 0,        // the last audit position the loaded history counted
  skew: 0,            // server clock minus this page's clock, in ms
  gen: 0,             // the latest load; an older answer is ignored
  loading: false,
  pending: [],        // decisions that arrived while a load was under way
};

function countRate(r) {
  if (r.ref) return; // a release or discard is not a delivery
  if (rates.loading) { rates.pending.push(r); return; }
  if (r.position <= rates.position) return;
  const i = OUTCOMES.indexOf(r.outcome);
  if (i < 0) return;
  const sec = Math.floor(Date.parse(r.time) / 1000);
  let b = rates.buckets.get(sec);
  if (!b) rates.buckets.set(sec, b = new Array(OUTCOMES.length).fill(0));
  b[i]++;
}

async function loadRates() {
  const gen = ++rates.gen;
  rates.loading = true;
  let r;
  try {
    r = await api("/api/v1/rates?window=" + RATE_WINDOW + "s");
  } finally {
    if (gen === rates.gen) rates.loading = false;
  }
  if (gen !== rates.gen) return;
  rates.buckets = new Map();
  const start = Math.floor(Date.parse(r.start) / 1000);
  OUTCOMES.forEach((o, i) => {
    (r.counts[o] || []).forEach((c, k) => {
      if (!c) return;
      let b = rates.buckets.get(start + k);
      if (!b) rates.buckets.set(start + k, b = new Array(OUTCOMES.length).fill(0));
      b[i] = c;
    });
  });
  rates.position = r.position;
  rates.skew = Date.parse(r.now) - Date.now();
  const late = rates.pending;
  rates.pending = [];
  for (const x of late) countRate(x);
  drawRates();
}

// drawRates draws the window ending with the current second as stacked
// bars, one per second, applied at the bottom.
function drawRates() {
  const end = Math.floor((Date.now() + rates.skew) / 1000);
  const start = end - RATE_WINDOW + 1;
  for (const s of rates.buckets.keys()) if (s < start) rates.buckets.delete(s);

  const totals = new Array(OUTCOMES.length).fill(0);
  let peak = 0, peakAt = end;
  for (const [s, b] of rates.buckets) {
    if (s > end) continue;
    let t = 0;
    b.forEach((c, i) => { t += c; totals[i] += c; });
    if (t > peak) { peak = t; peakAt = s; }
  }
  drawLegend(totals, rates.buckets.get(end - 1) || []);

  const box = $("rates-chart"); // measured after the legend, which may wrap
  const W = box.clientWidth, H = box.clientHeight;
  if (!W || !H) return;
  const top = niceCeil(Math.max(peak, 1));
  const m = { l: 48, r: 10, t: 16, b: 20 };
  const pw = W - m.l - m.r, ph = H - m.t - m.b, bw = pw / RATE_WINDOW;
  const yOf = (v) => m.t + ph - (v / top) * ph;
  const svg = svgEl("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img", "data-top": top,
    "aria-label": peak ? `decisions per second, peak ${peak} at ${clockOf(peakAt)}` : "no decision in the last 5 minutes" });

  for (const v of [0, top / 2, top]) {
    svg.append(svgEl("line", { x1: m.l, x2: W - m.r, y1: yOf(v), y2: yOf(v) }, "grid"));
    const t = svgEl("text", { x: m.l - 6, y: yOf(v) + 4, "text-anchor": "end" }, "axis");
    t.textContent = v.toLocaleString();
    svg.append(t);
  }
  for (let s = Math.ceil(start / 60) * 60; s <= end; s += 60) {
    const x = m.l + (s - start) * bw;
    svg.append(svgEl("line", { x1: x, x2: x, y1: m.t, y2: m.t + ph }, "grid"));
    const t = svgEl("text", { x, y: H - 5, "text-anchor": "middle" }, "axis");
    t.textContent = clockOf(s).slice(0, 5);
    svg.append(t);
  }

  const base = new Array(RATE_WINDOW).fill(0);
  OUTCOMES.forEach((o, i) => {
    if (!totals[i]) return;
    const g = svgEl("g", { "data-outcome": o, "data-total": totals[i] }, "series " + o);
    for (let k = 0; k < RATE_WINDOW; k++) {
      const b = rates.buckets.get(start + k);
      const c = b ? b[i] : 0;
      if (!c) continue;
      const h = Math.max((c / top) * ph, 1);
      g.append(svgEl("rect", { x: (m.l + k * bw).toFixed(1), y: (yOf(base[k]) - h).toFixed(1),
        width: Math.max(bw * 0.85, 1).toFixed(1), height: h.toFixed(1), "data-sec": start + k, "data-n": c }));
      base[k] += c;
    }
    svg.append(g);
  });
  if (peak) {
    const x = m.l + (peakAt - start + 0.5) * bw;
    const anchor = x > W - m.r - 120 ? "end" : x < m.l + 120 ? "start" : "middle";
    const t = svgEl("text", { x: Math.min(Math.max(x, m.l), W - m.r), y: m.t - 4, "text-anchor": anchor }, "peak");
    t.textContent = "peak " + peak.toLocaleString() + "/s at " + clockOf(peakAt);
    svg.append(t);
  }
  svg.addEventListener("mousemove", (e) => {
    const k = Math.floor((e.offsetX - m.l) / bw);
    if (k < 0 || k >= RATE_WINDOW) return;
    const b = rates.buckets.get(start + k) || [];
    const parts = OUTCOMES.map((o, i) => (b[i] ? o + " " + b[i] : "")).filter(Boolean);
    $("rates-readout").textContent = clockOf(start + k) + " — " + (parts.join(" · ") || "none");
  });
  svg.addEventListener("mouseleave", () => { $("rates-readout").textContent = ""; });
  box.replaceChildren(svg);

}

// drawLegend names every outcome with its colour, its count in the last
// whole second and in the window; an outcome absent from the window is dimmed.
function drawLegend(totals, last) {
  const legend = $("rates-legend");
  legend.replaceChildren();
  OUTCOMES.forEach((o, i) => {
    const k = el("span", "key " + o + (totals[i] ? "" : " absent"));
    k.dataset.outcome = o;
    k.title = o + ": " + (last[i] || 0) + " in the last whole second, " + totals[i] + " in the last 5 minutes";
    k.append(el("i", "swatch"), el("span", "", o.replace("_", " ")),
      el("span", "muted", " " + (last[i] || 0) + "/s · " + totals[i].toLocaleString()));
    legend.append(k);
  });
}

// ---- source health --------------------------------------------------------

// gapsOf lists a source's open gaps, those of kept older epochs with their
// epoch.
function gapsOf(s) {
  const gaps = (s.gaps || []).slice();
  for (const o of s.older_epochs || []) for (const g of o.gaps || []) gaps.push(Object.assign({ epoch: o.epoch }, g));
  return gaps;
}

const sourceName = (s) => s.route + " " + s.source.join("/");

// drawSourceMap draws every source as one square, in route and source
// order so that a source keeps its place; a square with an open gap is red.
// Hundreds of sources fit in a few rows.
function drawSourceMap(list) {
  const box = $("source-map");
  const W = box.clientWidth;
  if (!W) return;
  const cell = list.length > 1000 ? 6 : list.length > 150 ? 9 : 13, pitch = cell + (cell > 6 ? 3 : 2);
  const cols = Math.max(1, Math.floor((W + 3) / pitch));
  const rows = Math.ceil(list.length / cols);
  const h = Math.max(rows * pitch - 3, 0);
  const svg = svgEl("svg", { width: W, height: h, viewBox: `0 0 ${W} ${h}`, role: "img",
    "aria-label": list.length + (list.length === 1 ? " source" : " sources") });
  list.forEach((s, i) => {
    const gaps = gapsOf(s);
    const r = svgEl("rect", { x: (i % cols) * pitch, y: Math.floor(i / cols) * pitch, width: cell, height: cell, rx: 2,
      "data-source": sourceName(s) }, "cell " + (gaps.length ? "gap" : "ok"));
    const t = svgEl("title");
    t.textContent = shown(sourceName(s) + (s.epoch ? " epoch " + s.epoch : "") + " · high " + s.high +
      (gaps.length ? " · gaps " + gaps.map(rangeText).join(", ") : " · no gap"));
    r.append(t);
    r.addEventListener("click", () => { $("f-source").value = s.source.join("/"); renderSourceRows(); });
    svg.append(r);
  });
  box.replaceChildren(svg);
}

// healthBar draws a source's sequences 0 … high with its open gaps in red,
// each at least 2px wide so that one missing sequence still shows.
function healthBar(s, gaps) {
  const W = 120, H = 10;
  const svg = svgEl("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}` }, "health");
  svg.append(svgEl("rect", { x: 0, y: 0, width: W, height: H, rx: 2 }, "range"));
  const span = Math.max(s.high, 1);
  for (const g of s.gaps || []) {
    const x = (g.from / span) * W;
    svg.append(svgEl("rect", { x: x.toFixed(1), y: 0, width: Math.max(((g.to - g.from + 1) / span) * W, 2).toFixed(1), height: H }, "hole"));
  }
  if (gaps.length > (s.gaps || []).length) svg.append(svgEl("rect", { x: W - 4, y: 0, width: 4, height: H }, "hole older"));
  return svg;
}

let sourceList = [];
let sourceTotal = 0; // sources the server holds: more than sourceList on a fleet

// drawSources draws list, a part of the total sources when the server
// holds more (those with open gaps first), whose missing sequences in all
// are missing when the server counted them.
function drawSources(list, total, missing) {
  sourceList = list;
  total = Math.max(total || 0, list.length);
  sourceTotal = total;
  let counted = 0, gappy = 0;
  for (const s of list) {
    const gaps = gapsOf(s);
    for (const g of gaps) counted += g.to - g.from + 1;
    if (gaps.length) gappy++;
  }
  if (missing === undefined) missing = counted;
  const part = total > list.length; // the sources shown are the gappy ones first: all of them unless every one shown is
  const gappyText = gappy ? gappy.toLocaleString() + (part && gappy === list.length ? "+" : "") + " with open gaps" : "no open gap";
  $("source-summary").textContent = total
    ? "· " + total.toLocaleString() + (total === 1 ? " source" : " sources") + (part ? " (" + list.length.toLocaleString() + " shown)" : "") + " · " + gappyText
    : "";
  $("c-gaps").textContent = missing.toLocaleString();
  $("c-gaps").parentElement.classList.toggle("alert", missing > 0);
  drawSourceMap(list);
  renderSourceRows();
}

// renderSourceRows lists the sources with open gaps first, then the others
// up to SOURCE_ROWS; the filter narrows both.
function renderSourceRows() {
  const text = $("f-source").value.trim().toLowerCase();
  const body = $("sources").tBodies[0];
  body.replaceChildren();
  const shown = sourceList.filter((s) => !text || sourceName(s).toLowerCase().includes(text));
  const rows = shown.map((s) => ({ s, gaps: gapsOf(s) }));
  rows.sort((a, b) => (b.gaps.length > 0) - (a.gaps.length > 0)); // stable: route and source order within each
  let quiet = 0;
  for (const { s, gaps } of rows) {
    if (!gaps.length && quiet++ >= SOURCE_ROWS) continue;
    const tr = el("tr", gaps.length ? "gappy" : "");
    tr.dataset.source = sourceName(s);
    const bar = el("td", "bar");
    bar.append(healthBar(s, gaps));
    tr.append(el("td", "", s.route), el("td", "", s.source.join("/")), el("td", "", s.epoch || "—"),
      el("td", "num", s.high < 0 ? "—" : String(s.high)), bar);
    const td = el("td", gaps.length ? "gap" : "ok");
    td.textContent = gaps.length
      ? gaps.map((g) => (g.epoch !== undefined ? "epoch " + g.epoch + ": " : "") + rangeText(g)).join(", ")
      : "none";
    tr.append(td);
    body.append(tr);
  }
  const unread = text ? 0 : sourceTotal - sourceList.length; // a fleet's, past those read
  const more = Math.max(quiet - SOURCE_ROWS, 0) + unread;
  if (more > 0 || !shown.length) {
    const tr = el("tr");
    const td = el("td", "empty", shown.length ? "+ " + more.toLocaleString() + " more without gaps ("
      + (unread ? "those read each a square above" : "each a square above") + ")"
      : sourceList.length ? "No source matches." : "No sequenced source yet.");
    td.colSpan = 6;
    tr.append(td);
    body.append(tr);
  }
}
