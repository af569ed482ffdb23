// The dashboard: the workspace list, the selected workspace's views, and live updates from
// /v1/events. Everything it shows comes from the API in the shapes of the CLI's --json.

import { Actions } from "./actions.js";
import { DiffView } from "./diffview.js";
import { SessionsView } from "./sessions.js";
import { Timeline } from "./timeline.js";
import { TYPE_COLORS, ago, api, clock, debounce, el, size, toast } from "./util.js";

const PAGE = 200;

class App {
  constructor() {
    this.wsId = null;
    this.workspaces = [];
    this.snapshots = [];
    this.selected = null;
    this.shown = PAGE;
    this.tab = "timeline";
    this.actions = new Actions(this);
    this.timeline = new Timeline(document.getElementById("chart"), (id) => this.selectSnapshot(id));
    this.diff = new DiffView(this);
    this.sessions = new SessionsView(this);
    this.refresh = debounce(() => this.reload(), 150);
    this.refreshList = debounce(() => this.loadWorkspaces(), 400);
    this.bind();
  }

  bind() {
    document.querySelectorAll(".tabs button").forEach((b) => b.addEventListener("click", () => this.showTab(b.dataset.tab)));
    document.getElementById("btn-snapshot").addEventListener("click", () => this.actions.snapshot());
    document.getElementById("btn-undo").addEventListener("click", () => this.actions.undo());
    document.getElementById("btn-redo").addEventListener("click", () => this.actions.redo());
    document.getElementById("btn-verify").addEventListener("click", () => this.actions.verify());
    document.getElementById("more-snaps").addEventListener("click", () => { this.shown += PAGE; this.renderTable(); });
    document.getElementById("register").addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const input = document.getElementById("register-path");
      try {
        const w = await api("POST", "/v1/workspaces", { path: input.value.trim() });
        input.value = "";
        toast(`Watching ${w.root}.`);
        await this.loadWorkspaces();
        this.open(w.id);
      } catch (err) { toast(err.message, { error: true }); }
    });
    window.addEventListener("hashchange", () => this.fromHash());
  }

  async start() {
    await this.loadWorkspaces();
    this.fromHash();
    if (!this.wsId && this.workspaces.length === 1) this.open(this.workspaces[0].id);
    this.listen();
  }

  fromHash() {
    const id = decodeURIComponent(location.hash.replace(/^#\/?/, ""));
    if (id && id !== this.wsId && this.workspaces.some((w) => w.id === id)) this.open(id);
  }

  // -- the workspace list ------------------------------------------------------------------

  async loadWorkspaces() {
    try { this.workspaces = await api("GET", "/v1/workspaces"); } catch (err) { toast(err.message, { error: true }); return; }
    document.getElementById("ws-count").textContent = this.workspaces.length;
    const list = document.getElementById("workspaces");
    list.replaceChildren(...this.workspaces.map((w) => this.card(w)));
    if (!this.workspaces.length) list.append(el("li.muted", { text: "No protected workspace yet. Run `ctrlz init` in one." }));
    if (this.wsId) this.header();
  }

  card(w) {
    const st = w.status;
    const name = w.root.split("/").filter(Boolean).pop() || w.root;
    const watcher = w.watcher ? w.watcher.state : w.registered ? "waiting" : null;
    const badge = !w.present ? el("span.badge.bad", { text: "gone" })
      : watcher === "running" || watcher === "external" ? el("span.badge.ok", { text: "watched" })
        : watcher ? el("span.badge.warn", { text: watcher }) : el("span.badge", { text: "protected" });
    const ratio = st ? Math.min(1, st.store_bytes / Math.max(1, st.store_cap)) : 0;
    return el("li.ws-item" + (w.id === this.wsId ? ".active" : ""), { "data-id": w.id, "data-testid": "workspace", onclick: () => this.open(w.id) },
      el("div.ws-name", {}, name, badge, st && st.problems.length ? el("span.badge.warn", { title: st.problems.join("\n"), text: `${st.problems.length} problem(s)` }) : null),
      el("div.ws-root", { text: w.root, title: w.root }),
      st ? el("div.ws-meta", {},
        el("span", { text: `${st.snapshots} snapshots` }),
        el("span", { text: st.last ? `last ${ago(st.last.created_at)}` : "none yet" }),
        el("span", { text: `${size(st.store_bytes)} / ${size(st.store_cap)}` })) : el("div.ws-meta", { text: w.problem || "" }),
      st ? el("div.cap" + (st.store_bytes > st.store_cap ? ".over" : ""), { title: "store size against its cap" }, el("div", { style: `width:${(ratio * 100).toFixed(1)}%` })) : null);
  }

  open(id) {
    if (this.wsId !== id) { this.selected = null; this.shown = PAGE; this.sessions.active = null; }
    this.wsId = id;
    if (location.hash !== `#${id}`) history.replaceState(null, "", `#${id}`);
    document.querySelectorAll(".ws-item").forEach((n) => n.classList.toggle("active", n.dataset.id === id));
    document.getElementById("empty").classList.add("hidden");
    document.getElementById("workspace").classList.remove("hidden");
    this.header();
    this.reload();
  }

  header() {
    const w = this.workspaces.find((x) => x.id === this.wsId);
    if (!w) return;
    const st = w.status;
    document.getElementById("crumb").textContent = w.root;
    document.getElementById("ws-title").textContent = w.root.split("/").filter(Boolean).pop() || w.root;
    document.getElementById("ws-sub").textContent = `${w.root} · store ${w.store}`;
    document.getElementById("btn-undo").disabled = !(st && st.can_undo);
    document.getElementById("btn-redo").disabled = !(st && st.can_redo);
    const stat = (value, label) => el("div.stat", {}, el("b", { text: value }), el("span", { text: label }));
    const watcher = w.watcher ? `${w.watcher.state}${w.watcher.restarts ? ` (${w.watcher.restarts} restarts)` : ""}` : w.registered ? "waiting" : "not registered";
    const stats = st ? [
      stat(String(st.snapshots), "snapshots"),
      stat(st.last ? ago(st.last.created_at) : "-", "last snapshot"),
      stat(`${size(st.store_bytes)}`, `store, cap ${size(st.store_cap)}`),
      stat(watcher, "watcher"),
      stat(st.can_undo ? "yes" : "no", "can undo"),
    ] : [stat("-", w.problem || "unavailable")];
    const holder = document.getElementById("ws-stats");
    holder.replaceChildren(...stats);
    if (st && st.problems.length) holder.append(el("div.problems", {}, st.problems.map((p) => el("div", { text: `⚠ ${p}` }))));
  }

  // -- the selected workspace --------------------------------------------------------------

  async reload() {
    const id = this.wsId;
    if (!id) return;
    const base = `/v1/workspaces/${encodeURIComponent(id)}`;
    let snapshots, runSessions, agent, ops;
    try {
      [snapshots, runSessions, agent, ops] = await Promise.all([
        api("GET", `${base}/snapshots`), api("GET", `${base}/sessions`),
        api("GET", `${base}/toolcalls`).catch(() => ({ tool_calls: [], sessions: [] })),
        api("GET", `${base}/operations`)]);
    } catch (err) {
      toast(err.message, { error: true });
      return;
    }
    if (id !== this.wsId) return;
    this.snapshots = snapshots;
    this.toolCalls = agent.tool_calls;
    this.timeline.render({ snapshots, sessions: runSessions, toolCalls: agent.tool_calls, operations: ops.operations });
    this.renderTable();
    this.renderDetail();
    this.diff.fill(snapshots);
    this.sessions.render(runSessions, agent);
    this.renderOps(ops);
    document.getElementById("btn-undo").disabled = !ops.next_undo;
    document.getElementById("btn-redo").disabled = !ops.next_redo;
    this.refreshList();
  }

  renderTable() {
    const body = document.querySelector("#snap-table tbody");
    const rows = this.snapshots.slice(0, this.shown).map((s) => el("tr" + (s.id === this.selected ? ".selected" : ""), { "data-id": s.id, onclick: () => this.selectSnapshot(s.id) },
      el("td.mono", { text: s.id }),
      el("td", {}, el("span.type", { style: `background:${TYPE_COLORS[s.type] || "#888"}` }), s.type + (s.pinned ? " ◆" : "")),
      el("td", { text: s.label || "", title: s.label || "" }),
      el("td.mono", { text: `+${s.changes.created} ~${s.changes.modified} -${s.changes.deleted}` }),
      el("td", { text: size(s.added_bytes) }),
      el("td", { text: ago(s.created_at), title: s.created_at })));
    body.replaceChildren(...rows);
    document.getElementById("more-snaps").classList.toggle("hidden", this.snapshots.length <= this.shown);
  }

  selectSnapshot(id) {
    if (!this.snapshots.some((s) => s.id === id)) return;
    this.selected = id;
    this.timeline.select(id);
    if (this.tab !== "timeline") this.showTab("timeline");
    document.querySelectorAll("#snap-table tbody tr").forEach((r) => r.classList.toggle("selected", r.dataset.id === id));
    this.renderDetail();
  }

  renderDetail() {
    const holder = document.getElementById("snap-detail");
    const s = this.snapshots.find((x) => x.id === this.selected);
    if (!s) { holder.replaceChildren(el("p.muted", { text: "Select a snapshot in the picture or the table." })); return; }
    const row = (k, v) => [el("dt", { text: k }), el("dd", { text: v })];
    const calls = (this.toolCalls || []).filter((c) => c.workspace_snapshot === s.id);
    holder.replaceChildren(
      el("h3", { text: s.label || s.id }),
      el("dl", {}, row("id", s.id), row("type", s.type + (s.pinned ? " (pinned)" : "")), row("created", `${clock(s.created_at)} (${ago(s.created_at)})`),
        row("files", `${s.files} files, ${s.dirs} dirs, ${s.symlinks} symlinks`), row("size", `${size(s.bytes)} (${s.size_delta >= 0 ? "+" : ""}${size(s.size_delta)}), ${size(s.added_bytes)} new`),
        row("changes", `+${s.changes.created} ~${s.changes.modified} -${s.changes.deleted}`), row("parent", s.parent || "-"),
        calls.length ? row("before", calls.map((c) => `${c.tool || c.kind} (turn ${c.turn})`).join(", ")) : []),
      el("div.btn-row", {},
        el("button.small", { "data-testid": "diff-working", onclick: () => this.diff.open(s.id, "working") }, "Diff vs now"),
        el("button.small.ghost", { onclick: () => this.diff.open(this.previousOf(s.id) || s.id, s.id) }, "What it changed"),
        el("button.small", { "data-testid": "rollback", onclick: () => this.actions.rollback(s) }, "Roll back to this…"),
        el("button.small.ghost", { onclick: () => this.actions.pin(s) }, s.pinned ? "Unpin" : "Pin"),
        el("button.small.ghost", { onclick: () => this.actions.remove(s) }, "Delete")));
  }

  previousOf(id) {
    const i = this.snapshots.findIndex((s) => s.id === id);
    return i >= 0 && i + 1 < this.snapshots.length ? this.snapshots[i + 1].id : null;
  }

  renderOps(ops) {
    const body = document.querySelector("#ops-table tbody");
    body.replaceChildren(...ops.operations.slice().reverse().map((o) => el("tr", {},
      el("td", { text: o.seq }), el("td", { text: o.kind + (o.undone ? " (undone)" : "") }), el("td.mono", { text: o.target }),
      el("td", { text: o.paths.join(", ") || "everything" }), el("td.mono", { text: o.before || "-" }),
      el("td", { text: o.status }), el("td", { text: ago(o.created_at), title: o.created_at }))));
    if (!ops.operations.length) body.append(el("tr", {}, el("td.muted", { colspan: 7, text: "No rollback, revert or rewind yet." })));
  }

  showTab(tab) {
    this.tab = tab;
    document.querySelectorAll(".tabs button").forEach((b) => b.classList.toggle("active", b.dataset.tab === tab));
    for (const t of ["timeline", "diff", "sessions", "operations"]) document.getElementById(`tab-${t}`).classList.toggle("hidden", t !== tab);
    if (tab === "timeline") this.timeline.resize();
  }

  // -- live updates ------------------------------------------------------------------------

  listen() {
    const live = document.getElementById("live"), text = document.getElementById("live-text");
    const source = new EventSource("/v1/events");
    source.onopen = () => { live.className = "live on"; text.textContent = "live"; };
    source.onerror = () => { live.className = "live off"; text.textContent = "reconnecting"; };
    const onEvent = (ev) => {
      let data = {};
      try { data = JSON.parse(ev.data); } catch { return; }
      if (!data.workspace || data.workspace === this.wsId) this.refresh();
      this.refreshList();
    };
    for (const kind of ["snapshot", "snapshot-removed", "snapshot-updated", "restore", "toolcall", "workspace", "watcher", "resync"]) source.addEventListener(kind, onEvent);
  }
}

new App().start();
