// The diff viewer: pick two points (or one and the working tree), list the changed paths,
// and render one file's unified diff with diff2html + highlight.js (side by side or in line).
// Binary, large and directory changes are summarised instead.

import { api, el, qs, size } from "./util.js";

// diff2html learns a file was created or deleted from git's extended header lines
function gitHeader(p) {
  const head = `diff --git a/${p.path} b/${p.path}\n`;
  if (p.change === "created") return head + `new file mode 100${p.new_mode || "644"}\n`;
  if (p.change === "deleted") return head + `deleted file mode 100${p.old_mode || "644"}\n`;
  return head;
}

const LETTER = { created: "A", modified: "M", deleted: "D", permissions_changed: "P" };

export class DiffView {
  constructor(app) {
    this.app = app;
    this.a = document.getElementById("diff-a");
    this.b = document.getElementById("diff-b");
    this.files = document.getElementById("diff-files");
    this.view = document.getElementById("diff-view");
    this.side = document.getElementById("diff-side");
    this.current = null;
    this.stale = true;
    document.getElementById("diff-go").addEventListener("click", () => this.compare());
    this.side.addEventListener("change", () => this.current && this.showFile(this.current));
  }

  base() { return `/v1/workspaces/${encodeURIComponent(this.app.wsId)}`; }

  /** The two pickers' choices: every snapshot (from the timeline's rows), filled only when
   * the view is used and something changed, since a long history makes thousands of options. */
  fill() {
    if (!this.stale) return;
    this.stale = false;
    const snapshots = this.app.choices();
    const keepA = this.a.value, keepB = this.b.value;
    const option = (s) => el("option", { value: s.id }, `${s.id} · ${s.type}${s.label ? ` · ${s.label.slice(0, 40)}` : ""}`);
    this.a.replaceChildren(...snapshots.map(option));
    this.b.replaceChildren(el("option", { value: "working" }, "working tree"), ...snapshots.map(option));
    if (keepA && snapshots.some((s) => s.id === keepA)) this.a.value = keepA;
    if (keepB && (keepB === "working" || snapshots.some((s) => s.id === keepB))) this.b.value = keepB;
  }

  open(a, b) {
    this.fill();
    if (a) this.a.value = a;
    this.b.value = b || "working";
    this.app.showTab("diff");
    return this.compare();
  }

  async compare() {
    const old = this.a.value, nw = this.b.value;
    this.files.replaceChildren(el("li.muted", { text: "comparing…" }));
    let d;
    try {
      d = await api("GET", `${this.base()}/diff${qs({ old, new: nw })}`);
    } catch (err) {
      this.files.replaceChildren(el("li.muted", { text: err.message }));
      return;
    }
    this.diff = d;
    const changes = d.changes.filter((c) => c.kind !== "dir" || c.change === "permissions_changed");
    if (!changes.length) {
      this.files.replaceChildren(el("li.muted", { text: "no changes" }));
      this.view.replaceChildren(el("p.muted", { text: `Nothing changed from ${d.old} to ${d.new}.` }));
      return;
    }
    this.files.replaceChildren(...changes.map((c) => el("li", {
      "data-path": c.path, title: c.path, onclick: () => this.showFile(c),
    }, el("span.letter." + LETTER[c.change], { text: LETTER[c.change] }), el("span.path", { text: c.path }),
    el("span.muted", { text: c.size_delta === null ? "" : (c.size_delta >= 0 ? "+" : "") + size(c.size_delta) }))));
    this.view.replaceChildren(el("p.muted", { text: `${changes.length} changed path(s) from ${d.old} to ${d.new}. Pick one.` }));
    await this.showFile(changes[0]);
  }

  async showFile(change) {
    this.current = change;
    for (const li of this.files.children) li.classList.toggle("active", li.dataset.path === change.path);
    const d = this.diff;
    let p;
    try {
      p = await api("GET", `${this.base()}/patch${qs({ old: d.old, new: d.new === "working tree" ? "working" : d.new, path: change.path })}`);
    } catch (err) {
      if (this.current === change) this.view.replaceChildren(el("p.muted", { text: err.message }));
      return;
    }
    if (this.current !== change) return;  // another file was picked while this one loaded
    const head = el("div.diff-head", {}, el("b", { text: change.path }), el("span.muted", { text: `${change.change}` }),
      el("div.spacer"),
      el("button.small.ghost", { "data-testid": "revert-path", onclick: () => this.app.actions.revert(change.path, d.old) }, `Revert to ${d.old}`));
    let body;
    if (p.patch === null) {
      const why = p.binary ? "binary file" : p.large ? "large file, not shown line by line" : p.kind === "dir" ? "directory" : "mode change";
      body = el("div.summary-box", {}, el("div", { text: why }),
        el("div", { text: `${size(p.old_size)} → ${size(p.new_size)}${p.old_mode !== p.new_mode ? ` · mode ${p.old_mode || "-"} → ${p.new_mode || "-"}` : ""}` }));
    } else if (!p.patch.trim()) {
      body = el("div.summary-box", { text: "same content (only the mode or type changed)" });
    } else {
      body = el("div", { "data-testid": "patch" });
      this.render(body, gitHeader(p) + p.patch);
    }
    this.view.replaceChildren(head, body);
  }

  render(target, text) {
    if (!window.Diff2HtmlUI) {
      target.append(el("pre", { text }));
      return;
    }
    const ui = new window.Diff2HtmlUI(target, text, {
      drawFileList: false, matching: "lines", outputFormat: this.side.checked ? "side-by-side" : "line-by-line",
      highlight: true, fileContentToggle: false, synchronisedScroll: true,
    }, window.hljs);
    ui.draw();
    ui.highlightCode();
  }
}
