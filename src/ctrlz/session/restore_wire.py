"""A restore request, its result and its error, as JSON for the workspace daemon's socket.

Why a restore crosses a process boundary at all: a rollback run from a fresh process pays the
interpreter, the engine's imports and a stat walk of the whole tree for its safety snapshot
before it touches one file. The daemon has all of that warm (its watcher knows which
directories changed), so a short-lived caller hands it the :class:`Request` and renders the
:class:`RestoreResult` it gets back. It is the same engine, called in another process.

Everything here is data: paths, names and object ids travel as hex (they are bytes, and may
not be UTF-8). A request names its target snapshot by id, or a rollback by the ref the user
gave (the daemon resolves it, so the caller need not open the store at all); a result carries
the records of its snapshots whole, for the same reason. An error travels as its class name in
:mod:`ctrlz.errors`, its message and, for an incomplete restore, its result.
"""

from __future__ import annotations

from .. import errors
from ..engine.restore.actions import Action, RestorePlan
from ..engine.restore.requests import Request, RestoreResult
from ..errors import CtrlzError, RestoreError
from ..state.interchange.portable import from_record, to_record
from ..state.trees import Entry
from ..types import Skipped, Snapshot

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


#: The format of a request and its reply. A daemon declines (before starting) a request of
#: another version: a daemon left running across an upgrade, and the caller restores itself.
#: 2: rollbacks by ref, and results with their snapshots' records. 3: the ``git`` choice of
#: a request and the ``git`` consequences of a result (a daemon of 2 would ignore a
#: ``--git=keep`` and put .git back).
VERSION = 3


def _hex(b: bytes | None) -> str | None:
    return None if b is None else b.hex()


def _bytes(s: str | None) -> bytes | None:
    return None if s is None else bytes.fromhex(s)


def _entry(e: Entry | None) -> list[Any] | None:
    return None if e is None else [e.name.hex(), e.kind, e.mode, e.size, e.mtime_ns,
                                   _hex(e.oid)]


def _unentry(d: list[Any] | None) -> Entry | None:
    if d is None:
        return None
    name, kind, mode, size, mtime_ns, oid = d
    return Entry(bytes.fromhex(name), kind, mode, size, mtime_ns, _bytes(oid))


def _action(a: Action) -> list[Any]:
    return [a.op, a.path.hex(), _entry(a.entry), _entry(a.expect), a.change]


def _unaction(d: list[Any]) -> Action:
    op, path, entry, expect, change = d
    return Action(op, bytes.fromhex(path), _unentry(entry), _unentry(expect), change)


def _skips(items: list[Skipped]) -> list[list[str]]:
    return [[s.path.hex(), s.reason] for s in items]


def _unskips(d: list[list[str]]) -> list[Skipped]:
    return [Skipped(bytes.fromhex(p), r) for p, r in d]


def encode_rollback(ref: str, rels: list[bytes], kind: str,
                    git: str = "auto") -> dict[str, Any]:
    """A rollback (or revert) of ``rels`` (workspace-relative; none: everything) to the
    snapshot ``ref`` names, which the daemon resolves and turns into its :class:`Request`
    (``session.restores.rollback_request``), as the caller would have."""
    return {"rollback": {"version": VERSION, "ref": ref, "paths": [r.hex() for r in rels],
                         "kind": kind, "git": git}}


def rollback_git(d: dict[str, Any]) -> str:
    """A rollback request's ``--git`` choice (:mod:`ctrlz.engine.restore.githistory`)."""
    return str(d.get("git", "auto"))


def decode_rollback(d: dict[str, Any]) -> tuple[str, list[bytes], str]:
    """(ref, workspace-relative paths, kind); raises ``ValueError``/``KeyError``/
    ``TypeError`` on a malformed one."""
    if d.get("version") != VERSION:
        raise ValueError(f"request version {d.get('version')!r}, this daemon speaks {VERSION}")
    return str(d["ref"]), [bytes.fromhex(p) for p in d["paths"]], str(d["kind"])


def encode_request(req: Request) -> dict[str, Any]:
    """Only a request with a stored target travels (a built target is code, not data)."""
    assert req.target is not None and req.build_target is None
    return {"request": {
        "version": VERSION, "kind": req.kind, "target": req.target.id,
        "paths": None if req.paths is None else [p.hex() for p in req.paths],
        "explicit": [p.hex() for p in req.explicit], "undo": req.undo,
        "label": req.label, "dry_run": req.dry_run, "numbered_safety": req.numbered_safety,
        "git": req.git}}


def decode_request(resolve: Callable[[str], Snapshot], d: dict[str, Any]) -> Request:
    """``resolve``: the workspace's snapshot lookup (a ref to its record). Raises
    ``ValueError``/``KeyError``/``TypeError`` on a malformed request and
    :class:`~ctrlz.errors.SnapshotNotFound` when the target is gone."""
    if d.get("version") != VERSION:
        raise ValueError(f"request version {d.get('version')!r}, this daemon speaks {VERSION}")
    target = resolve(str(d["target"]))
    paths = d["paths"]
    undo = d["undo"]
    if not isinstance(undo, dict):
        raise TypeError("undo is not an object")
    return Request(kind=str(d["kind"]), target=target,
                   paths=None if paths is None else [bytes.fromhex(p) for p in paths],
                   explicit=[bytes.fromhex(p) for p in d["explicit"]], undo=undo,
                   label=None if d["label"] is None else str(d["label"]),
                   dry_run=bool(d["dry_run"]), numbered_safety=bool(d["numbered_safety"]),
                   git=str(d.get("git", "auto")))


def encode_result(r: RestoreResult) -> dict[str, Any]:
    """``applied`` goes as indexes into the plan's actions (in the order of
    :attr:`RestorePlan.actions`): the applied actions are the plan's own, and a restore of
    many paths would otherwise send each one twice."""
    plan = r.plan
    where = {id(a): i for i, a in enumerate(plan.actions)}
    applied = [where.get(id(a), _action(a)) for a in r.applied]
    return {"target": _snapshot(r.target), "safety": r.safety and _snapshot(r.safety),
            "kind": r.kind, "dry_run": r.dry_run, "destination": r.destination,
            "plan": {"removals": [_action(a) for a in plan.removals],
                     "writes": [_action(a) for a in plan.writes],
                     "finals": [_action(a) for a in plan.finals],
                     "skipped": _skips(plan.skipped)},
            "applied": applied, "skipped": _skips(r.skipped),
            "conflicts": _skips(r.conflicts), "git": r.git}


def _snapshot(s: Snapshot) -> dict[str, Any]:
    return {**to_record(s), "number": s.number}


def _unsnapshot(d: dict[str, Any]) -> Snapshot:
    try:
        return from_record(d, None if d["number"] is None else int(d["number"]))
    except CtrlzError as exc:  # a malformed record: as any other malformed reply
        raise ValueError(str(exc)) from None


def decode_result(d: dict[str, Any]) -> RestoreResult:
    """Raises ``ValueError``/``KeyError``/``TypeError``/``IndexError`` on a malformed one."""
    target = _unsnapshot(d["target"])
    safety = _unsnapshot(d["safety"]) if d["safety"] else None
    plan = RestorePlan(target)
    p = d["plan"]
    plan.removals = [_unaction(a) for a in p["removals"]]
    plan.writes = [_unaction(a) for a in p["writes"]]
    plan.finals = [_unaction(a) for a in p["finals"]]
    plan.skipped = _unskips(p["skipped"])
    actions = plan.actions
    applied = [actions[a] if isinstance(a, int) else _unaction(a) for a in d["applied"]]
    return RestoreResult(target, plan, safety, applied,
                         _unskips(d["skipped"]), _unskips(d["conflicts"]),
                         bool(d["dry_run"]), d["destination"], str(d["kind"]),
                         git=list(d.get("git") or []))


def reply(run: Callable[[], RestoreResult | dict[str, Any]]) -> dict[str, Any]:
    """The daemon's answer on the socket to a restore ``run`` carries out
    (:meth:`ctrlz.session.daemon.daemon.Daemon.restore`): its result, or its failure, each converted
    once, here; or, as it is, the reply that declined it before anything started."""
    try:
        outcome = run()
    except CtrlzError as exc:
        return {"ok": True, "failed": encode_error(exc)}
    if isinstance(outcome, dict):
        return outcome
    return {"ok": True, "result": encode_result(outcome)}


def encode_error(exc: CtrlzError) -> dict[str, Any]:
    """A ctrlz error keeps its class (the daemon turns any other into a
    :class:`RestoreError` that says where to look), and an incomplete restore its result."""
    result = getattr(exc, "result", None)
    return {"error": type(exc).__name__, "message": str(exc),
            "result": encode_result(result) if isinstance(result, RestoreResult) else None}


def decode_error(d: dict[str, Any]) -> CtrlzError:
    cls = getattr(errors, str(d.get("error")), None)
    if not (isinstance(cls, type) and issubclass(cls, CtrlzError)):
        cls = RestoreError
    message = str(d.get("message") or "the workspace daemon's restore failed")
    try:
        exc = cls(message)
    except TypeError:  # a class that wants more than a message
        exc = RestoreError(message)
    if d.get("result") is not None:
        try:
            exc.result = decode_result(d["result"])  # type: ignore[attr-defined]
        except (CtrlzError, KeyError, TypeError, ValueError, IndexError):
            pass  # the error itself is what the caller must see
    return exc
