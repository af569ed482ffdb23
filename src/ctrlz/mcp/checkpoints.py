"""How snapshots are named and shown to an agent: ``cp-N`` aliases, ages, the fields every
result that names a checkpoint carries, and the pool sizes.

``checkpoint`` values are stable snapshot ids; ``cp-N`` (N back from the newest: ``cp-0`` is
the newest) is accepted as input and reported as ``cp`` alongside.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

from ..errors import UsageError
from ..paths import workspace_relative
from ..session import policy
from ..types import Snapshot
from ..workspace import Workspace


def age(ns: int, now_ns: int | None = None) -> str:
    seconds = max(0.0, ((now_ns or time.time_ns()) - ns) / 1e9)
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{int(seconds // 60)} min ago"
    if seconds < 86400:
        return f"{int(seconds // 3600)} hr ago"
    return f"{int(seconds // 86400)} days ago"


def cp_aliases(snaps: Sequence[Snapshot]) -> dict[str, str]:
    """Snapshot id → ``cp-N`` (``cp-0`` is the newest), for ``snaps`` oldest first."""
    return {s.id: f"cp-{len(snaps) - 1 - i}" for i, s in enumerate(snaps)}


def check_path(path: str) -> str:
    """Paths are checked lexically against the workspace root later (``Workspace.relpath``:
    ``a..b.txt`` is a name, ``../x`` and ``/etc/passwd`` are refused); here only what can never
    be a path."""
    if not path or not path.strip():
        raise UsageError("the path is empty")
    if "\0" in path:
        raise UsageError("the path contains a NUL byte")
    return path


def from_root(ws: Workspace, path: str) -> str:
    """``path`` as the absolute path it names, taken from the workspace root as every tool's
    schema says, never from the server's current directory: a server started in a
    subdirectory (an agent launched in one package of a monorepo) must not revert
    ``sub/a.txt`` when asked for ``a.txt``. The library resolves relative paths git-style
    from the cwd, which is right for the CLI only; an absolute path is what it sees, so
    nothing is left for it to guess. ``../x`` and outside absolute paths are refused here,
    in the caller's own words."""
    check_path(path)
    root = os.fsencode(ws.root)
    rel = workspace_relative(root, path, root)
    return os.fsdecode(os.path.join(root, rel) if rel else root)


def snap_ref(s: Snapshot, cps: dict[str, str], now: int) -> dict[str, Any]:
    return {"checkpoint": s.id, "cp": cps[s.id], "origin": s.type, "name": s.label,
            "age": age(s.created_ns, now), "created_at": s.created_at}


def pools(ws: Workspace, snaps: Sequence[Snapshot]) -> dict[str, int]:
    settings = ws.policy
    return {"auto_max": settings.auto_max, "manual_max": settings.manual_max,
            "manual_available": policy.manual_available(ws, snaps)}
