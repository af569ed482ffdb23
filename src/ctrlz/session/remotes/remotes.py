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

from ... import platform
from ...engine.refs import resolve
from ...engine.remote.refs import drop_entries, entries, update_ref
from ...errors import RemoteError, SnapshotNotFound, UsageError
from ...state.remote import check_url, open_backend
from ...state.remote.backend import Limited
from ...state.remote.repo import RemoteRepo
from ...types import Snapshot
from ..protected import ProtectedWorkspace
from .remote_registry import Registry, RemoteSpec, check_name

TYPE_CHECKING = False
if TYPE_CHECKING:  # each command imports only the engine it runs (a push: not pull, gc, verify)
    from ...engine.remote.check import RemoteVerifyReport
    from ...engine.remote.gc import RemoteGcReport
    from ...engine.remote.pull import PullReport
    from ...engine.remote.push import PushReport

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
    return os.path.join(platform.user_dir("cache"), "botocore")


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
    from ...engine.remote.push import push

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
    from ...engine.remote.pull import pull

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
    from ...engine.remote.pull import pull
    from .. import restores

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
    from ...engine.remote.check import verify_remote

    spec = default_remote(ws, name)
    remote = open_remote(spec)
    report = verify_remote(remote, remote.load_index(_cache(ws, spec.name)))
    report.remote = spec.name
    return report


def gc(ws: ProtectedWorkspace, name: str | None, dry_run: bool = False) -> RemoteGcReport:
    from ...engine.remote import gc as rgc

    spec = default_remote(ws, name)
    remote = open_remote(spec)

    def local_tree(oid: bytes) -> Any:
        return ws.repo.tree(oid) if ws.repo.catalog.lookup(oid) is not None else None

    def index() -> Any:
        return remote.load_index(_cache(ws, spec.name))

    report = rgc.gc_remote(remote, index(), local_tree, dry_run=dry_run, reload=index)
    report.remote = spec.name
    return report


def remote_listing(ws: ProtectedWorkspace, name: str | None) -> tuple[RemoteSpec, list[dict]]:
    spec = default_remote(ws, name)
    return spec, remote_entries(ws, spec)

