// The dashboard: the workspace list, the selected workspace's views, and live updates from
// /v1/events. Everything it shows comes from the API in the shapes of the CLI's --json.
//
// A workspace may have thousands of snapshots, so they are never all fetched as records: the
// picture draws compact rows (GET …/timeline), the table pages through full records
// (GET …/snapshots?limit=&before=), the detail fetches the one it shows, and a new snapshot
// announced on the event stream is added to what is loaded instead of reloading it all.

import { Actions } from "./actions.js";
import { DiffView } from "./diffview.js";
import { SessionsView } from "./sessions.js";
import { COL, Timeline } from "./timeline.js";
import { TYPE_COLORS, ago, api, clock, debounce, el, size, toast } from "./util.js";

const PAGE = 200;

class App {
  constructor() {
    this.wsId = null;
    this.workspaces = [];
    this.rows = [];        // every snapshot, oldest first, as GET …/timeline rows
    this.snapshots = [];   // the table's full records, newest first (the pages loaded so far)
    this.records = new Map();  // id -> full record (table pages, details, events)
    this.selected = null;
    this.shown = PAGE;
    this.tab = "timeline";
    this.actions = new Actions(this);
    this.timeline = new Timeline(document.getElementById("chart"), (id) => this.selectSnapshot(id));
    this.diff = new DiffView(this);
    this.sessions = new SessionsView(this);
    this.refresh = debounce(() => this.reload(), 150);
    this.refreshSide = debounce(() => this.reloadSide(), 200);
    this.redraw = debounce(() => { this.drawTimeline(); this.renderTable(); }, 150);
    this.refreshList = debounce(() => this.loadWorkspaces(), 400);
    this.bind();
  }

  bind() {
    document.querySelectorAll(".tabs button").forEach((b) => b.addEventListener("click", () => this.showTab(b.dataset.tab)));
    document.getElementById("btn-snapshot").addEventListener("click", () => this.actions.snapshot());
    document.getElementById("btn-undo").addEventListener("click", () => this.actions.undo());
    document.getElementById("btn-redo").addEventListener("click", () => this.actions.redo());
    document.getElementById("btn-verify").addEventListener("click", () => this.actions.verify());
    document.getElementById("more-snaps").addEventListener("click", () => this.moreSnapshots());
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
    if (this.wsId !== id) { this.selected = null; this.shown = PAGE; this.sessions.active = null; this.records.clear(); this.timeline.select(null); }
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
    let timeline, snapshots, runSessions, agent, ops;
    this.loading = true;
    try {
      [timeline, snapshots, runSessions, agent, ops] = await Promise.all([
        api("GET", `${base}/timeline`), api("GET", `${base}/snapshots?limit=${this.shown}`), api("GET", `${base}/sessions`),
        api("GET", `${base}/toolcalls`).catch(() => ({ tool_calls: [], sessions: [] })),
        api("GET", `${base}/operations`)]);
    } catch (err) {
      toast(err.message, { error: true });
      return;
    } finally {
      this.loading = false;
    }
    if (id !== this.wsId) return;
    this.rows = timeline.rows;
    this.index = new Map(this.rows.map((r, i) => [r[COL.id], i]));
    this.snapshots = snapshots;
    this.records = new Map(snapshots.map((s) => [s.id, s]));
    if (this.selected && !this.index.has(this.selected)) this.selected = null;
    this.applySide(runSessions, agent, ops);
    this.drawTimeline();
    this.renderTable();
    this.renderDetail();
    this.diff.stale = true;
    if (this.tab === "diff") this.diff.fill();
    this.refreshList();
  }

  /** Sessions, tool calls and the undo stack only (a tool call or a restore was announced):
   * small answers, and the snapshots already loaded stay as they are. */
  async reloadSide() {
    const id = this.wsId;
    if (!id || !this.index) return;
    const base = `/v1/workspaces/${encodeURIComponent(id)}`;
    let runSessions, agent, ops;
    try {
      [runSessions, agent, ops] = await Promise.all([api("GET", `${base}/sessions`),
        api("GET", `${base}/toolcalls`).catch(() => ({ tool_calls: [], sessions: [] })), api("GET", `${base}/operations`)]);
    } catch (err) {
      toast(err.message, { error: true });
      return;
    }
    if (id !== this.wsId) return;
    this.applySide(runSessions, agent, ops);
    this.redraw();
  }

  applySide(runSessions, agent, ops) {
    this.toolCalls = agent.tool_calls;
    this.runSessions = runSessions;
    this.operations = ops.operations;
    this.sessions.render(runSessions, agent);
    this.renderOps(ops);
    document.getElementById("btn-undo").disabled = !ops.next_undo;
    document.getElementById("btn-redo").disabled = !ops.next_redo;
  }

  drawTimeline() {
    this.timeline.selected = this.selected;
    this.timeline.render({ rows: this.rows, sessions: this.runSessions || [], toolCalls: this.toolCalls || [], operations: this.operations || [] });
  }

  /** The next page of the table: the snapshots older than the last one shown. */
  async moreSnapshots() {
    const last = this.snapshots[this.snapshots.length - 1];
    if (!last) return;
    const id = this.wsId;
    let page;
    try { page = await api("GET", `/v1/workspaces/${encodeURIComponent(id)}/snapshots?limit=${PAGE}&before=${encodeURIComponent(last.id)}`); } catch (err) { toast(err.message, { error: true }); return; }
    if (id !== this.wsId) return;
    const have = new Set(this.snapshots.map((s) => s.id));
    for (const s of page) if (!have.has(s.id)) { this.snapshots.push(s); this.records.set(s.id, s); }
    this.shown = this.snapshots.length;
    this.renderTable();
  }

  /** Snapshots as the diff view's choices, newest first: from the timeline rows (all of them). */
  choices() {
    return this.rows.map((r) => ({ id: r[COL.id], type: r[COL.type], label: r[COL.label] })).reverse();
  }

  /** A new snapshot from the event stream: add it to the picture, the table and the header
   * without fetching the rest again. */
  addSnapshot(s) {
    if (!this.index || this.index.has(s.id)) return;
    const row = [s.id, Date.parse(s.created_at), s.type, s.label, s.pinned, s.files, s.bytes, s.added_bytes,
      s.changes.created, s.changes.modified, s.changes.deleted];
    this.rows.push(row);
    if (this.rows.length > 1 && this.rows[this.rows.length - 2][COL.time] > row[COL.time]) this.rows.sort((a, b) => a[COL.time] - b[COL.time]);
    this.index = new Map(this.rows.map((r, i) => [r[COL.id], i]));
    this.records.set(s.id, s);
    if (!this.snapshots.length || Date.parse(this.snapshots[0].created_at) <= row[COL.time]) this.snapshots.unshift(s);
    this.shown = this.snapshots.length;
    this.diff.stale = true;
    this.redraw();
  }

  renderTable() {
    const body = document.querySelector("#snap-table tbody");
    const rows = this.snapshots.map((s) => el("tr" + (s.id === this.selected ? ".selected" : ""), { "data-id": s.id, onclick: () => this.selectSnapshot(s.id) },
      el("td.mono", { text: s.id }),
      el("td", {}, el("span.type", { style: `background:${TYPE_COLORS[s.type] || "#888"}` }), s.type + (s.pinned ? " ◆" : "")),
      el("td", { text: s.label || "", title: s.label || "" }),
      el("td.mono", { text: `+${s.changes.created} ~${s.changes.modified} -${s.changes.deleted}` }),
      el("td", { text: size(s.added_bytes) }),
      el("td", { text: ago(s.created_at), title: s.created_at })));
    body.replaceChildren(...rows);
    document.getElementById("more-snaps").classList.toggle("hidden", this.snapshots.length >= this.rows.length);
    document.getElementById("snap-count").textContent = this.rows.length > this.snapshots.length
      ? `newest ${this.snapshots.length} of ${this.rows.length}` : `${this.rows.length} snapshot${this.rows.length === 1 ? "" : "s"}`;
  }

  selectSnapshot(id) {
    if (!this.index || !this.index.has(id)) return;
    this.selected = id;
    this.timeline.select(id);
    if (this.tab !== "timeline") this.showTab("timeline");
    document.querySelectorAll("#snap-table tbody tr").forEach((r) => r.classList.toggle("selected", r.dataset.id === id));
    this.renderDetail();
  }

  async renderDetail() {
    const holder = document.getElementById("snap-detail");
    const id = this.selected;
    if (!id) { holder.replaceChildren(el("p.muted", { text: "Select a snapshot in the picture or the table." })); return; }
    let s = this.records.get(id);
    if (!s) {  // a point of the picture older than the table's pages: fetch its record
      holder.replaceChildren(el("p.muted", { text: `Loading ${id}…` }));
      try { s = await api("GET", `/v1/workspaces/${encodeURIComponent(this.wsId)}/snapshots/${encodeURIComponent(id)}`); } catch (err) { holder.replaceChildren(el("p.muted", { text: err.message })); return; }
      this.records.set(id, s);
      if (this.selected !== id) return;
    }
    const row = (k, v) => [el("dt", { text: k }), el("dd", { text: v })];
    const calls = (this.toolCalls || []).filter((c) => c.workspace_snapshot === s.id);
    holder.replaceChildren(
      el("h3", { "data-testid": "detail-title", "data-id": s.id, text: s.label || s.id }),
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
    const i = this.index ? this.index.get(id) : undefined;
    return i > 0 ? this.rows[i - 1][COL.id] : null;
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
    if (tab === "diff") this.diff.fill();
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
      // what each event needs reloaded: as little as possible, a long history being costly
      const here = data.workspace === this.wsId;
      if (ev.type === "snapshot" && here && data.snapshot && !this.loading) this.addSnapshot(data.snapshot);
      else if ((ev.type === "toolcall" || ev.type === "restore") && here && !this.loading) this.refreshSide();
      else if (ev.type !== "watcher" && (!data.workspace || here)) this.refresh();
      this.refreshList();
    };
    for (const kind of ["snapshot", "snapshot-removed", "snapshot-updated", "restore", "toolcall", "hooks", "workspace", "watcher", "resync"]) source.addEventListener(kind, onEvent);
  }
}

new App().start();
