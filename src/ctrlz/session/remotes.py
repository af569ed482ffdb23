"""Remotes for a workspace: which remote, which snapshots, whose key; then one engine call.

This is where the policy of remote sync lives: the default remote, what "push" means with no
snapshot named (every snapshot the remote's ref lacks), the key material (read from the file or
environment variable the remote was added with, each time, never stored), who made each
snapshot (machine, user, and from the session records the agent and session), and the local
cache of the remote's immutable index files and of the trees known complete there
(``<store>/remote-cache/<name>/``).
"""

from __future__ import annotations

import getpass
import json
import os
import socket
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..engine.refs import resolve
from ..engine.remote.refs import drop_entries, entries, update_ref
from ..errors import RemoteError, SnapshotNotFound, UsageError
from ..state.remote import check_url, open_backend
from ..state.remote.backend import Limited
from ..state.remote.repo import RemoteRepo
from ..types import Snapshot
from .protected import ProtectedWorkspace
from .remote_registry import Registry, RemoteSpec, check_name

TYPE_CHECKING = False
if TYPE_CHECKING:  # each command imports only the engine it runs (a push: not pull, gc, verify)
    from ..engine.remote.check import RemoteVerifyReport
    from ..engine.remote.gc import RemoteGcReport
    from ..engine.remote.pull import PullReport
    from ..engine.remote.push import PushReport

#: the gc grace period of remotes created from here (seconds); a test knob, read once when a
#: remote's config is first written
GRACE_ENV = "CTRLZ_REMOTE_GRACE"


def registry(ws: ProtectedWorkspace) -> Registry:
    return Registry(ws.store_path)


def add_remote(ws: ProtectedWorkspace, name: str, url: str, *, endpoint_url: str | None = None,
               region: str | None = None, profile: str | None = None, encrypt: bool = False,
               key_file: str | None = None, key_env: str | None = None) -> RemoteSpec:
    check_name(name)
    url = check_url(url)
    if encrypt and bool(key_file) == bool(key_env):
        raise UsageError("--encrypt needs exactly one of --key-file FILE or --key-env VAR")
    if (key_file or key_env) and not encrypt:
        raise UsageError("--key-file and --key-env go with --encrypt")
    if endpoint_url is not None and not endpoint_url.startswith(("http://", "https://")):
        raise UsageError(f"--endpoint-url {endpoint_url!r} must start with http:// or https://")
    if key_file:
        key_file = str(Path(key_file).expanduser().resolve())
    spec = RemoteSpec(name, url, endpoint_url, region, profile, encrypt, key_file, key_env)
    if encrypt:
        key_material(spec)  # refuse a key that cannot be read now, not at the first push
    with registry(ws) as reg:
        reg.add(spec)
    ws.repo.objects.want_cuts()  # big files are stored ready to push (state.cut_objects)
    return spec


def remove_remote(ws: ProtectedWorkspace, name: str) -> RemoteSpec:
    with registry(ws) as reg:
        spec = reg.remove(name)
    import shutil

    shutil.rmtree(ws.store_path / "remote-cache" / name, ignore_errors=True)
    return spec


def list_remotes(ws: ProtectedWorkspace) -> list[RemoteSpec]:
    with registry(ws) as reg:
        return reg.all()


def key_material(spec: RemoteSpec) -> bytes | None:
    if not spec.encrypt:
        return None
    if spec.key_file:
        try:
            data = Path(spec.key_file).read_bytes()
        except OSError as exc:
            raise RemoteError(f"remote {spec.name}: cannot read the key file {spec.key_file}: "
                              f"{exc.strerror or exc}") from None
    else:
        value = os.environ.get(spec.key_env or "")
        if not value:
            raise RemoteError(f"remote {spec.name}: the key variable ${spec.key_env} is not set")
        data = os.fsencode(value)
    if not data.strip():
        raise RemoteError(f"remote {spec.name}: the encryption key is empty")
    return data


def open_remote(spec: RemoteSpec, *, create: str | None = None,
                bandwidth: int = 0) -> RemoteRepo:
    backend = open_backend(spec.url, spec.endpoint_url, spec.region, spec.profile,
                           model_cache=_model_cache())
    if bandwidth > 0:
        backend = Limited(backend, bandwidth)  # type: ignore[assignment]
    grace = os.environ.get(GRACE_ENV)
    try:
        grace_s = float(grace) if grace else None
    except ValueError:
        raise UsageError(f"${GRACE_ENV} must be a number of seconds") from None
    return RemoteRepo.open(backend, key=key_material(spec), create=create,
                           encrypt=spec.encrypt, grace=grace_s)


def _model_cache() -> str:
    """Where S3 backends keep botocore's parsed models (``state/remote/s3.py``): the user's
    cache directory, not ``CTRLZ_HOME``, so that every store, and a clone into a new home,
    reads one copy."""
    import sys

    if sys.platform.startswith("linux"):
        base = os.environ.get("XDG_CACHE_HOME", "").strip() or os.path.expanduser("~/.cache")
        return os.path.join(base, "ctrlz", "botocore")
    import platformdirs

    return os.path.join(platformdirs.user_cache_dir("ctrlz"), "botocore")


def default_remote(ws: ProtectedWorkspace, name: str | None) -> RemoteSpec:
    with registry(ws) as reg:
        if name is not None:
            return reg.get(name)
        specs = reg.all()
    auto = ws.config.values.get("auto_push") or ""
    for candidate in (auto, "origin"):
        for s in specs:
            if s.name == candidate:
                return s
    if len(specs) == 1:
        return specs[0]
    if not specs:
        raise UsageError("this workspace has no remote; add one with `ctrlz remote add NAME URL`")
    raise UsageError(f"this workspace has {len(specs)} remotes; name one "
                     f"({', '.join(s.name for s in specs)})")


def _cache(ws: ProtectedWorkspace, name: str) -> Path:
    return ws.store_path / "remote-cache" / name / "index"


def _known(ws: ProtectedWorkspace, name: str) -> Path:
    """The trees known complete on remote ``name`` (:mod:`ctrlz.state.remote.known`)."""
    return ws.store_path / "remote-cache" / name / "complete"


def identity(ws: ProtectedWorkspace) -> tuple[str, str]:
    with registry(ws) as reg:
        return reg.workspace_id(ws.root.name or "workspace")


# -- provenance --------------------------------------------------------------------------------


def origins(ws: ProtectedWorkspace, snaps: Sequence[Snapshot]) -> dict[str, dict[str, Any]]:
    """Who made each snapshot: kept from where it came from, else this machine and user, with
    the session (``ctrlz run`` or an agent's hooks) and agent the session records name."""
    with registry(ws) as reg:
        known = reg.origins()
    machine, user = socket.gethostname(), _user()
    sessions, agents = _session_links(ws)
    out = {}
    for s in snaps:
        if s.id in known:
            out[s.id] = known[s.id]
            continue
        sid = sessions.get(s.id)
        out[s.id] = {"machine": machine, "user": user, "session": sid,
                     "agent": agents.get(sid) if sid else None}
    return out


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


def _session_links(ws: ProtectedWorkspace) -> tuple[dict[str, str], dict[str, str]]:
    """(snapshot id -> session id, session id -> agent) from the session and tool-call
    records; best effort: a store without them has no sessions to name."""
    links: dict[str, str] = {}
    agents: dict[str, str] = {}
    db = ws.store_path / "session.db"
    if db.is_file():
        with _ro(db) as c:
            for snap, sid in _rows(c, "SELECT snapshot_id, session_id FROM session_snapshots "
                                      "WHERE session_id IS NOT NULL"):
                links[snap] = sid
            for sid, command in _rows(c, "SELECT id, command FROM sessions"):
                try:
                    argv = json.loads(command)
                    agents[sid] = os.path.basename(argv[0]) if argv else None
                except (ValueError, TypeError, IndexError):
                    pass
    tc = ws.store_path / "toolcalls" / "catalog.db"
    if tc.is_file():
        with _ro(tc) as c:
            for snap, sid in _rows(c, "SELECT ws_snapshot, session_id FROM tc_snapshots "
                                      "WHERE ws_snapshot IS NOT NULL"):
                links.setdefault(snap, sid)
            for sid, agent in _rows(c, "SELECT session_id, agent FROM tc_sessions"):
                if agent:
                    agents[sid] = agent
    return links, agents


class _ro:
    def __init__(self, path: Path) -> None:
        self.c = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)

    def __enter__(self) -> sqlite3.Connection:
        return self.c

    def __exit__(self, *exc: object) -> None:
        self.c.close()


def _rows(c: sqlite3.Connection, sql: str) -> list[tuple[Any, ...]]:
    try:
        return list(c.execute(sql))
    except sqlite3.DatabaseError:
        return []


# -- operations -------------------------------------------------------------------------------


def push_snapshots(ws: ProtectedWorkspace, name: str | None = None,
                   refs: Sequence[str] = (), *, bandwidth: int = 0,
                   progress: Callable[[int], None] | None = None,
                   repair: bool = False) -> PushReport:
    from ..engine.remote.push import push

    spec = default_remote(ws, name)
    snaps = ws.snapshots()
    chosen = [resolve(snaps, r) for r in refs] if refs else snaps
    chosen = sorted({s.id: s for s in chosen}.values(), key=lambda s: s.created_ns)
    remote = open_remote(spec, create=ws.repo.algorithm, bandwidth=bandwidth)
    ws.repo.objects.want_cuts()  # a remote added before stores cut big files from now on
    wid, wname = identity(ws)
    report = push(ws.repo, remote, wid, wname, chosen, origins(ws, chosen),
                  _cache(ws, spec.name), known=_known(ws, spec.name), progress=progress,
                  repair=repair)
    report.remote = spec.name
    with registry(ws) as reg:
        reg.mark_pushed(spec.name, report.pushed + report.already)
    return report


def remote_entries(ws: ProtectedWorkspace, spec: RemoteSpec, remote: RemoteRepo | None = None,
                   workspace: str | None = None) -> list[dict[str, Any]]:
    remote = remote or open_remote(spec)
    wid = workspace or identity(ws)[0]
    doc, _ = remote.read_ref(wid)
    found = entries(doc)
    if workspace is None:
        with registry(ws) as reg:
            reg.set_pushed(spec.name, [e["id"] for e in found])
    return found


def pull_snapshots(ws: ProtectedWorkspace, name: str | None = None, refs: Sequence[str] = (),
                   progress: Callable[[int], None] | None = None) -> PullReport:
    from ..engine.remote.pull import pull

    spec = default_remote(ws, name)
    remote = open_remote(spec)
    found = remote_entries(ws, spec, remote)
    if refs:
        found = [_pick(found, r, spec.name) for r in refs]
    ws.repo.objects.want_cuts()
    report = pull(ws.repo, remote, found, _cache(ws, spec.name), progress)
    report.remote = spec.name
    with registry(ws) as reg:
        reg.set_origins({e["id"]: e.get("origin") or {} for e in found
                         if e["id"] in {s.id for s in report.pulled}})
    return report


def _pick(found: list[dict[str, Any]], ref: str, remote: str) -> dict[str, Any]:
    hits = [e for e in found if e["id"] == ref or e["id"].startswith(ref) or
            e["id"].startswith("snap_" + ref) or (ref and e.get("label") == ref)]
    if ref in ("latest", "HEAD", "@") and found:
        return found[-1]
    if len(hits) == 1 or (hits and all(e.get("label") == ref for e in hits)):
        return hits[-1]
    if hits:
        raise SnapshotNotFound(f"{ref!r} matches {len(hits)} snapshots on {remote}; type more "
                               "of the id")
    raise SnapshotNotFound(f"no snapshot matches {ref!r} on remote {remote}; run "
                           f"`ctrlz list --remote {remote}`")


def find_remote_snapshot(ws: ProtectedWorkspace, ref: str) -> tuple[RemoteSpec, dict[str, Any]]:
    """The first remote whose ref names ``ref`` (for a restore of a snapshot not held here)."""
    specs = list_remotes(ws)
    if not specs:
        raise SnapshotNotFound(f"no snapshot matches {ref!r}; run `ctrlz list` to see them")
    errors = []
    for spec in specs:
        try:
            return spec, _pick(remote_entries(ws, spec), ref, spec.name)
        except SnapshotNotFound:
            continue
        except RemoteError as exc:
            errors.append(str(exc))
    extra = f" (and {errors[0]})" if errors else ""
    raise SnapshotNotFound(f"no snapshot matches {ref!r} here or on any remote{extra}")


def restore_remote_snapshot(ws: ProtectedWorkspace, ref: str, dest: str | os.PathLike[str],
                            paths: Sequence[str | bytes] | None = None) -> Any:
    """``restore SNAP --to DIR`` for a snapshot only a remote holds: fetch its missing
    objects (and its record) into the store, then restore it like any other."""
    from ..engine.remote.pull import pull
    from . import restores

    spec, entry = find_remote_snapshot(ws, ref)
    pull(ws.repo, open_remote(spec), [entry], _cache(ws, spec.name))
    with registry(ws) as reg:
        reg.set_origins({entry["id"]: entry.get("origin") or {}})
        reg.mark_pushed(spec.name, [entry["id"]])
    return restores.restore_to(ws, entry["id"], dest, paths)


def unpushed(ws: ProtectedWorkspace) -> dict[str, list[str]]:
    """Per remote, the snapshots it is not known to hold (from the last push, pull or list)."""
    ids = [s.id for s in ws.snapshots()]
    with registry(ws) as reg:
        return {spec.name: [i for i in ids if i not in reg.pushed(spec.name)]
                for spec in reg.all()}


def forget(ws: ProtectedWorkspace, name: str | None, refs: Sequence[str]) -> list[str]:
    spec = default_remote(ws, name)
    remote = open_remote(spec)
    found = remote_entries(ws, spec, remote)
    ids = {_pick(found, r, spec.name)["id"] for r in refs}
    wid, wname = identity(ws)
    update_ref(remote, wid, wname, drop_entries(ids))
    with registry(ws) as reg:  # no longer there: unpushed again, as status and list say
        reg.set_pushed(spec.name, [e["id"] for e in found if e["id"] not in ids])
    return sorted(ids)


def verify(ws: ProtectedWorkspace, name: str | None) -> RemoteVerifyReport:
    from ..engine.remote.check import verify_remote

    spec = default_remote(ws, name)
    remote = open_remote(spec)
    report = verify_remote(remote, remote.load_index(_cache(ws, spec.name)))
    report.remote = spec.name
    return report


def gc(ws: ProtectedWorkspace, name: str | None, dry_run: bool = False) -> RemoteGcReport:
    from ..engine.remote import gc as rgc

    spec = default_remote(ws, name)
    remote = open_remote(spec)

    def local_tree(oid: bytes) -> Any:
        return ws.repo.tree(oid) if ws.repo.catalog.lookup(oid) is not None else None

    def index() -> Any:
        return remote.load_index(_cache(ws, spec.name))

    report = rgc.gc_remote(remote, index(), local_tree, dry_run=dry_run, reload=index)
    report.remote = spec.name
    return report


def clone(url: str, dest: str | os.PathLike[str], *, snapshot: str | None = None,
          workspace: str | None = None, name: str = "origin", **options: Any
          ) -> tuple[ProtectedWorkspace, PullReport, Any]:
    """A new workspace at ``dest`` (new or empty) from a remote: every snapshot of the
    remote's workspace, and the newest (or ``snapshot``) restored into it."""
    from ..engine.remote.pull import pull
    from ..engine.restore import restore_into
    from ..locator import default_home, has_store, store_path_for

    target = Path(dest).expanduser()
    store = store_path_for(target.resolve(), Path(default_home()).expanduser())
    half = _clear_half_clone(store)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise UsageError(f"{target} exists and is not an empty directory" +
                         ("; it holds what an interrupted clone had restored: remove it and "
                          "run the clone again" if half else ""))
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
        _mark_cloning(store, url)
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
        restored = restore_into(ws.repo, len(ws.roots), ws.resolve(chosen["id"]), ws.root)
        if fresh:
            (ws.store_path / CLONING).unlink(missing_ok=True)  # a whole clone from now on
    except BaseException:
        # what this call made goes with it, so that the same clone can simply be run again
        # (a failed one used to leave a store with the remote registered: "a remote named
        # 'origin' exists already"); files a restore had begun to put into DIR stay
        ws.close()
        if fresh:
            import shutil

            shutil.rmtree(ws.store_path, ignore_errors=True)
        if made:
            try:
                target.rmdir()
            except OSError:
                pass
        raise
    return ws, report, restored


#: a file in a store that a clone is making: written before the store exists, removed once the
#: clone is whole. A clone killed (``kill -9``, a power cut) cannot clean up after itself, and
#: its store (with the remote registered) would make every re-run fail ("a remote named
#: 'origin' exists already"); the next clone of the same directory finds the mark and starts
#: over.
CLONING = "cloning"


def _mark_cloning(store: Path, url: str) -> None:
    store.mkdir(parents=True, exist_ok=True)
    with open(store / CLONING, "w") as f:
        f.write(url + "\n")
        f.flush()
        os.fsync(f.fileno())


def _clear_half_clone(store: Path) -> bool:
    """Remove the store an interrupted clone left at ``store`` (its mark says so); whether
    there was one."""
    if not (store / CLONING).exists():
        return False
    import shutil

    shutil.rmtree(store, ignore_errors=True)
    return True


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


def remote_listing(ws: ProtectedWorkspace, name: str | None) -> tuple[RemoteSpec, list[dict]]:
    spec = default_remote(ws, name)
    return spec, remote_entries(ws, spec)

