"""Commands that look without touching anything: diff, changes, history, status, config."""

from __future__ import annotations

import click

from . import render
from .context import State, pass_state

STATUS_LETTER = {"created": "A", "modified": "M", "deleted": "D", "permissions_changed": "P"}


def _split_refs(state: State, args: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """Leading arguments that name snapshots (at most two), then paths (like git diff).
    Like git, an argument that is neither a snapshot nor a path of the working tree or of
    the snapshots named is an error, not a path that matches nothing."""
    import os

    from ..errors import SnapshotNotFound, UsageError

    ws = state.workspace()
    refs: list[str] = []
    paths: list[str] = []
    for arg in args:
        if len(refs) < 2 and not paths:
            try:
                ws.resolve(arg)
                refs.append(arg)
                continue
            except SnapshotNotFound:
                if not refs and not os.path.lexists(arg) and not _in_latest(ws, arg):
                    raise
        paths.append(arg)
    for arg in paths:
        if not os.path.lexists(arg) and all(ws.entry_at(r, arg) is None
                                             for r in refs or ["latest"]):
            raise UsageError(f"{arg!r} is neither a snapshot nor a path in the working tree "
                             f"or in {' or '.join(refs) or 'the latest snapshot'}")
    return refs, paths


def _in_latest(ws, arg: str) -> bool:  # noqa: ANN001
    """Is ``arg`` a path of the latest snapshot (a file deleted since, say)?"""
    from ..errors import CtrlzError

    try:
        return ws.entry_at("latest", arg) is not None
    except CtrlzError:  # no snapshots yet, or a path outside the workspace
        return False


def _path_text(change) -> str:  # noqa: ANN001
    from ..types import show_path

    return render.path_text(show_path(change.path) + ("/" if change.kind == "d" else ""))


def _name_status(changes: list) -> None:
    for c in changes:
        if c.kind == "d" and c.change_type != "permissions_changed":
            continue
        render.out(f"{STATUS_LETTER[c.change_type]}\t{_path_text(c)}")


def _summary(changes: list) -> str:
    counts = {"created": 0, "modified": 0, "deleted": 0, "permissions_changed": 0}
    for c in changes:
        if c.kind != "d":
            counts[c.change_type] += 1
    return (f"+{counts['created']} ~{counts['modified']} -{counts['deleted']}"
            + (f", {counts['permissions_changed']} mode changes"
               if counts["permissions_changed"] else ""))


def _diff_json(d) -> dict:  # noqa: ANN001
    return {"type": "diff", "old": d.old, "new": d.new,
            "changes": [c.to_json() for c in d.changes]}


@click.command("diff", context_settings={"ignore_unknown_options": False})
@click.argument("args", nargs=-1, metavar="[SNAP [SNAP2]] [PATH...]")
@click.option("--stat", "mode", flag_value="stat", help="One line per changed path, and totals.")
@click.option("--name-status", "mode", flag_value="name-status",
              help="A status letter (A created, M modified, D deleted, P mode) and the path.")
@render.json_option
@pass_state
def diff_cmd(state: State, args: tuple[str, ...], mode: str | None, as_json: bool) -> None:
    """Show what changed: by default from the latest snapshot to the working tree.

    With one SNAP, from SNAP to the working tree; with two, from SNAP to SNAP2. Paths limit the
    diff. Text files get a unified diff, binary files a one-line note; colour on a terminal.
    Changes are found by content, never by size.

    \b
    Examples:
      ctrlz diff
      ctrlz diff --name-status
      ctrlz diff baseline latest --stat
      ctrlz diff baseline src/app.py
    """
    refs, paths = _split_refs(state, args)
    ws = state.workspace()
    d = ws.diff(refs[0] if refs else None, refs[1] if len(refs) > 1 else None, paths or None)
    if as_json:
        render.emit_json(_diff_json(d))
        return
    if not d.changes:
        new = "the working tree" if d.new == "working tree" else d.new
        render.note(f"no changes from {d.old} to {new}")
        return
    if mode == "name-status":
        _name_status(d.changes)
        return
    if mode == "stat":
        for c in d.changes:
            if c.kind == "d" and c.change_type != "permissions_changed":
                continue
            if c.change_type == "permissions_changed":
                render.out(f" {_path_text(c)} | mode {c.old.mode:o} => {c.new.mode:o}")
                continue
            delta = "" if c.size_delta is None else f" ({render.signed_size(c.size_delta)})"
            render.out(f" {_path_text(c)} | {c.change_type}{delta}")
        render.out(f" {_summary(d.changes)}")
        return
    for c in d.changes:
        if c.change_type == "permissions_changed":
            render.out(f"mode change {c.old.mode:o} => {c.new.mode:o} {_path_text(c)}")
    for text in ws.patches(d):
        render.patch(text)


@click.command("changes")
@click.option("--since", "since", metavar="SNAP", help="Compare with SNAP (default: latest).")
@render.json_option
@pass_state
def changes_cmd(state: State, since: str | None, as_json: bool) -> None:
    """List the paths that changed in the working tree since a snapshot.

    \b
    Examples:
      ctrlz changes
      ctrlz changes --since baseline --json
    """
    d = state.workspace().diff(since, None)
    if as_json:
        render.emit_json(_diff_json(d))
        return
    _name_status(d.changes)
    render.out(f"{_summary(d.changes)} since {d.old}")


@click.command("history")
@click.argument("path")
@render.json_option
@pass_state
def history_cmd(state: State, path: str, as_json: bool) -> None:
    """Every version of one file (or folder) across the snapshots, by content.

    A version is one content (object id) and mode; the snapshots that hold it are listed
    oldest first. `absent` marks snapshots in which the path did not exist.

    \b
    Examples:
      ctrlz history src/app.py
      ctrlz history README.md --json
    """
    h = state.workspace().history(path)
    if as_json:
        render.emit_json(h.to_json())
        return
    if not h.versions:
        render.note(f"{render.path_text(path)} is in no snapshot")
        return
    rows = []
    for i, v in enumerate(h.versions, 1):
        snaps = v.snapshots
        seen = snaps[0].id if len(snaps) == 1 else f"{snaps[0].id}..{snaps[-1].id} ({len(snaps)})"
        rows.append([str(i), v.kind or "absent", render.size(v.size),
                     f"{v.mode:o}" if v.mode is not None else "-",
                     (v.oid or "-")[:12], seen, render.ago(snaps[0].created_ns)])
    render.table(["#", "KIND", "SIZE", "MODE", "CONTENT", "SNAPSHOTS", "FIRST SEEN"], rows,
                 right=(0, 2))


@click.command("status")
@render.json_option
@pass_state
def status_cmd(state: State, as_json: bool) -> None:
    """What is protected and excluded, what was skipped and why, the last snapshot, the store
    against its cap, and any health problems.

    \b
    Examples:
      ctrlz status
      ctrlz status --json
    """
    from ..toolcalls.restore.fork import lineage
    from .remote import status_lines
    from .snapshots import excluded_text

    ws = state.workspace()
    st, forked_from, remote_info = ws.status(), lineage(ws), status_lines(ws)
    if as_json:
        render.emit_json(st.to_json() | {"forked_from": forked_from, "remotes": remote_info})
        return
    render.out(f"Workspace: {render.path_text(str(st.root))}")
    if forked_from:
        render.out(f"Forked:    from {forked_from['workspace']} at {forked_from['snapshot']}")
    render.out(f"Excluded:  {excluded_text(st.rules)}")
    render.out(f"Store:     {st.store}")
    render.out(f"           {render.size(st.store_bytes)} of cap {render.size(st.store_cap)}")
    types = ", ".join(f"{n} {t}" for t, n in sorted(st.by_type.items()))
    render.out(f"Snapshots: {st.snapshots}" + (f" ({types})" if types else ""))
    if st.last:
        label = f' "{st.last.label}"' if st.last.label else ""
        render.out(f"Last:      {st.last.id}{label} {st.last.type}, "
                   f"{render.ago(st.last.created_ns)}")
    for k in st.skipped:
        render.out(f"Skipped:   {render.path_text(k.to_json()['path'])}: {k.reason}")
    render.out("Undo:      " + ("ctrlz undo" if st.can_undo else "nothing to undo")
               + (" / ctrlz redo" if st.can_redo else ""))
    render.out("Daemon:    " + ("running (ctrlz daemon status)" if st.daemon["running"]
                                else "not running (the next snapshot starts it)"
                                if ws.config["daemon"] else "off (daemon = false)"))
    if unwatched := st.daemon.get("unwatched_count"):
        shown = ", ".join(render.path_text(p) for p in st.daemon["unwatched"][:3])
        render.out(f"           {unwatched:,} folder(s) without a watch (no watches left: "
                   f"fs.inotify.max_user_watches or daemon_max_watches), listed whole at every "
                   f"snapshot: {shown}{' ...' if unwatched > 3 else ''}")
    if st.dropped:
        from ..session.reports import counted

        newest = st.dropped[0]
        render.out(f"Dropped:   {counted(st.dropped)} snapshot(s) in the last day by retention; "
                   f"the newest {newest['id']} ({newest['type']}): {newest['reason']}")
    for name, info in remote_info.items():
        render.out(f"Remote:    {name}: " + (f"{info['unpushed']} snapshots not pushed "
                                             f"(ctrlz push {name})" if info["unpushed"]
                                             else "everything pushed"))
    if st.problems:
        for p in st.problems:
            render.out(f"Problem:   {p}")
    else:
        render.out("Health:    ok")


@click.command("config")
@render.json_option
def config_cmd(as_json: bool) -> None:
    """Show the effective configuration and where each value came from.

    Sources, later winning: defaults, the user file (under the platform config dir), the
    workspace file .ctrlz.toml, then environment variables CTRLZ_<KEY> (e.g. CTRLZ_MANUAL_MAX=2).

    \b
    Examples:
      ctrlz config
      CTRLZ_AUTO_MAX=20 ctrlz config --json
    """
    from ..session.config import load_config, user_config_path
    from ..workspace import Workspace

    root = Workspace.find(".")
    config = load_config(root)
    if as_json:
        render.emit_json({"type": "config", "user_file": str(user_config_path()),
                          "workspace_file": str(root / ".ctrlz.toml") if root else None,
                          "values": config.to_json()})
        return
    rows = [[k, str(v["value"]), v["source"]] for k, v in config.to_json().items()]
    render.table(["KEY", "VALUE", "SOURCE"], rows)
    render.note(f"user file: {user_config_path()}")
    if root:
        render.note(f"workspace file: {root / '.ctrlz.toml'}")


COMMANDS = [diff_cmd, changes_cmd, history_cmd, status_cmd, config_cmd]
