"""The agent hooks' error log: where a hook that must not fail records what went wrong.

A hook always exits 0 and prints nothing (see :mod:`ctrlz.hooks.runner`), so its errors are
appended here instead: one JSON line per error in ``<store>/toolcalls/hook-errors.jsonl`` (or
``$CTRLZ_HOME/hook-errors.jsonl`` when no workspace could be found), with a traceback in
``hooks.log`` next to it. Both files rotate at 1 MiB. It lives in the library, not in the
hooks face, because the faces read it back: a hook that fails must not fail the agent, but the
user must hear of it, or captures could stop without a word (issue 41). So:

- ``ctrlz status`` (and ``--json``, the service's API and the dashboard, which show the status'
  problems) has a line for the failures of the last day (:func:`hook_failures`,
  :func:`describe`);
- the next ctrlz command says so once on stderr (:func:`untold`, which keeps in
  ``hook-errors.told`` how far into each log the user was told; :func:`pending` is the cheap
  check the workspace daemon makes before serving a command in the CLI's place).

A line is written with the standard library's ``json``, not :mod:`ctrlz.jsontext`: an error
is rare, and the record of it must not depend on the fast codec that may be what failed.
"""

from __future__ import annotations

import os
import time

from .. import jsontext
from ..paths import within

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

if TYPE_CHECKING:
    from pathlib import Path

LOG_MAX = 1 << 20
#: how far back ``ctrlz status`` and the first notice look
DAY_NS = 86_400 * 10**9
TOLD = "hook-errors.told"


def _home() -> Path:
    # from the locator itself, not .store: that one brings the whole object store with it,
    # and every snapshot, rollback and listing asks this
    from ..session.locator import default_home

    return default_home()


def record_error(log_dir: str | os.PathLike[str] | None, agent: str, payload: dict[str, Any],
                 exc: BaseException) -> None:
    """Append one error line (and a traceback to hooks.log) where ``recent_hook_errors``
    finds it."""
    import json
    import traceback

    from .store import home_dir

    where = os.fspath(log_dir) if log_dir else home_dir()
    os.makedirs(where, exist_ok=True)
    line = {"time_ns": time.time_ns(), "agent": agent,
            "event": payload.get("hook_event_name") if isinstance(payload, dict) else None,
            "tool": payload.get("tool_name") if isinstance(payload, dict) else None,
            "cwd": str(payload.get("cwd") or os.getcwd()) if isinstance(payload, dict)
            else os.getcwd(),
            "error": f"{type(exc).__name__}: {' '.join(str(exc).split())}"}
    _append(os.path.join(where, "hook-errors.jsonl"), json.dumps(line) + "\n")
    _append(os.path.join(where, "hooks.log"), f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {agent} "
            f"{line['event']}: {line['error']}\n"
            + "".join(traceback.format_exception(exc)))


def _append(path: str, text: str) -> None:
    try:
        if os.stat(path).st_size > LOG_MAX:
            os.replace(path, path + ".1")
    except FileNotFoundError:
        pass
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, text.encode("utf-8", "replace"))
    finally:
        os.close(fd)


def recent_hook_errors(ws: Any, limit: int = 20,
                       since_ns: int | None = None) -> list[dict[str, Any]]:
    """The newest hook errors for workspace ``ws`` (a Workspace, or anything with ``root`` and
    ``store_path``), oldest first: the store's own log plus the errors logged before a store
    could be found whose cwd lies inside the workspace."""
    return [item for item, _ in _errors(ws, since_ns)][-limit:]


def hook_failures(ws: Any, since_ns: int) -> dict[str, Any] | None:
    """What ``ctrlz status`` says of the hooks: how many failed since ``since_ns``, from
    when, the last failure and the log with its traceback; None when none failed."""
    return _summary(_errors(ws, since_ns))


def describe(summary: dict[str, Any]) -> str:
    """The one line a summary of :func:`hook_failures` or :func:`untold` gets."""
    last = summary["last"]
    who = " ".join(str(last[k]) for k in ("agent", "event", "tool") if last.get(k)) or "?"
    return (f"{summary['failures']} agent hook error(s) since {summary['since']}; the last "
            f"({who}, {last['at']}): {last['error']}; see {summary['log']}")


def pending(store_path: str | os.PathLike[str], home: str | None = None) -> bool:
    """Whether a log has grown since the user was last told (:func:`untold`): two stats and
    a small read, for a command the workspace daemon would serve in the CLI's place (the
    CLI tells). True may be another workspace's error in the home's log (``home``: the
    caller's ``$CTRLZ_HOME``, default this process's)."""
    told = _told(store_path)
    return any(_mark(path) not in (None, told.get(key))
               for key, path, _ in _logs(store_path, home))


def untold(ws: Any) -> dict[str, Any] | None:
    """The hook errors of ``ws`` recorded since the last call (the first call: of the last
    day), summarised as :func:`hook_failures` does, or None; what is returned counts as told.
    Keeping that costs a small file in the store; where it cannot be written the next call
    tells again."""
    store = ws.store_path
    told, now = _told(store), {}
    found: list[tuple[dict[str, Any], str]] = []
    since = time.time_ns() - DAY_NS
    root = _root(ws)
    for key, path, filter_cwd in _logs(store):
        mark = _mark(path)
        if mark is None or mark == told.get(key):
            continue
        before = told.get(key)
        start = before[1] if before and before[0] == mark[0] and before[1] <= mark[1] else 0
        found += _read(path, root if filter_cwd else None, since, start, mark[1])
        now[key] = mark
    if not now:
        return None
    try:
        os.makedirs(os.path.join(store, "toolcalls"), exist_ok=True)
        target = os.path.join(store, "toolcalls", TOLD)
        with open(target + ".tmp", "w", encoding="utf-8") as out:
            out.write(jsontext.dumps({**told, **now}))
        os.replace(target + ".tmp", target)
    except OSError:
        pass
    found.sort(key=lambda pair: pair[0].get("time_ns", 0))
    return _summary(found)


def _errors(ws: Any, since_ns: int | None) -> list[tuple[dict[str, Any], str]]:
    """Every readable error line of ``ws`` with the directory of the log that holds it,
    oldest first."""
    root = _root(ws)
    found: list[tuple[dict[str, Any], str]] = []
    for _, path, filter_cwd in _logs(ws.store_path):
        found += _read(path, root if filter_cwd else None, since_ns)
    found.sort(key=lambda pair: pair[0].get("time_ns", 0))
    return found


def _root(ws: Any) -> str:
    from pathlib import Path

    return str(Path(ws.root).resolve())


def _logs(store_path: str | os.PathLike[str],
          home: str | None = None) -> list[tuple[str, str, bool]]:
    """(key, path, whether its lines are filtered by cwd) of the two logs a store's errors
    are in: its own, and the home's for the errors logged before a store could be found."""
    return [("store", os.path.join(store_path, "toolcalls", "hook-errors.jsonl"), False),
            ("home", os.path.join(home or _home(), "hook-errors.jsonl"), True)]


def _read(path: str, root: str | None, since_ns: int | None, start: int = 0,
          end: int | None = None) -> list[tuple[dict[str, Any], str]]:
    """The error lines of ``path`` (bytes ``start`` to ``end``; of the whole file, the last
    1000), those of a cwd inside ``root`` when it is given, none older than ``since_ns``."""
    try:
        with open(path, "rb") as f:
            f.seek(start)
            data = f.read(-1 if end is None else max(0, end - start))
    except OSError:
        return []
    lines = data.decode("utf-8", "replace").splitlines()
    found = []
    for text in lines[-1000:] if start == 0 else lines:
        try:
            item = jsontext.loads(text)
        except ValueError:
            continue
        if not isinstance(item, dict):
            continue
        cwd = str(item.get("cwd") or "")
        if root is not None and not within(cwd, root):
            continue
        if since_ns is not None and item.get("time_ns", 0) < since_ns:
            continue
        found.append((item, os.path.dirname(path)))
    return found


def _summary(found: list[tuple[dict[str, Any], str]]) -> dict[str, Any] | None:
    if not found:
        return None
    from ..types import iso_utc

    last, where = found[-1]
    return {"failures": len(found), "since": iso_utc(found[0][0].get("time_ns", 0)),
            "last": {"at": iso_utc(last.get("time_ns", 0)),
                     **{k: last.get(k) for k in ("agent", "event", "tool", "cwd", "error")}},
            "log": os.path.join(where, "hooks.log")}


def _mark(path: str) -> list[int] | None:
    """How far ``path`` goes: its inode (a rotation makes a new file) and size."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_ino, st.st_size]


def _told(store_path: str | os.PathLike[str]) -> dict[str, Any]:
    try:
        with open(os.path.join(store_path, "toolcalls", TOLD), "rb") as f:
            told = jsontext.loads(f.read())
    except (OSError, ValueError):
        return {}
    return told if isinstance(told, dict) else {}
