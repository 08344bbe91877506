// replayguard dashboard: the outbox of the forward effects. How full each
// member's outbox is against outbox.max_entries, the state of each output
// (delivered, held, failing with the downstream's last error), and the
// entries a downstream refused for good, each with Retry and Drop, and the
// entry each failing output waits at, with Hold.
// GET /api/v1/forward is the drainer's state, held in memory and polled;
// GET /api/v1/outbox reads the store, so it is fetched when the event
// stream or the drainer's counts say that the held entries changed, and
// now and then for the other members of a group. Loaded before app.js,
// whose helpers (el, api, toast, soon, timeOf, payloadText, writeBody, shown,
// auditedAs, reloadAfter) it uses, and which calls loadForward, loadOutbox,
// onForwardRecord and startOutbox.
"use strict";

const FORWARD_OUTCOMES = new Set(["forward_held", "forward_retried", "forward_dropped"]);
const FORWARD_POLL = 2000;   // ms between reads of the drainer's state while a route forwards
const OUTBOX_POLL = 10000;   // ms between reads of the store's outbox while the panel shows one

const outbox = {
  status: null,       // the last GET /api/v1/forward
  page: null,         // the last GET /api/v1/outbox; absent: this process keeps no outbox
  samples: new Map(), // output/member -> {delivered, at}: the previous poll's, for a rate
  rates: new Map(),   // output/member -> deliveries per second between the last two polls
  heldCount: -1,      // the drainer's held entries at the last poll
  summaryShown: null, // what the depth and outputs show now
  heldShown: null,    // the held entries on screen
  stuckShown: null,   // the entries the failing outputs wait at, on screen
};

const outputName = (o) => o.output + "/" + o.member;

async function loadForward() {
  const st = await api("/api/v1/forward");
  const now = Date.now();
  let held = 0;
  for (const o of st.outputs) {
    const k = outputName(o), prev = outbox.samples.get(k);
    if (prev && now > prev.at) outbox.rates.set(k, (o.delivered - prev.delivered) * 1000 / (now - prev.at));
    outbox.samples.set(k, { delivered: o.delivered, at: now });
    held += o.held;
  }
  outbox.status = st;
  // An entry held since the last poll is read from the store at once.
  if (outbox.heldCount >= 0 && held !== outbox.heldCount) soon("outbox", loadOutbox, 0);
  outbox.heldCount = held;
  renderOutbox();
}

async function loadOutbox() {
  try {
    outbox.page = await api("/api/v1/outbox?limit=200");
  } catch (e) {
    if (e.status !== 404) throw e;
    outbox.page = { held: [], total_held: 0, pending: [], absent: true };
  }
  renderOutbox();
}

// onForwardRecord is told of a forward_held, forward_retried or
// forward_dropped audit record from the event stream.
function onForwardRecord() {
  soon("outbox", loadOutbox, 300);
  soon("forward", loadForward, 300);
}

// The panel is shown when a route forwards here, or when the store holds
// entries (a route that forwarded before the configuration changed).
function outboxActive() {
  const st = outbox.status, p = outbox.page;
  if (st && st.forwarding) return true;
  return !!p && (p.total_held > 0 || p.pending.some(d => d.pending > 0));
}

function renderOutbox() {
  const active = outboxActive();
  const panel = $("outbox-panel");
  panel.classList.toggle("collapsed", !active);
  document.querySelector("main").classList.toggle("forwarding", active);
  if (!active) {
    $("outbox-sub").textContent = "— no forward effects";
    $("outbox-summary").textContent = "";
    outbox.summaryShown = outbox.heldShown = outbox.stuckShown = null;
    $("outbox-stuck").replaceChildren();
    $("outbox-depth").replaceChildren();
    $("outputs").tBodies[0].replaceChildren();
    $("outbox-held").replaceChildren();
    return;
  }
  $("outbox-sub").textContent = "— forward effects";
  renderDepths();
  renderStuck();
  renderHeldForwards();
}

// renderStuck shows the entry each failing output waits at (every entry
// behind it waits too): its id, target and key, the downstream's last
// answer, the attempts, and what to do. A card is kept while its output
// waits at the same entry, so that its Hold button is never swapped out
// from under a click; the answer and the attempts change in place.
function renderStuck() {
  const root = $("outbox-stuck");
  const st = outbox.status;
  const stuck = st && st.forwarding ? st.outputs.filter(o => o.failing && o.stuck && o.stuck.id) : [];
  const now = stuck.map(o => outputName(o) + ":" + o.stuck.id).join("\n");
  if (now !== outbox.stuckShown) {
    outbox.stuckShown = now;
    root.replaceChildren(...stuck.map(stuckCard));
  }
  stuck.forEach((o, i) => updateStuck(root.children[i], o));
}

function stuckCard(o) {
  const s = o.stuck;
  const card = el("div", "held-msg stuck-fwd");
  card.dataset.id = s.id;
  card.dataset.output = o.output;
  card.dataset.member = o.member;
  const top = el("div", "top");
  top.append(el("strong", "", "#" + s.id), el("span", "badge stuck", o.output + " waits here"), el("span", "target", s.target));
  if (o.member) top.append(el("span", "muted", "member " + o.member));
  const actions = el("div", "actions");
  const hold = el("button", "hold", "Hold…");
  hold.type = "button";
  hold.addEventListener("click", () => askHold({ id: s.id, member: o.member, output: o.output, target: s.target }));
  actions.append(hold);
  top.append(actions);
  const key = el("div", "key", s.key);
  key.title = "replayguard-key " + s.key;
  const remedy = el("div", "remedy", "The entries behind it wait. If the downstream refuses this entry alone (it takes the others), " +
    "hold it so that they go on, then Retry or Drop it once the downstream is fixed. From a shell: ");
  remedy.append(el("code", "", "replayguard outbox hold " + s.id + (o.member ? " --member " + o.member : "") + " --reason TEXT"));
  card.append(top, el("div", "reason"), el("div", "meta"), key, remedy);
  return card;
}

function updateStuck(card, o) {
  card.querySelector(".reason").textContent = shown(o.last_error || "(no answer)");
  card.querySelector(".meta").textContent = o.stuck.attempts + " attempts at it since " + timeOf(o.stuck.since) +
    " · the output failing since " + timeOf(o.since);
}

// depths are the pending entries per member: this member's from the
// drainer (current to the poll), the others' from the store.
function depths() {
  const st = outbox.status, rows = new Map();
  for (const d of (outbox.page && outbox.page.pending) || []) rows.set(d.member, d.pending);
  if (st && st.forwarding) rows.set(st.member, st.depth);
  return [...rows].sort((a, b) => byName(a[0], b[0]));
}

function renderDepths() {
  const st = outbox.status || { forwarding: false, outputs: [] };
  const rows = depths();
  const held = outbox.page ? outbox.page.total_held : 0;
  const shown = JSON.stringify([st, rows, held, [...outbox.rates]]);
  if (shown === outbox.summaryShown) return;
  outbox.summaryShown = shown;
  const max = st.max_entries || 0;
  const pending = rows.reduce((n, r) => n + r[1], 0);
  $("outbox-summary").textContent = pending.toLocaleString() + " pending · " + held.toLocaleString() + " held";
  $("outbox-summary").classList.toggle("alert", held > 0 || st.full);

  const full = $("outbox-full");
  full.hidden = !st.full;
  full.textContent = st.full ? "Outbox full since " + timeOf(st.full_since) + ": " + st.depth.toLocaleString() + " of " +
    max.toLocaleString() + " entries pending (outbox.max_entries); upstream deliveries are not acknowledged until the downstream takes entries again." : "";

  const root = $("outbox-depth");
  root.replaceChildren();
  for (const [member, n] of rows) {
    const row = el("div", "depth" + (max && n >= max ? " full" : ""));
    row.dataset.member = member;
    const bar = el("div", "bar");
    const fill = el("div", "fill");
    fill.style.width = (max ? Math.min(100, 100 * n / max) : 0) + "%";
    bar.append(fill);
    const mine = st.forwarding && member === st.member;
    row.append(el("span", "who", member || "this outbox"), bar,
      el("span", "n", n.toLocaleString() + (mine && max ? " of " + max.toLocaleString() : "")));
    root.append(row);
  }

  const body = $("outputs").tBodies[0];
  body.replaceChildren();
  for (const o of st.outputs) {
    const tr = el("tr", o.failing ? "failing" : "");
    tr.dataset.output = o.output;
    tr.dataset.member = o.member;
    const state = el("td", "state");
    state.append(el("div", o.failing ? "gap" : "ok", o.failing ? "failing since " + timeOf(o.since) + " · " + o.attempts + " attempts" : "ok"));
    if (o.last_error) state.append(el("div", "error", o.last_error));
    const rate = outbox.rates.get(outputName(o));
    tr.append(el("td", "", o.output + (o.member ? " · " + o.member : "")), state,
      el("td", "num n-delivered", o.delivered.toLocaleString() + (rate !== undefined ? " · " + rate.toFixed(1) + "/s" : "")),
      el("td", "num n-held", o.held.toLocaleString()), el("td", "num n-failures", o.failures.toLocaleString()));
    body.append(tr);
  }
  if (!st.outputs.length) {
    const tr = el("tr");
    const td = el("td", "empty", "No output runs in this process.");
    td.colSpan = 5;
    tr.append(td);
    body.append(tr);
  }
}

function renderHeldForwards() {
  const root = $("outbox-held");
  const page = outbox.page;
  if (!page) return;
  // The same entries again keep their cards, as the quarantine's do: a
  // button being clicked is never swapped out from under the click.
  const shown = page.held.map(h => h.member + ":" + h.id + ":" + h.reason).join("\n");
  if (shown === outbox.heldShown && root.childElementCount > 0) return;
  outbox.heldShown = shown;
  root.replaceChildren();
  if (page.absent) {
    root.append(el("div", "empty", "This process keeps no outbox."));
    return;
  }
  if (!page.held.length) {
    root.append(el("div", "empty", "No entry held."));
    return;
  }
  for (const h of page.held) root.append(heldForwardCard(h));
  if (page.total_held > page.held.length) root.append(el("div", "more", "+ " + (page.total_held - page.held.length) + " more held (replayguard outbox list)"));
}

function heldForwardCard(h) {
  const card = el("div", "held-msg held-fwd");
  card.dataset.id = h.id;
  card.dataset.member = h.member;
  const top = el("div", "top");
  top.append(el("strong", "", "#" + h.id), el("span", "badge forward_held", h.output), el("span", "target", h.target));
  if (h.member) top.append(el("span", "muted", "member " + h.member));
  const actions = el("div", "actions");
  const retry = el("button", "retry", "Retry");
  retry.type = "button";
  retry.addEventListener("click", () => retryForward(h, retry));
  const drop = el("button", "drop", "Drop");
  drop.type = "button";
  drop.addEventListener("click", () => askDrop(h));
  actions.append(retry, drop);
  top.append(actions);
  // The audited reason names output and target, shown above: the
  // downstream's answer is the rest.
  const prefix = h.output + " " + h.target + ": ";
  const answer = h.reason.startsWith(prefix) ? h.reason.slice(prefix.length) : h.reason;
  const reason = el("div", "reason", answer || "(no answer)");
  reason.title = shown(h.reason);
  card.append(top, reason);
  card.append(el("div", "meta", [h.route, h.topic, timeOf(h.time)].join(" · ")));
  const key = el("div", "key", h.key);
  key.title = "replayguard-key " + h.key;
  card.append(key, el("pre", "", payloadText(h)));
  return card;
}

// ---- actions --------------------------------------------------------------

function forwardAction(h, action, reason) {
  return api("/api/v1/outbox/" + h.id + "/" + action, {
    method: "POST", headers: headers({ "Content-Type": "application/json" }),
    body: writeBody(reason === undefined ? { member: h.member } : { member: h.member, reason }),
  });
}

async function retryForward(h, button) {
  button.disabled = true;
  let r;
  try {
    r = await forwardAction(h, "retry");
  } catch (e) {
    toast("Retry #" + h.id + " failed: " + e.message);
    button.disabled = false;
    soon("outbox", loadOutbox, 0); // another operator may have resolved it
    return;
  }
  const said = "Retried #" + h.id + ": back in the outbox for " + h.target + auditedAs(r);
  toast(said, true);
  await reloadAfter(said, true, loadOutbox, loadForward);
  // An entry the downstream refused again at once is held under its id
  // with the same answer, and keeps this card: it can be retried again.
  button.disabled = false;
}

let dropEntry = null;
// dropDrafts keeps, by member and entry, a reason whose drop did not go
// through: the dialog opened again for the entry shows it.
const dropDrafts = new Map();
const dropKey = (h) => h.member + "/" + h.id;

// askDrop opens the drop dialog for held entry h, with refusal, the
// server's words on the reason last sent, when there is one.
function askDrop(h, refusal) {
  dropEntry = h;
  $("drop-id").textContent = "#" + h.id + " (" + h.output + " " + h.target + ")";
  $("drop-reason").value = dropDrafts.get(dropKey(h)) || "";
  $("drop-error").textContent = refusal ? shown(refusal) : "";
  $("drop-error").hidden = !refusal;
  if (!$("drop-dialog").open) $("drop-dialog").showModal();
  $("drop-reason").focus();
}

function cancelDrop() {
  if (dropEntry) dropDrafts.delete(dropKey(dropEntry));
  $("drop-dialog").close();
}

async function confirmDrop() {
  const typed = $("drop-reason").value;
  const reason = typed.trim();
  if (!reason) {
    $("drop-reason").focus();
    toast("A drop needs a reason.");
    return;
  }
  $("drop-dialog").close();
  $("drop-error").textContent = "";
  $("drop-error").hidden = true;
  const h = dropEntry; // the dialog may be opened for another while this one is under way
  dropDrafts.set(dropKey(h), typed);
  let r;
  try {
    r = await forwardAction(h, "drop", reason);
  } catch (e) {
    if ((e.status === 400 || e.status === 413) && !(dropEntry !== h && $("drop-dialog").open)) {
      // The reason refused (too long, a control character; 413: so long
      // that the request is over the API's limit): its dialog again, with
      // the text typed and the server's words.
      toast("Drop #" + h.id + " refused: " + e.message);
      askDrop(h, e.message);
    } else {
      if (e.status === 404) dropDrafts.delete(dropKey(h)); // no longer held: nothing to drop again
      toast("Drop #" + h.id + " failed: " + e.message + (e.status === 404 ? "" : " (the reason is kept: Drop #" + h.id + " again)"));
      soon("outbox", loadOutbox, 0);
    }
    return;
  }
  dropDrafts.delete(dropKey(h));
  const said = "Dropped #" + h.id + auditedAs(r);
  toast(said, true);
  await reloadAfter(said, true, loadOutbox, loadForward);
}

let holdEntry = null;
// holdDrafts keeps, by member and entry, a reason whose hold did not go
// through: the dialog opened again for the entry shows it.
const holdDrafts = new Map();

// askHold opens the hold dialog for pending entry h, with refusal, the
// server's words on the reason last sent, when there is one.
function askHold(h, refusal) {
  holdEntry = h;
  $("hold-id").textContent = shown("#" + h.id + " (" + h.output + " " + h.target + ")");
  $("hold-reason").value = holdDrafts.get(dropKey(h)) || "";
  $("hold-error").textContent = refusal ? shown(refusal) : "";
  $("hold-error").hidden = !refusal;
  if (!$("hold-dialog").open) $("hold-dialog").showModal();
  $("hold-reason").focus();
}

function cancelHold() {
  if (holdEntry) holdDrafts.delete(dropKey(holdEntry));
  $("hold-dialog").close();
}

async function confirmHold() {
  const typed = $("hold-reason").value;
  const reason = typed.trim();
  if (!reason) {
    $("hold-reason").focus();
    toast("A hold needs a reason.");
    return;
  }
  $("hold-dialog").close();
  const h = holdEntry;
  holdDrafts.set(dropKey(h), typed);
  let r;
  try {
    r = await forwardAction(h, "hold", reason);
  } catch (e) {
    if ((e.status === 400 || e.status === 413) && !(holdEntry !== h && $("hold-dialog").open)) {
      toast("Hold #" + h.id + " refused: " + e.message);
      askHold(h, e.message);
    } else {
      if (e.status === 404) holdDrafts.delete(dropKey(h)); // delivered or held meanwhile: nothing to hold
      toast("Hold #" + h.id + " failed: " + e.message);
      soon("forward", loadForward, 0);
      soon("outbox", loadOutbox, 0);
    }
    return;
  }
  holdDrafts.delete(dropKey(h));
  const said = "Held #" + h.id + ": the entries behind it go on; Retry or Drop it once resolved" + auditedAs(r);
  toast(said, true);
  await reloadAfter(said, true, loadOutbox, loadForward);
}

// startOutbox wires the drop and hold dialogs and the polls. A poll that fails says
// nothing: the live indicator already tells that the server is away.
function startOutbox() {
  $("drop-ok").addEventListener("click", confirmDrop);
  $("drop-cancel").addEventListener("click", cancelDrop);
  $("drop-reason").addEventListener("keydown", (e) => { if (e.key === "Enter") confirmDrop(); });
  $("hold-ok").addEventListener("click", confirmHold);
  $("hold-cancel").addEventListener("click", cancelHold);
  $("hold-reason").addEventListener("keydown", (e) => { if (e.key === "Enter") confirmHold(); });
  const quietly = (fn) => () => fn().catch(() => {});
  setInterval(() => { if (outbox.status && outbox.status.forwarding) soon("forward", quietly(loadForward), 0); }, FORWARD_POLL);
  setInterval(() => { if (outboxActive()) soon("outbox", quietly(loadOutbox), 0); }, OUTBOX_POLL);
}
