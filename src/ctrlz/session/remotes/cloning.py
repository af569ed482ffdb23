"""Cloning: a new workspace from a remote (``ctrlz clone``).

Which of the remote's workspaces (its id, else its name, else the start of its id), a mark
that lets a killed clone be run again, and one pull and one restore through the same engine
calls every other remote command makes (:mod:`ctrlz.session.remotes.remotes`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ...engine.remote.refs import entries
from ...errors import RemoteError, UsageError
from ...state import failpoints
from ...state.remote import check_url
from ...state.remote.repo import RemoteRepo
from ..protected import ProtectedWorkspace
from .remote_registry import RemoteSpec
from .remotes import _cache, _pick, open_remote, registry

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ...engine.remote.pull import PullReport


def clone(url: str, dest: str | os.PathLike[str], *, snapshot: str | None = None,
          workspace: str | None = None, name: str = "origin", **options: Any
          ) -> tuple[ProtectedWorkspace, PullReport, Any]:
    """A new workspace at ``dest`` (new or empty) from a remote: every snapshot of the
    remote's workspace, and the newest (or ``snapshot``) restored into it."""
    from ...engine.remote.pull import pull
    from ...engine.restore.restore import restore_into
    from ..locator import default_home, has_store, store_path_for

    target = Path(dest).expanduser()
    store = store_path_for(target.resolve(), Path(default_home()).expanduser())
    half = (store / CLONING).exists()
    if half:
        _check_half_clone(store, target)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise UsageError(f"{target} exists and is not an empty directory" +
                         ("; it holds what an interrupted clone had restored: remove it and "
                          "run the clone again" if half else ""))
    if half:  # only what the interrupted clone made, and nothing in the directory: start over
        import shutil

        shutil.rmtree(store, ignore_errors=True)
    spec = RemoteSpec(name, check_url(url), options.get("endpoint_url"), options.get("region"),
                      options.get("profile"), bool(options.get("encrypt")),
                      options.get("key_file"), options.get("key_env"))
    remote = open_remote(spec)
    spaces = remote.workspaces()
    if workspace is not None:
        # its exact id, else its name, else the start of its id: as git takes a ref's name
        # before an abbreviated hash (a name that begins another workspace's random id
        # once cloned that other workspace)
        spaces = ([workspace] if workspace in spaces else _by_name(remote, spaces, workspace)
                  or [w for w in spaces if w.startswith(workspace)])
    if not spaces:
        raise RemoteError(f"{remote.url} holds no workspace" +
                          (f" matching {workspace!r}" if workspace else ""))
    if len(spaces) > 1:
        what = f"--workspace {workspace!r} matches" if workspace else f"{remote.url} holds"
        raise UsageError(f"{what} {len(spaces)} workspaces "
                         f"({', '.join(_label(remote, w) for w in spaces)}); "
                         "choose one with --workspace ID")
    wid = spaces[0]
    doc, _ = remote.read_ref(wid)
    found = entries(doc)
    if not found:
        raise RemoteError(f"{remote.url}: workspace {wid} has no snapshots")
    chosen = _pick(found, snapshot, spec.name) if snapshot else found[-1]
    made = not target.exists()
    target.mkdir(parents=True, exist_ok=True)
    fresh = not has_store(store)
    if fresh:
        _mark_cloning(store, url, [e["id"] for e in found])
    ws = ProtectedWorkspace.init(target)
    try:
        with registry(ws) as reg:
            reg.set_meta("workspace_id", wid)
            reg.set_meta("workspace_name", str((doc or {}).get("workspace", {}).get("name")
                                               or target.name))
            reg.add(spec)
        ws.repo.objects.want_cuts()
        report = pull(ws.repo, remote, found, _cache(ws, name))
        with registry(ws) as reg:
            reg.set_origins({e["id"]: e.get("origin") or {} for e in found})
            reg.set_pushed(name, [e["id"] for e in found])
        failpoints.hit("clone-pulled")  # no lock held: someone may take a snapshot here
        restored = restore_into(ws.repo, len(ws.roots), ws.resolve(chosen["id"]), ws.root)
        if fresh:
            (ws.store_path / CLONING).unlink(missing_ok=True)  # a whole clone from now on
    except BaseException:
        # what this call made goes with it, so that the same clone can simply be run again
        # (a failed one used to leave a store with the remote registered: "a remote named
        # 'origin' exists already"); files a restore had begun to put into DIR stay
        discard_new(ws, fresh, target if made else None, {e["id"] for e in found})
        raise
    return ws, report, restored


def discard_new(ws: ProtectedWorkspace, store_made: bool, dir_made: Path | None,
                made: set[str] | None = None) -> None:
    """After a failed clone or ``import --to DIR``: close ``ws``, remove its store if this call
    made it, and the directory if this call made it and nothing is in it now (files a
    restore had begun to put there stay). A clone names the snapshots it pulled (``made``):
    a store that holds anything else by now (a snapshot someone took in DIR while the clone
    ran) is theirs, and it and DIR stay, without the clone's mark."""
    ws.close()
    if store_made and made is not None and _made_since(ws.store_path, made):
        (ws.store_path / CLONING).unlink(missing_ok=True)
        return
    if store_made:
        import shutil

        shutil.rmtree(ws.store_path, ignore_errors=True)
    if dir_made is not None:
        try:
            dir_made.rmdir()
        except OSError:
            pass


#: a file in a store that a clone is making: written before the store exists, removed once the
#: clone is whole. A clone killed (``kill -9``, a power cut) cannot clean up after itself, and
#: its store (with the remote registered) would make every re-run fail ("a remote named
#: 'origin' exists already"); the next clone of the same directory finds the mark and starts
#: over, but only when the store holds nothing but what the clone made (the mark lists the
#: snapshots it was pulling) and the directory is empty: a killed clone's store is usable,
#: and once someone has taken a snapshot in it or restored from it, it is theirs.
CLONING = "cloning"


def _mark_cloning(store: Path, url: str, snapshots: list[str]) -> None:
    store.mkdir(parents=True, exist_ok=True)
    with open(store / CLONING, "w") as f:
        f.write("".join(f"{line}\n" for line in (url, *snapshots)))
        f.flush()
        os.fsync(f.fileno())


def _check_half_clone(store: Path, target: Path) -> None:
    """Refuse to start over a killed clone's store that has been used since: it holds a
    snapshot the clone did not make, an undo history, or an agent's tool calls. Such a store
    is a workspace now, so its mark no longer says anything and goes (the next clone of this
    directory is an ordinary clone into a workspace, which never removes a store)."""
    try:
        made = set((store / CLONING).read_text(errors="replace").splitlines()[1:])
    except OSError:
        made = set()  # unreadable: nothing counts as the clone's
    foreign = _made_since(store, made)
    if not foreign:
        return
    (store / CLONING).unlink(missing_ok=True)
    raise UsageError(f"{target} is a workspace now: its store holds {foreign}, made since an "
                     "interrupted clone, and a clone never replaces it; clone into another "
                     "directory (`ctrlz list` there shows its snapshots)")


def _made_since(store: Path, made: set[str]) -> str:
    """What in ``store`` the clone whose mark lists ``made`` did not make, in words (empty:
    nothing). Read straight from the databases, whatever state the kill left them in: a
    connection that cannot read one counts as use, never as a reason to delete."""
    import sqlite3

    def rows(db: Path, sql: str) -> list[tuple[object, ...]]:
        if not db.is_file():
            return []
        try:
            c = sqlite3.connect(db, timeout=30)
            try:
                return list(c.execute(sql))
            finally:
                c.close()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return []
            return [("?",)]
        except sqlite3.DatabaseError:
            return [("?",)]

    snaps = [str(r[0]) for r in rows(store / "catalog.db", "SELECT id FROM snapshots")
             if r[0] not in made]
    if snaps:
        return (f"{len(snaps)} snapshot(s) ({', '.join(snaps[:3])}"
                f"{', …' if len(snaps) > 3 else ''})")
    if rows(store / "catalog.db", "SELECT seq FROM operations LIMIT 1"):
        return "an undo history"
    if rows(store / "toolcalls" / "catalog.db", "SELECT session_id FROM tc_sessions LIMIT 1"):
        return "an agent's tool calls"
    if rows(store / "session.db", "SELECT id FROM sessions LIMIT 1"):
        return "a `ctrlz run` session"
    return ""


def _by_name(remote: RemoteRepo, spaces: list[str], name: str) -> list[str]:
    out = []
    for w in spaces:
        doc, _ = remote.read_ref(w)
        if (doc or {}).get("workspace", {}).get("name") == name:
            out.append(w)
    return out


def _label(remote: RemoteRepo, wid: str) -> str:
    doc, _ = remote.read_ref(wid)
    return f"{wid} ({(doc or {}).get('workspace', {}).get('name', '?')})"
