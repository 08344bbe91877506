// replayguard dashboard: the common operating picture. Data come from
// /api/v1/* and the /api/v1/events stream only; every text from a message is
// set with textContent, never parsed as HTML.
"use strict";

const OUTCOMES = ["applied", "applied_late", "duplicate", "conflict", "quarantined", "malformed"];
const HELD = new Set(["conflict", "quarantined", "malformed"]);
const AUDIT_KEEP = 300;
const ENTITY_SHOW = 240;
const ENTITY_FETCH = 2000;  // entities asked for: a fleet's are counted, not all fetched
const SOURCE_FETCH = 2000;  // sources asked for, those with open gaps first
const TOKEN_KEY = "replayguard.token";
const OPERATOR_KEY = "replayguard.operator"; // kept across sessions, unlike the token

const state = {
  entities: new Map(),   // name -> {field: value}
  entityTotal: 0,        // entities the server holds (X-Total-Count), at the last fetch
  counts: {},            // outcome -> n, since the server started
  audit: [],             // newest last
  position: 0,
};

const $ = (id) => document.getElementById(id);
const byName = new Intl.Collator(undefined, { numeric: true }).compare; // incident/7 before incident/12
// byCode is the server's order of names (strings.Compare): a part of a
// fleet's entities (?limit) is the first names by it, not by byName.
const byCode = (a, b) => (a < b ? -1 : a > b ? 1 : 0);
// entityOrder is byName while the dashboard holds every entity, else
// byCode: the cards shown are then the first of the server's.
function entityOrder() { return state.entityTotal > state.entities.size ? byCode : byName; }
const timeOf = (t) => new Date(t).toLocaleTimeString([], { hour12: false });

// shown is text as the page writes it: the bidirectional embeddings,
// overrides and isolates a producer's string may hold are written as their
// code points, so that no name reads as another (an override makes
// "incident/\u202e21" read incident/12) nor reorders what follows it.
const BIDI_CONTROLS = /[\u202a-\u202e\u2066-\u2069]/g;
function shown(text) {
  return String(text).replace(BIDI_CONTROLS, (c) => "\u27e8U+" + c.codePointAt(0).toString(16).toUpperCase() + "\u27e9");
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = shown(text);
  return e;
}

function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }

// operator is the name the person gave at the top. A write's body carries
// it; the server audits the write under it when no token names the
// operator (open writes on loopback), else names the token's holder, and
// refuses (403, told in the toast) a name that is not the token's.
function operator() { return $("operator").value.trim(); }

// writeBody is a write's JSON body: fields, and the operator when named.
function writeBody(fields) {
  const name = operator();
  return JSON.stringify(name ? Object.assign({}, fields, { operator: name }) : fields);
}

// auditedAs tells whom the audit record of a write names, as the server
// answered: the token's holder, the name given, or no one.
function auditedAs(r) {
  return r && r.operator ? " — audited as " + r.operator : " — audited without an operator's name";
}

// showOperator marks the name field while a write would be audited
// without a name: no name given and no token sent.
function showOperator() {
  const unnamed = !operator() && !token();
  $("operator").parentElement.classList.toggle("unnamed", unnamed);
  $("operator-note").hidden = !unnamed;
}

function headers(extra) {
  const h = Object.assign({}, extra);
  if (token()) h["Authorization"] = "Bearer " + token();
  return h;
}

let toastTimer;
function toast(msg, good) {
  const t = $("toast");
  t.textContent = shown(msg);
  t.className = "show" + (good ? " good" : "");
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { t.className = ""; }, 6000);
}

async function api(path, opts) {
  return (await apiResponse(path, opts)).body;
}

// apiResponse is api with the response's headers: {body, headers}.
async function apiResponse(path, opts) {
  const res = await fetch(path, Object.assign({ headers: headers(), cache: "no-store" }, opts));
  let body = null;
  try { body = await res.json(); } catch (e) { /* empty body */ }
  if (!res.ok) {
    let msg = (body && body.error) || res.statusText;
    if (res.status === 401) msg += " — enter the token at the top right";
    const err = new Error(msg);
    err.status = res.status;
    throw err;
  }
  return { body, headers: res.headers };
}

// ---- fetching -------------------------------------------------------------

async function loadStats() {
  const s = await api("/api/v1/stats");
  state.position = s.position;
  if (s.version) $("version").textContent = s.version;
  if (s.counts) {
    state.counts = Object.assign({}, s.counts.decisions);
    $("since").textContent = "counts since " + new Date(s.counts.since).toLocaleString([], { hour12: false });
  }
  renderCounts();
}

async function loadState() {
  const r = await apiResponse("/api/v1/state?limit=" + ENTITY_FETCH);
  state.entities = new Map(Object.entries(r.body));
  state.entityTotal = Number(r.headers.get("X-Total-Count")) || state.entities.size;
  renderEntities(new Set());
}

// loadEntityTotal reads how many entities the server holds, when entities
// the dashboard has not read change: new ones count. On a shared store a
// read takes long, so the next waits ten times as long as the last.
let entityTotalTook = 0;
async function loadEntityTotal() {
  const began = performance.now();
  const r = await apiResponse("/api/v1/state?limit=1");
  entityTotalTook = performance.now() - began;
  const total = Number(r.headers.get("X-Total-Count")); // absent from an older server: keep the count
  if (total) {
    state.entityTotal = total;
    renderEntities(new Set());
  }
}

// loadSources is called again as decisions come; on a fleet a read of
// the sources takes long, so the next waits ten times as long as the last.
let sourcesTook = 0;
async function loadSources() {
  const began = performance.now();
  const r = await apiResponse("/api/v1/sources?limit=" + SOURCE_FETCH);
  sourcesTook = performance.now() - began;
  const header = (name) => { const v = r.headers.get(name); return v === null ? undefined : Number(v); };
  drawSources(r.body, header("X-Total-Count"), header("X-Open-Gaps"));
}

const HELD_FETCH = 200; // held messages asked for, the oldest first

async function loadQuarantine() {
  renderQuarantine(await api("/api/v1/quarantine?limit=" + HELD_FETCH));
}

async function loadAudit() {
  const from = Math.max(1, state.position - AUDIT_KEEP + 1);
  const page = await api("/api/v1/audit?limit=" + AUDIT_KEEP + "&from=" + from);
  state.audit = page.records;
  renderAudit(new Set());
}

async function refetchAll() {
  try {
    await loadStats();
    await Promise.all([loadState(), loadSources(), loadQuarantine(), loadAudit(), loadRates(), loadForward(), loadOutbox()]);
  } catch (e) {
    toast("Could not load: " + e.message);
  }
}

// debounced refetches for what the event stream does not carry in full
const pending = {};
function soon(name, fn, ms) {
  if (pending[name]) return;
  pending[name] = setTimeout(async () => {
    pending[name] = null;
    try { await fn(); } catch (e) { toast("Could not load: " + e.message); }
  }, ms);
}

// ---- rendering ------------------------------------------------------------

function renderCounts(bumped) {
  for (const o of OUTCOMES) {
    const tile = $("c-" + o);
    tile.textContent = (state.counts[o] || 0).toLocaleString();
    if (bumped && bumped.has(o)) {
      const p = tile.parentElement;
      p.classList.remove("bump");
      void p.offsetWidth;
      p.classList.add("bump");
    }
  }
}

function fieldText(v) {
  if (typeof v === "string") return v;
  return JSON.stringify(v);
}

function renderEntities(changed) {
  const groups = new Map();
  const names = [...state.entities.keys()].sort(entityOrder());
  for (const name of names.slice(0, ENTITY_SHOW)) {
    const i = name.indexOf("/");
    const kind = i > 0 ? name.slice(0, i) : "other";
    if (!groups.has(kind)) groups.set(kind, []);
    groups.get(kind).push(name);
  }
  const root = $("entities");
  root.replaceChildren();
  for (const [kind, list] of groups) {
    const g = el("div", "group");
    g.append(el("h3", "", kind + (kind.endsWith("s") ? "" : "s") + " · " + list.length));
    for (const name of list) {
      const card = el("div", "entity" + (changed.has(name) ? " changed" : ""));
      card.dataset.name = name;
      card.tabIndex = 0;
      card.title = shown("Show how " + name + " came to be");
      const i = name.indexOf("/");
      card.append(el("div", "name", i > 0 ? name.slice(i + 1) : name));
      const dl = el("dl");
      const fields = state.entities.get(name);
      for (const k of Object.keys(fields).sort()) {
        dl.append(el("dt", "", k), el("dd", "", fieldText(fields[k])));
      }
      card.append(dl);
      g.append(card);
    }
    root.append(g);
  }
  const total = Math.max(state.entityTotal, names.length);
  if (total > ENTITY_SHOW) root.append(el("div", "more", "+ " + (total - Math.min(names.length, ENTITY_SHOW)).toLocaleString() + " more entities"));
  if (names.length === 0) root.append(el("div", "empty", "No entity yet."));
  $("entity-count").textContent = total ? "· " + total.toLocaleString() : "";
}

function rangeText(g) { return g.from === g.to ? String(g.from) : g.from + "–" + g.to; }

// payloadText shows a held payload: JSON as JSON, other bytes as text when
// they are printable UTF-8, else as base64.
function payloadText(e) {
  const b64 = e.payload_b64 || "";
  if (e.payload !== null || b64 === "bnVsbA==") return JSON.stringify(e.payload);
  try {
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    if (!/[\u0000-\u0008\u000e-\u001f\u007f]/.test(text)) return "not JSON: " + text;
  } catch (err) { /* not UTF-8 */ }
  return "base64: " + b64;
}

let heldShown = null; // the ids and outcomes on screen
function renderQuarantine(page) {
  const root = $("quarantine");
  $("c-held").textContent = page.total.toLocaleString();
  $("c-held").parentElement.classList.toggle("alert", page.total > 0);
  // The same entries again (an event's reload after an action's) keep their
  // cards: a button being clicked is never swapped out from under the click.
  const shown = page.entries.map(e => e.id + ":" + e.outcome).join(",") + " of " + page.total;
  if (shown === heldShown && root.childElementCount > 0) return;
  heldShown = shown;
  root.replaceChildren();
  if (!page.entries.length) {
    root.append(el("div", "empty", "Nothing held."));
    return;
  }
  for (const e of page.entries) {
    const card = el("div", "held-msg " + e.outcome);
    card.dataset.id = e.id;
    const top = el("div", "top");
    top.append(el("strong", "", "#" + e.id), el("span", "badge " + e.outcome, e.outcome));
    const actions = el("div", "actions");
    const rel = el("button", "release", "Release");
    rel.type = "button";
    rel.addEventListener("click", () => release(e.id, rel));
    const dis = el("button", "discard", "Discard");
    dis.type = "button";
    dis.addEventListener("click", () => askDiscard(e.id));
    actions.append(rel, dis);
    top.append(actions);
    card.append(top, el("div", "reason", e.reason || "(no reason)"));
    card.append(el("div", "meta", [e.route || "no route", e.topic, timeOf(e.time),
      e.dup ? "DUP flag set" : ""].filter(Boolean).join(" · ")));
    card.append(el("pre", "", payloadText(e)));
    root.append(card);
  }
  // Past the first read, the newest held are not on screen: say how many.
  if (page.total > page.entries.length) {
    root.append(el("div", "more", "+ " + (page.total - page.entries.length).toLocaleString() +
      " more held, newer (replayguard quarantine list)"));
  }
}

function auditMatches(r, outcome, text) {
  if (outcome && r.outcome !== outcome) return false;
  if (!text) return true;
  const hay = [r.route, (r.source || []).join("/"), r.topic, r.key, r.reason, r.id, r.operator, r.member].join(" ").toLowerCase();
  return hay.includes(text);
}

function renderAudit(fresh) {
  const outcome = $("f-outcome").value;
  const text = $("f-text").value.trim().toLowerCase();
  const body = $("audit").tBodies[0];
  body.replaceChildren();
  for (let i = state.audit.length - 1; i >= 0; i--) {
    const r = state.audit[i];
    if (!auditMatches(r, outcome, text)) continue;
    const tr = el("tr", fresh.has(r.position) ? "fresh" : "");
    const seq = r.sequence !== undefined ? String(r.sequence) : (r.id || (r.ref ? "#" + r.ref : "—"));
    const out = el("td");
    out.append(el("span", "badge " + r.outcome, r.outcome));
    tr.append(el("td", "num", String(r.position)), el("td", "", timeOf(r.time)),
      el("td", "", r.route || "—"), el("td", "", (r.source || []).join("/") || "—"), el("td", "num", seq), out,
      el("td", "", (r.reason || "") + (r.dup ? " [DUP]" : "") + (r.operator ? " — by " + r.operator : "")));
    tr.title = shown(r.topic + (r.key ? "\nkey " + r.key : "") + (r.member ? "\nmember " + r.member : ""));
    body.append(tr);
  }
}

// ---- live events ----------------------------------------------------------

function onDecision(r, batch) {
  state.position = Math.max(state.position, r.position);
  state.audit.push(r);
  if (state.audit.length > AUDIT_KEEP) state.audit.splice(0, state.audit.length - AUDIT_KEEP);
  batch.fresh.add(r.position);
  if (!r.ref) {
    state.counts[r.outcome] = (state.counts[r.outcome] || 0) + 1;
    batch.bumped.add(r.outcome);
  }
  countRate(r);
  if (r.sequence !== undefined) batch.sources = true;
  if (FORWARD_OUTCOMES.has(r.outcome)) batch.forward = true;
  else if (HELD.has(r.outcome) || r.ref) batch.quarantine = true;
}

function onState(e, batch) {
  if (!state.entities.has(e.name)) {
    if (state.entities.size >= state.entityTotal) state.entityTotal++; // all were here: a new one
    else batch.entityTotal = true; // a part: a new one, or one not read; the server counts them
  }
  state.entities.set(e.name, e.fields);
  if (state.entities.size > 2 * ENTITY_FETCH) { // a fleet's changes: keep the first names, as a fetch would
    const names = [...state.entities.keys()].sort(byCode);
    for (const name of names.slice(ENTITY_FETCH)) state.entities.delete(name);
  }
  batch.changed.add(e.name);
}

function newBatch() {
  return { fresh: new Set(), bumped: new Set(), changed: new Set(), sources: false, quarantine: false, forward: false, entityTotal: false, any: false };
}

// render applies a batch of events at most a few times a second.
let batch = newBatch();
let renderTimer = null;
function dispatch(name, data) {
  switch (name) {
    case "hello":
      refetchAll();
      return;
    case "resync":
      toast("The dashboard fell behind the feed; reloading.");
      refetchAll();
      return;
    case "decision":
      onDecision(JSON.parse(data), batch);
      break;
    case "state":
      onState(JSON.parse(data), batch);
      break;
    default:
      return;
  }
  batch.any = true;
  if (!renderTimer) renderTimer = setTimeout(flush, 150);
}

function flush() {
  renderTimer = null;
  const b = batch;
  batch = newBatch();
  renderCounts(b.bumped);
  if (b.changed.size) {
    renderEntities(b.changed);
    onLineageChanged(b.changed);
  }
  renderAudit(b.fresh);
  soon("rates", drawRates, 250);
  if (b.sources) soon("sources", loadSources, Math.max(300, 10 * sourcesTook));
  if (b.entityTotal) soon("entity-total", loadEntityTotal, Math.max(1000, 10 * entityTotalTook));
  if (b.quarantine) soon("quarantine", loadQuarantine, 300);
  if (b.forward) onForwardRecord();
}

// The badge tells the event stream's state and, while the stream is up,
// the consumer's readiness (/readyz): a broker or a store down stops the
// decisions while the stream stays open, and the badge says so, and why.
let streamUp = false, streamText = "connecting…";
let readiness = { ready: true };
function setLive(up, text) {
  streamUp = up;
  streamText = text;
  renderLive();
}

function renderLive() {
  const l = $("live"), why = $("ready-why");
  const warning = readiness.warning || "";
  let text = streamText, cls = streamUp ? "up" : "down", said = "";
  if (streamUp && !readiness.ready) {
    text = "LIVE · NOT READY";
    cls = "notready";
    said = (readiness.error || "not ready").replace(/^not ready: /, "");
  }
  if (warning) said = said ? said + "; " + warning : warning;
  l.className = "live " + cls;
  l.textContent = text;
  document.body.classList.toggle("stale", !streamUp); // the counts shown are the last read, not live
  why.className = "ready-why" + (cls === "notready" ? " down" : "");
  why.textContent = said;
  why.hidden = !streamUp || said === "";
}

// loadReady reads /readyz; a server that cannot be reached is the
// stream's to tell.
let readyAsked = false; // one read at a time: a slow server's answers never come out of order
async function loadReady() {
  if (readyAsked) return;
  readyAsked = true;
  try {
    const res = await fetch("/readyz", { headers: headers(), cache: "no-store" });
    const body = await res.json();
    readiness = { ready: res.ok && body.ready === true, error: body.error || "", warning: body.warning || "" };
  } catch (e) {
    readiness = { ready: true };
  } finally {
    readyAsked = false;
  }
  renderLive();
}

// stream reads the event stream with fetch, so that a token can be sent.
// One stream at a time: a new one (a token entered) ends the one open and
// the try pending, or every decision would come, and count, twice.
let streamAbort = null;
let streamRetry = null;
async function stream() {
  clearTimeout(streamRetry);
  const abort = new AbortController();
  streamAbort = abort;
  try {
    const res = await fetch("/api/v1/events", { headers: headers(), signal: abort.signal, cache: "no-store" });
    if (!res.ok) {
      throw new Error(res.status !== 401 ? "HTTP " + res.status
        : token() ? "the token entered is refused (missing or wrong)" : "token needed to read: enter it in the Token field");
    }
    setLive(true, "LIVE");
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += value;
      let end;
      while ((end = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, end);
        buf = buf.slice(end + 2);
        let name = "message";
        const data = [];
        for (const line of block.split("\n")) {
          if (line.startsWith("event:")) name = line.slice(6).trim();
          else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
        }
        if (data.length) dispatch(name, data.join("\n"));
      }
    }
    setLive(false, "stream ended — reconnecting");
  } catch (e) {
    if (abort.signal.aborted) return;
    setLive(false, "disconnected — " + e.message);
  }
  if (streamAbort === abort) streamRetry = setTimeout(stream, 2000);
}

function restartStream() {
  if (streamAbort) streamAbort.abort();
  stream();
}

// ---- actions --------------------------------------------------------------

// reloadAfter reloads panels (loads) after a write the server committed,
// whose answer said tells. A reload that fails does not undo the write:
// it is told after the write's answer, never as the write's failure; the
// panels catch up with the next event or poll.
async function reloadAfter(said, good, ...loads) {
  try {
    await Promise.all(loads.map((load) => load()));
  } catch (e) {
    toast(said + ". The panel could not be reloaded: " + e.message, good);
  }
}

async function release(id, button) {
  button.disabled = true;
  let r;
  try {
    r = await api("/api/v1/quarantine/" + id + "/release", {
      method: "POST", headers: headers({ "Content-Type": "application/json" }), body: writeBody({}),
    });
  } catch (e) {
    toast("Release #" + id + " failed: " + e.message);
    button.disabled = false;
    return;
  }
  // A release the engine held again (a statement the message still
  // breaks, a birth still unknown) is no success: it names the new entry.
  const why = r.outcome + (r.reason ? " (" + r.reason + ")" : "") + auditedAs(r);
  const said = r.held ? "Release #" + id + " was held again as #" + r.held + ": " + why : "Released #" + id + ": " + why;
  toast(said, !r.held);
  await reloadAfter(said, !r.held, loadQuarantine);
}

let discardID = 0;
// discardDrafts keeps, by entry, a reason whose discard did not go
// through: the dialog opened again for the entry shows it.
const discardDrafts = new Map();

// askDiscard opens the discard dialog for entry id, with refusal, the
// server's words on the reason last sent, when there is one.
function askDiscard(id, refusal) {
  discardID = id;
  $("discard-id").textContent = "#" + id;
  $("discard-reason").value = discardDrafts.get(id) || "";
  $("discard-error").textContent = refusal ? shown(refusal) : "";
  $("discard-error").hidden = !refusal;
  if (!$("discard-dialog").open) $("discard-dialog").showModal();
  $("discard-reason").focus();
}

function cancelDiscard() {
  discardDrafts.delete(discardID);
  $("discard-dialog").close();
}

async function confirmDiscard() {
  const typed = $("discard-reason").value;
  const reason = typed.trim();
  if (!reason) {
    $("discard-reason").focus();
    toast("A discard needs a reason.");
    return;
  }
  $("discard-dialog").close();
  $("discard-error").textContent = "";
  $("discard-error").hidden = true;
  const id = discardID; // the dialog may be opened for another while this one is under way
  discardDrafts.set(id, typed);
  let r;
  try {
    r = await api("/api/v1/quarantine/" + id + "/discard", {
      method: "POST", headers: headers({ "Content-Type": "application/json" }), body: writeBody({ reason }),
    });
  } catch (e) {
    if ((e.status === 400 || e.status === 413) && !(discardID !== id && $("discard-dialog").open)) {
      // The reason refused (too long, a control character; 413: so long
      // that the request is over the API's limit): its dialog again, with
      // the text typed and the server's words.
      toast("Discard #" + id + " refused: " + e.message);
      askDiscard(id, e.message);
    } else if (e.status === 404) { // no longer held: nothing to discard again
      discardDrafts.delete(id);
      toast("Discard #" + id + " failed: " + e.message);
    } else {
      toast("Discard #" + id + " failed: " + e.message + " (the reason is kept: Discard #" + id + " again)");
    }
    return;
  }
  discardDrafts.delete(id);
  const said = "Discarded #" + id + auditedAs(r);
  toast(said, true);
  await reloadAfter(said, true, loadQuarantine);
}

// ---- start ----------------------------------------------------------------

function tick() {
  $("clock").textContent = timeOf(Date.now());
  drawRates();
}

document.addEventListener("DOMContentLoaded", () => {
  $("token").value = token();
  $("token").addEventListener("change", () => {
    sessionStorage.setItem(TOKEN_KEY, $("token").value.trim());
    showOperator();
    restartStream();
  });
  $("operator").value = localStorage.getItem(OPERATOR_KEY) || "";
  $("operator").addEventListener("input", () => {
    localStorage.setItem(OPERATOR_KEY, operator());
    showOperator();
  });
  showOperator();
  $("f-outcome").addEventListener("change", () => renderAudit(new Set()));
  $("f-text").addEventListener("input", () => renderAudit(new Set()));
  $("f-source").addEventListener("input", renderSourceRows);
  window.addEventListener("resize", () => { drawRates(); drawSourceMap(sourceList); });
  $("discard-ok").addEventListener("click", confirmDiscard);
  $("discard-cancel").addEventListener("click", cancelDiscard);
  $("discard-reason").addEventListener("keydown", (e) => { if (e.key === "Enter") confirmDiscard(); });
  startOutbox();
  startLineage();
  startFeeds();
  tick();
  setInterval(tick, 1000);
  loadReady();
  setInterval(loadReady, 2000);
  setInterval(() => soon("stats", loadStats, 0), 30000);
  stream();
});
