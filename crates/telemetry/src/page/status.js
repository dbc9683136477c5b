// The status page's script: renders the coordinator's views (the JSON of /api/status, see
// crates/telemetry/src/status.rs) and keeps them live: server-sent events from /api/events,
// or polling /api/status every POLL_MS when the event stream cannot be had. Text from the
// server only ever reaches the page as textContent, never as HTML.
"use strict";

const POLL_MS = 2000;
// Queue colours, in queue order; past the palette, hues spread by the golden angle.
const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#e15759", "#76b7b2",
  "#edc948", "#ff9da7", "#9c755f", "#bab0ac"];

let polling = null;

function queueColour(index) {
  if (index < PALETTE.length) return PALETTE[index];
  return `hsl(${Math.round((index * 137.508) % 360)}, 55%, 60%)`;
}

function element(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k === "style") Object.assign(e.style, v);
    else e.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

// "in 3m 10s" / "4s ago" from a time in ms since the epoch, relative to `now`.
function relative(ms, now) {
  if (ms === null || ms === undefined) return "";
  let s = Math.round((ms - now) / 1000);
  const future = s >= 0;
  s = Math.abs(s);
  const parts = [];
  for (const [unit, size] of [["d", 86400], ["h", 3600], ["m", 60]]) {
    if (s >= size) {
      parts.push(`${Math.floor(s / size)}${unit}`);
      s %= size;
    }
  }
  if (parts.length < 2) parts.push(`${s}s`);
  return future ? `in ${parts.join(" ")}` : `${parts.join(" ")} ago`;
}

function clock(ms) {
  return ms === null || ms === undefined ? "" : new Date(ms).toLocaleTimeString();
}

// "3 waiting for resources, 1 reserved" from a queue's pending reasons.
const PENDING_WORDS = [["resources", "waiting for resources"], ["reserved", "reserved"],
  ["no_reservation", "no start time found"], ["unavailable", "need nodes down or away"],
  ["queued", "queued"]];

function pendingText(reasons) {
  return PENDING_WORDS.filter(([key]) => reasons[key] > 0)
    .map(([key, words]) => `${reasons[key]} ${words}`).join(", ");
}

function renderQueues(status, colours) {
  const body = document.querySelector("#queues tbody");
  body.replaceChildren();
  for (const q of status.queues) {
    const state = [q.started ? "started" : "stopped", q.enabled ? "enabled" : "disabled"];
    if (q.name === status.default_queue) state.push("default");
    body.append(element("tr", { "data-queue": q.name },
      element("td", {},
        element("span", { class: "swatch", style: { backgroundColor: colours.get(q.name) } }),
        q.name),
      element("td", { class: q.online ? "" : "offline" },
        state.join(", ") + (q.online ? "" : " (shard offline)")),
      element("td", {}, q.policy),
      element("td", { class: "number" }, `${q.nodes_owned} / ${q.nodes_up} / ${q.nodes_defined}`),
      element("td", { class: "number", "data-count": "pending" }, q.jobs_pending),
      element("td", { "data-pending-reasons": "" }, pendingText(q.pending_reasons)),
      element("td", { class: "number", "data-count": "running" }, q.jobs_running),
      element("td", {}, q.reason || "")));
  }
}

function renderLegend(status, colours) {
  const legend = document.getElementById("legend");
  legend.replaceChildren();
  for (const q of status.queues) {
    legend.append(element("span", {},
      element("span", { class: "swatch", style: { backgroundColor: colours.get(q.name) } }),
      q.name));
  }
  legend.append(element("span", {}, "striped: drained · dark ✕: down · dashed: outgoing · dotted: incoming"));
}

function renderGrid(status, colours, moving) {
  const grid = document.getElementById("grid");
  grid.replaceChildren();
  for (const n of status.nodes) {
    const owner = n.queue || "";
    const move = moving.get(n.name);
    const style = {};
    if (n.state !== "not-owned" && owner) style.backgroundColor = colours.get(owner) || "#ccc";
    if (move) style.borderColor = colours.get(move.to) || "#333";
    let detail = n.state;
    if (n.jobs_running > 0) detail += ` · ${n.jobs_running} job${n.jobs_running === 1 ? "" : "s"}`;
    const title = [n.name, owner || "no queue", detail, n.reason || "",
      move ? `move ${move.id}: ${move.from} → ${move.to}` : ""].filter(Boolean).join(" — ");
    grid.append(element("div", {
      class: "node", "data-node": n.name, "data-owner": owner, "data-state": n.state,
      title, style,
    }, element("span", { class: "name" }, n.name), element("span", { class: "detail" }, detail)));
  }
}

function renderMoves(status) {
  const moves = document.getElementById("moves");
  moves.replaceChildren();
  if (status.moves.length === 0) {
    moves.append(element("p", { class: "none" }, "none"));
    return;
  }
  const now = status.time_ms;
  for (const m of status.moves) {
    const head = `move ${m.id}: ${m.from} → ${m.to}, ${m.status}, asked ${clock(m.started_ms)}` +
      (m.deadline_ms ? `, deadline ${relative(m.deadline_ms, now)}` : "");
    const rows = m.nodes.map((n) => element("tr", { "data-move-node": n.node },
      element("td", {}, n.node),
      element("td", {}, n.step),
      element("td", {}, n.step === "outgoing" && n.expected_free_ms
        ? `free ${relative(n.expected_free_ms, now)}` : ""),
      element("td", {}, n.jobs > 0
        ? `${n.jobs} job${n.jobs === 1 ? "" : "s"}` + (n.job_ids.length ? `: ${n.job_ids.join(" ")}` : "")
        : ""),
      element("td", {}, n.released_ms ? `released ${clock(n.released_ms)}` : ""),
      element("td", {}, n.acquired_ms ? `up ${clock(n.acquired_ms)}` : "")));
    moves.append(element("div", { class: "move", "data-move": m.id },
      element("h3", {}, head),
      element("table", {},
        element("thead", {}, element("tr", {}, ...["node", "step", "expected free", "jobs holding it",
          "released", "acquired"].map((h) => element("th", {}, h)))),
        element("tbody", {}, ...rows))));
  }
}

function render(status) {
  const colours = new Map(status.queues.map((q, i) => [q.name, queueColour(i)]));
  const moving = new Map();
  for (const m of status.moves) {
    if (m.status !== "active") continue;
    for (const n of m.nodes) moving.set(n.node, m);
  }
  renderQueues(status, colours);
  renderLegend(status, colours);
  renderGrid(status, colours, moving);
  renderMoves(status);
  document.getElementById("updated").textContent = `as of ${clock(status.time_ms)}`;
  document.getElementById("exposure").textContent = status.exposure === "redacted"
    ? "served off loopback: reasons and job ids left out" : "";
  document.body.dataset.updated = String(status.time_ms);
}

function setConnection(state, text) {
  const c = document.getElementById("connection");
  c.dataset.connection = state;
  c.textContent = text;
}

async function poll() {
  try {
    const response = await fetch("/api/status", { cache: "no-store" });
    if (!response.ok) throw new Error(`${response.status}`);
    render(await response.json());
    setConnection("polling", "polling");
  } catch (e) {
    setConnection("lost", `coordinator unreachable (${e.message}); retrying`);
  }
}

function startPolling() {
  if (polling !== null) return;
  poll();
  polling = setInterval(poll, POLL_MS);
}

function connect() {
  if (!("EventSource" in window)) {
    startPolling();
    return;
  }
  const events = new EventSource("/api/events");
  events.addEventListener("status", (e) => {
    render(JSON.parse(e.data));
    setConnection("live", "live");
  });
  events.onerror = () => {
    // A refused stream (too many pages open) or a lost coordinator: poll until the
    // browser's own reconnection brings events back.
    setConnection("lost", "reconnecting…");
    if (events.readyState === EventSource.CLOSED) startPolling();
  };
  events.onopen = () => {
    if (polling !== null) {
      clearInterval(polling);
      polling = null;
    }
  };
}

connect();
