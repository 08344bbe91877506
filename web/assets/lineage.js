// replayguard dashboard: an entity's lineage. Clicking an entity card opens
// the #lineage dialog over GET /api/v1/explain/<entity>: the entity's state,
// every decision that changed it with what each did to its fields, and
// under each the replays suppressed and the deliveries held with the same
// key. Read again while it is open when the event stream says the entity
// changed. Loaded before app.js, whose helpers (el, api, soon, fieldText, shown)
// it uses, and which calls openLineage and onLineageChanged.
"use strict";

const lineage = {
  name: "",    // the entity shown; "" while closed
  data: null,  // the last GET /api/v1/explain answer
  error: "",   // why there is none
  seq: 0,      // the latest request; an older answer is dropped
};

const dateTimeOf = (t) => new Date(t).toLocaleString([], { hour12: false });

// explainPath escapes an entity's name whole, its slashes too: a name with
// an empty level or a dot segment ("incident/z/../7") would otherwise be
// cleaned into another entity's path by the browser or the server.
function explainPath(name) {
  return "/api/v1/explain/" + encodeURIComponent(name);
}

function openLineage(name) {
  lineage.name = name;
  lineage.data = null;
  lineage.error = "";
  renderLineage();
  const d = $("lineage");
  if (!d.open) d.showModal();
  loadLineage();
}

async function loadLineage() {
  const name = lineage.name, seq = ++lineage.seq;
  let data = null, error = "";
  try {
    data = await api(explainPath(name));
  } catch (e) {
    error = e.message;
  }
  if (seq !== lineage.seq || name !== lineage.name) return;
  lineage.data = data;
  lineage.error = error;
  renderLineage();
}

// onLineageChanged is told of the entities whose state the event stream
// changed.
function onLineageChanged(changed) {
  if (lineage.name && changed.has(lineage.name)) soon("lineage", loadLineage, 300);
}

function closeLineage() {
  lineage.name = "";
  lineage.seq++;
  $("lineage").close();
}

function renderLineage() {
  $("lineage-name").textContent = shown(lineage.name);
  const l = lineage.data;
  $("lineage-summary").textContent = l ? lineageSummary(l) : "";
  const body = $("lineage-body");
  body.replaceChildren();
  if (!l) {
    body.append(lineage.error ? el("div", "banner", lineage.error) : el("div", "empty", "Reading the audit log…"));
    return;
  }
  body.append(lineageState(l));
  if (l.read.applied_without_effects > 0) {
    body.append(el("div", "banner note", l.read.applied_without_effects + " applied records say nothing of what they changed " +
      "(written before records did, or of a route that changes no entity): any change of theirs is not listed."));
  }
  const table = el("table", "changes");
  const head = el("tr");
  for (const [text, cls] of [["#", "num"], ["time", ""], ["route", ""], ["source", ""], ["epoch", ""], ["seq", "num"],
    ["outcome", ""], ["changed", ""]]) {
    head.append(el("th", cls, text));
  }
  table.append(el("thead"), el("tbody"));
  table.tHead.append(head);
  for (const c of l.changes) {
    table.tBodies[0].append(changeRow(c));
    const others = otherDeliveries(c);
    if (others) table.tBodies[0].append(others);
  }
  body.append(table);
}

function lineageSummary(l) {
  const parts = [l.changes.length + (l.changes.length === 1 ? " change" : " changes")];
  if (l.field) parts.push("to " + l.field);
  parts.push(l.suppressed + (l.suppressed === 1 ? " replay" : " replays") + " suppressed");
  if (l.twins) parts.push(l.twins + (l.twins === 1 ? " twin" : " twins") + " from the other path");
  if (l.at) parts.push("up to " + dateTimeOf(l.at));
  parts.push(l.read.records.toLocaleString() + " audit records read");
  return parts.join(" · ");
}

// lineageState is the entity's fields as the entity card shows them.
function lineageState(l) {
  const box = el("div", "lineage-state");
  box.append(el("h4", "", l.at ? "state at " + dateTimeOf(l.at) : "state"));
  const dl = el("dl");
  for (const k of Object.keys(l.state).sort()) dl.append(el("dt", "", k), el("dd", "", fieldText(l.state[k])));
  box.append(dl);
  return box;
}

const where = (d) => (d.member ? d.member : "") + "#" + d.position;

function changeRow(c) {
  const tr = el("tr", "change");
  tr.dataset.position = c.position;
  const outcome = el("td");
  outcome.append(el("span", "badge " + c.outcome, c.outcome));
  if (c.ref) outcome.append(el("span", "muted", " of #" + c.ref));
  if (c.operator) outcome.append(el("span", "muted", " by " + c.operator));
  const effects = el("td", "effects");
  for (const e of c.effects) {
    const line = el("div", "effect");
    line.append(el("span", "field", e.field), el("span", "op", e.op), el("span", "value", fieldText(e.value)),
      el("span", "arrow", "→"), el("span", "after", fieldText(e.after)));
    if (e.lost) {
      const lost = el("span", "lost", "lost");
      lost.title = "older than the field's value: it stays " + fieldText(e.after);
      line.append(lost);
    }
    if (e.historical) {
      const hist = el("span", "historical", "historical");
      hist.title = "a historical value, not the current one: the field stays " + fieldText(e.after);
      line.append(hist);
    }
    effects.append(line);
  }
  tr.append(el("td", "num", where(c)), el("td", "", dateTimeOf(c.time)), el("td", "", c.route || "—"),
    el("td", "", (c.source || []).join("/") || "—"), el("td", "", c.epoch || "—"),
    el("td", "num", c.sequence !== undefined ? String(c.sequence) : (c.id || "—")), outcome, effects);
  tr.title = shown(c.topic + (c.key ? "\nkey " + c.key : "") + (c.broker ? "\nbroker " + c.broker : "") + (c.feed ? "\nfeed " + c.feed : ""));
  return tr;
}

// otherDeliveries is a row under a change listing the replays suppressed
// and the deliveries held with its key, or null when there are none.
function otherDeliveries(c) {
  if (!c.suppressed.length && !c.held.length) return null;
  const tr = el("tr", "others");
  tr.dataset.position = c.position;
  const td = el("td");
  td.colSpan = 8;
  for (const d of c.suppressed) {
    const line = el("div", "other suppressed");
    line.append(el("span", "badge duplicate", "suppressed"), el("span", "num", where(d)), el("span", "", dateTimeOf(d.time)),
      el("span", "", "broker " + (d.broker || "—") + (d.feed ? " · feed " + d.feed : "")));
    if (d.dup) line.append(el("span", "dup", "DUP"));
    td.append(line);
  }
  for (const d of c.held) {
    const line = el("div", "other held-delivery");
    line.append(el("span", "badge " + d.outcome, d.outcome), el("span", "num", where(d) + (d.ref ? " of #" + d.ref : "")),
      el("span", "", dateTimeOf(d.time)));
    if (!d.ref) { // a delivery: the path that brought it
      line.append(el("span", "", "broker " + (d.broker || "—") + (d.feed ? " · feed " + d.feed : "")));
      if (d.dup) line.append(el("span", "dup", "DUP"));
    }
    if (d.reason) line.append(el("span", "reason", d.reason));
    if (d.operator) line.append(el("span", "", "by " + d.operator));
    td.append(line);
  }
  tr.append(td);
  return tr;
}

function startLineage() {
  const d = $("lineage");
  $("lineage-close").addEventListener("click", closeLineage);
  d.addEventListener("cancel", (e) => { e.preventDefault(); closeLineage(); });
  d.addEventListener("click", (e) => { if (e.target === d) closeLineage(); }); // the backdrop
  const cards = $("entities");
  cards.addEventListener("click", (e) => {
    const card = e.target.closest(".entity");
    if (card) openLineage(card.dataset.name);
  });
  cards.addEventListener("keydown", (e) => {
    const card = e.target.closest(".entity");
    if (card && (e.key === "Enter" || e.key === " ")) {
      e.preventDefault();
      openLineage(card.dataset.name);
    }
  });
}
