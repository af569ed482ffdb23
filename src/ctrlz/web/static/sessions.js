// The session view: sessions of `ctrlz run` (the exec trace as a process tree, the file
// events) and agent sessions (tool calls grouped by turn, each with a rewind button).

import { api, clock, el, qs } from "./util.js";

export class SessionsView {
  constructor(app) {
    this.app = app;
    this.list = document.getElementById("session-list");
    this.view = document.getElementById("session-view");
    this.active = null;
  }

  base() { return `/v1/workspaces/${encodeURIComponent(this.app.wsId)}`; }

  render(runSessions, agent) {
    const items = [];
    for (const s of agent.sessions.slice().reverse()) {
      items.push(el("li", { "data-key": `agent:${s.session_id}`, onclick: () => this.showAgent(s.session_id) },
        el("div.kind", { text: `agent · ${s.agent || "unknown"}` }), el("div", { text: s.session_id }),
        el("div.muted", { text: `${s.turns} turn(s) · ${clock(s.last_activity)}` })));
    }
    for (const s of runSessions) {
      items.push(el("li", { "data-key": `run:${s.id}`, onclick: () => this.showRun(s.id) },
        el("div.kind", { text: "ctrlz run" }), el("div", { text: (s.command || []).join(" ").slice(0, 60) }),
        el("div.muted", { text: `${s.id} · ${s.ended ? `exit ${s.exit_code}` : "running"} · ${clock(s.started)}` })));
    }
    this.list.replaceChildren(...(items.length ? items : [el("li.muted", { text: "No sessions yet: `ctrlz run -- AGENT` or `ctrlz install AGENT`." })]));
    this.mark();
    if (this.active) this.reload();
  }

  mark() {
    for (const li of this.list.children) li.classList.toggle("active", li.dataset.key === this.active);
  }

  reload() {
    const [kind, id] = this.active.split(/:(.*)/s);
    return kind === "agent" ? this.showAgent(id) : this.showRun(id);
  }

  async showAgent(sid) {
    this.active = `agent:${sid}`; this.mark();
    let data;
    try { data = await api("GET", `${this.base()}/toolcalls${qs({ session: sid })}`); } catch (err) { this.view.replaceChildren(el("p.muted", { text: err.message })); return; }
    const turns = new Map();
    for (const c of data.tool_calls) {
      if (!turns.has(c.turn)) turns.set(c.turn, []);
      turns.get(c.turn).push(c);
    }
    const blocks = [...turns.entries()].map(([turn, calls]) => el("div.turn", { "data-testid": "turn" },
      el("div.turn-head", {}, `Turn ${turn}`, el("span.muted", { text: `${calls.length} tool call(s)` }), el("div.spacer"),
        el("button.small.ghost", { onclick: () => this.app.actions.rewind(turn, sid) }, "Rewind to before this turn")),
      calls.map((c) => el("div.call", {},
        el("span.badge", { text: c.tool || c.kind }),
        el("span.what", { title: c.command || c.captured_paths.join(", "), text: c.kind === "bash" ? (c.command || "") : c.captured_paths.join(", ") }),
        el("span.muted", { text: clock(c.taken_at).slice(11) }),
        el("button.small.ghost", { onclick: () => this.app.actions.rewind(c.tool_use_id, sid) }, "Rewind")))));
    this.view.replaceChildren(el("h3", { text: `Agent session ${sid}` }),
      ...(blocks.length ? blocks : [el("p.muted", { text: "No tool calls recorded." })]));
  }

  async showRun(id) {
    this.active = `run:${id}`; this.mark();
    let show, trace, events;
    try {
      [show, trace, events] = await Promise.all([
        api("GET", `${this.base()}/sessions/${encodeURIComponent(id)}`),
        api("GET", `${this.base()}/sessions/${encodeURIComponent(id)}/trace`),
        api("GET", `${this.base()}/sessions/${encodeURIComponent(id)}/events`),
      ]);
    } catch (err) { this.view.replaceChildren(el("p.muted", { text: err.message })); return; }
    const snaps = show.timeline.filter((i) => i.kind === "snapshot");
    this.view.replaceChildren(
      el("h3", { text: (show.command || []).join(" ") }),
      el("div.muted", { text: `${show.id} · started ${clock(show.started)} · ${show.ended ? `exit ${show.exit_code}` : "running"} · ${show.traced ? "traced" : `untraced (${show.trace_note || "no strace"})`}` }),
      el("h4", { text: `Snapshots (${snaps.length})` }),
      el("div.btn-row", {}, snaps.map((s) => el("button.small.ghost", { onclick: () => this.app.selectSnapshot(s.snapshot) }, `${s.type} ${s.snapshot}`))),
      el("h4", { text: `Processes (${trace.length})` }),
      trace.length ? processTree(trace) : el("p.muted", { text: "No processes recorded." }),
      el("h4", { text: `File events (${events.length})` }),
      el("div.events", {}, events.map((e) => el("div", {}, el("span.muted.mono", { text: clock(e.timestamp).slice(11) }), " ", el("b", { text: e.action }), " ", e.path))),
      ...refusals(show.denials || []));
  }
}

// What a sandboxed run's sandbox refused (`ctrlz run --sandbox`): writes outside the
// workspace (the tracer's) and connections (the proxy's). Nothing for an unsandboxed run.
function refusals(denials) {
  if (!denials.length) return [];
  const line = (d) => el("div", {}, el("span.muted.mono", { text: clock(d.timestamp).slice(11) }), " ",
    el("b.exit-bad", { text: d.kind === "net" ? "connect" : d.syscall }), " ", d.path,
    el("span.muted", { text: ` ${d.exe ? `${d.exe}[${d.pid}] ` : ""}(${d.errno})` }));
  return [el("h4", { text: `Refused by the sandbox (${denials.length})` }),
    el("div.events", { "data-testid": "denials" }, denials.map(line))];
}

function processTree(events) {
  const byPid = new Map(events.map((e) => [e.pid, { e, kids: [] }]));
  const roots = [];
  for (const node of byPid.values()) {
    const parent = byPid.get(node.e.ppid);
    if (parent && parent !== node) parent.kids.push(node); else roots.push(node);
  }
  const item = (node) => {
    const e = node.e;
    const status = e.signal ? `killed (${e.signal})` : e.exit_code === null ? "running" : `exit ${e.exit_code}`;
    return el("li", {},
      el("span.proc", { text: [e.command, ...(e.args || [])].join(" ").slice(0, 140) }), " ",
      el("span" + (e.signal || (e.exit_code !== null && e.exit_code !== 0) ? ".exit-bad" : ".muted"), { text: `[${status}${e.duration !== null ? `, ${e.duration.toFixed(2)} s` : ""}]` }),
      node.kids.length ? el("ul.tree", {}, node.kids.map(item)) : null);
  };
  return el("ul.tree.root", { "data-testid": "process-tree" }, roots.map(item));
}
