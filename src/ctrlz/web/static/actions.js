// Actions that change a workspace. Each shows its dry-run plan (or, for undo and redo, the
// operation it takes back) in a confirmation dialog first, then reports the result with an
// "Undo" button: every restore takes a safety snapshot, so every one can be taken back.

import { api, el, toast } from "./util.js";

function ask(title, body, okLabel = "Confirm", danger = false) {
  const dialog = document.getElementById("confirm");
  document.getElementById("confirm-title").textContent = title;
  const holder = document.getElementById("confirm-body");
  holder.replaceChildren(body);
  const ok = document.getElementById("confirm-ok");
  ok.textContent = okLabel;
  ok.className = danger ? "danger" : "";
  dialog.returnValue = "";
  dialog.showModal();
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
  });
}

// What the restore does to each git repository's history (ctrlz.engine.restore.githistory): one line
// each. When it would drop commits, the real restore is refused unless the caller chooses, so
// the dialog asks: keep .git as it is (files only, the preselected, safe choice) or put it
// back too. ``mode()`` is the choice to send (undefined: none was needed).
function gitView(plan) {
  const changes = plan.git || [];
  if (!changes.length) return { node: null, mode: () => undefined };
  const lines = el("ul", { "data-testid": "plan-git" }, changes.map((g) => el("li", { text: g.summary })));
  if (!changes.some((g) => g.at_risk)) return { node: lines, mode: () => undefined };
  const radio = (value, label, checked) => el("label", { style: "display:block" },
    el("input", { type: "radio", name: "git-mode", value, checked, "data-testid": `git-${value}` }), " ", label);
  const node = el("div", {}, lines,
    el("p", { text: "This would take commits made since the snapshot out of the repository. Choose:" }),
    radio("keep", "Keep .git as it is: files only, branches and commits stay", true),
    radio("restore", "Put .git back too: branches move back (Undo brings the commits back)", false));
  return { node, mode: () => (node.querySelector("input[name=git-mode]:checked") || {}).value || "keep" };
}

function planView(plan, extra, git) {
  const c = plan.counts || {};
  const items = (plan.actions || []).filter((a) => !["mkdir", "rmdir", "dirmode", "utime"].includes(a.op));
  const list = el("ul", { "data-testid": "plan-actions" }, items.slice(0, 200).map((a) => el("li", {}, el("code", {}, a.op), " ", a.path)));
  if (items.length > 200) list.append(el("li.muted", { text: `… and ${items.length - 200} more` }));
  return el("div", {},
    extra || null,
    git ? git.node : null,
    el("div.plan-counts", {},
      el("span", { text: `${c.created || 0} to create` }), el("span", { text: `${c.modified || 0} to modify` }),
      el("span", { text: `${c.deleted || 0} to delete` }), el("span", { text: `${c.permissions_changed || 0} mode changes` })),
    items.length ? list : el("p.muted", { text: "Nothing on disk would change." }),
    (plan.skipped || []).length ? el("p.muted", { text: `${plan.skipped.length} path(s) left alone (not covered or changed since).` }) : null,
    el("p.muted", { text: "A safety snapshot is taken first; Undo puts everything back." }));
}

function rewindView(plan) {
  return el("div", {},
    el("p", { text: `${plan.tool_calls.length} tool call(s) undone${plan.shell_snapshot ? `, shell changes from ${plan.shell_snapshot}` : ""}.` }),
    el("ul", {}, plan.changed_paths.slice(0, 200).map((p) => el("li", {}, p))),
    (plan.skipped || []).length ? el("p.muted", { text: `${plan.skipped.length} path(s) edited since are left alone.` }) : null,
    el("p.muted", { text: "A safety snapshot is taken first; Undo puts everything back." }));
}

export class Actions {
  constructor(app) { this.app = app; }

  base() { return `/v1/workspaces/${encodeURIComponent(this.app.wsId)}`; }

  async run(work, done) {
    try {
      const result = await work();
      if (done) done(result);
      this.app.refresh();
      return result;
    } catch (err) {
      toast(err.message, { error: true });
      return null;
    }
  }

  undoAction() { return { label: "Undo", run: () => this.undo(true) }; }

  async rollback(snap, paths) {
    const body = { snapshot: snap.id, paths: paths || [] };
    let plan;
    try { plan = await api("POST", `${this.base()}/rollback`, { ...body, dry_run: true }); } catch (err) { return toast(err.message, { error: true }); }
    const what = paths && paths.length ? paths.join(", ") : "the workspace";
    const git = gitView(plan);
    const ok = await ask(`Roll ${what} back to ${snap.id}${snap.label ? ` "${snap.label}"` : ""}?`, planView(plan, null, git), "Roll back");
    if (!ok) return null;
    return this.run(() => api("POST", `${this.base()}/rollback`, { ...body, git: git.mode() }), (r) => {
      const c = r.counts;
      const moved = (r.git || []).map((g) => ` ${g.summary}.`).join("");
      toast(`Rolled back to ${r.target}: ${c.created} created, ${c.modified} modified, ${c.deleted} deleted.${moved} Safety snapshot ${r.safety_snapshot}.`, { action: this.undoAction() });
    });
  }

  async revert(path, from) {
    const body = { path, from };
    let plan;
    try { plan = await api("POST", `${this.base()}/revert`, { ...body, dry_run: true }); } catch (err) { return toast(err.message, { error: true }); }
    const ok = await ask(`Revert ${path} to ${plan.target}?`, planView(plan), "Revert");
    if (!ok) return null;
    return this.run(() => api("POST", `${this.base()}/revert`, body), (r) => {
      toast(`Reverted ${path} from ${r.target}. Safety snapshot ${r.safety_snapshot}.`, { action: this.undoAction() });
    });
  }

  async rewind(target, session) {
    const body = { target: String(target), session };
    let plan;
    try { plan = await api("POST", `${this.base()}/rewind`, { ...body, dry_run: true }); } catch (err) { return toast(err.message, { error: true }); }
    const ok = await ask(`Rewind to just before ${target}?`, rewindView(plan), "Rewind");
    if (!ok) return null;
    return this.run(() => api("POST", `${this.base()}/rewind`, body), (r) => {
      toast(`Rewound ${r.tool_calls.length} tool call(s). Safety snapshot ${r.safety_snapshot}.`, { action: this.undoAction() });
    });
  }

  async undo(skipConfirm = false) {
    const ops = await api("GET", `${this.base()}/operations`).catch(() => null);
    const op = ops && ops.next_undo;
    if (!op) return toast("Nothing to undo.", { error: true });
    let git = { mode: () => undefined };
    if (!skipConfirm) {
      let dry;
      try { dry = await api("POST", `${this.base()}/undo`, { dry_run: true }); } catch (err) { return toast(err.message, { error: true }); }
      const intro = el("p", { text: `Undo the ${op.kind} to ${op.target}${op.paths.length ? ` of ${op.paths.join(", ")}` : ""}: put back the state from its safety snapshot ${op.before}. Redo takes it forward again.` });
      git = gitView(dry.restore);
      if (!(await ask("Undo?", planView(dry.restore, intro, git), "Undo"))) return null;
    }
    return this.run(() => api("POST", `${this.base()}/undo`, { git: git.mode() }), (r) => {
      const c = r.restore.counts;
      toast(`Undid the ${r.operation.kind} to ${r.operation.target}: ${c.created} created, ${c.modified} modified, ${c.deleted} deleted.`, { action: { label: "Redo", run: () => this.redo(true) } });
    });
  }

  async redo(skipConfirm = false) {
    const ops = await api("GET", `${this.base()}/operations`).catch(() => null);
    const op = ops && ops.next_redo;
    if (!op) return toast("Nothing to redo.", { error: true });
    let git = { mode: () => undefined };
    if (!skipConfirm) {
      let dry;
      try { dry = await api("POST", `${this.base()}/redo`, { dry_run: true }); } catch (err) { return toast(err.message, { error: true }); }
      git = gitView(dry.restore);
      if (!(await ask("Redo?", planView(dry.restore, el("p", { text: `Apply the ${op.kind} to ${op.target} again.` }), git), "Redo"))) return null;
    }
    return this.run(() => api("POST", `${this.base()}/redo`, { git: git.mode() }), (r) => {
      toast(`Redid the ${r.operation.kind} to ${r.operation.target}.`, { action: this.undoAction() });
    });
  }

  snapshot() {
    return this.run(() => api("POST", `${this.base()}/snapshots`, { label: "from the dashboard" }),
      (s) => toast(`Took ${s.id}: +${s.changes.created} ~${s.changes.modified} -${s.changes.deleted}.`));
  }

  pin(snap) {
    return this.run(() => api("POST", `${this.base()}/snapshots/${encodeURIComponent(snap.id)}/pin`, { pinned: !snap.pinned }),
      (s) => toast(`${s.pinned ? "Pinned" : "Unpinned"} ${s.id}.`));
  }

  async remove(snap) {
    const ok = await ask(`Delete ${snap.id}?`, el("p", { text: "The snapshot goes; its bytes are reclaimed by the next gc. This cannot be undone." }), "Delete", true);
    if (!ok) return null;
    return this.run(() => api("DELETE", `${this.base()}/snapshots/${encodeURIComponent(snap.id)}`), () => toast(`Deleted ${snap.id}.`));
  }

  verify() {
    return this.run(() => api("POST", `${this.base()}/verify`), (r) =>
      toast(r.ok ? `Store verified: ${r.snapshots} snapshots, ${r.objects} objects, all sound.` : `Verify found ${r.errors.length} problem(s): ${r.errors[0]}`, { error: !r.ok }));
  }
}
