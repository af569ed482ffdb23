"""The agent hooks' error log: where a hook that must not fail records what went wrong.

A hook always exits 0 and prints nothing (see :mod:`ctrlz.hooks.runner`), so its errors are
appended here instead: one JSON line per error in ``<store>/toolcalls/hook-errors.jsonl`` (or
``$CTRLZ_HOME/hook-errors.jsonl`` when no workspace could be found), with a traceback in
``hooks.log`` next to it. Both files rotate at 1 MiB. ``ctrlz status`` reads them back through
:func:`recent_hook_errors`; it lives in the library, not in the hooks face, for that reason.
"""

from __future__ import annotations

import os
import time

from .. import jsontext

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

if TYPE_CHECKING:
    from pathlib import Path

LOG_MAX = 1 << 20


def _home() -> Path:
    from .store import default_home

    return default_home()


def record_error(log_dir: str | os.PathLike[str] | None, agent: str, payload: dict[str, Any],
                 exc: BaseException) -> None:
    """Append one error line (and a traceback to hooks.log) where ``recent_hook_errors``
    finds it."""
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
    _append(os.path.join(where, "hook-errors.jsonl"), jsontext.dumps(line) + "\n")
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
    from pathlib import Path

    root = str(Path(ws.root).resolve())
    found: list[dict[str, Any]] = []
    for path, filter_cwd in ((Path(ws.store_path) / "toolcalls" / "hook-errors.jsonl", False),
                             (_home() / "hook-errors.jsonl", True)):
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        for text in lines[-1000:]:
            try:
                item = jsontext.loads(text)
            except ValueError:
                continue
            cwd = str(item.get("cwd") or "")
            if filter_cwd and not (cwd == root or cwd.startswith(root + os.sep)):
                continue
            if since_ns is not None and item.get("time_ns", 0) < since_ns:
                continue
            found.append(item)
    found.sort(key=lambda i: i.get("time_ns", 0))
    return found[-limit:]
