"""ctrlz: undo for AI agents.

Content-addressed, deduplicated snapshots of a workspace, taken automatically or on demand, with
diffs and restores that only ever touch what a snapshot covered, behind a safety snapshot.

The public API is what this module exports: :class:`Workspace` (the native API the CLI uses), the
SnapshotManager family (compatible with the nono-py API), the records they return, and the errors
they raise. Everything else is private and may change.
"""

from __future__ import annotations

# ``typing`` costs ~10 ms to import, and an agent hook imports this package on every tool call
TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from typing import Any

    from .errors import (
        AmbiguousSnapshot,
        ConfigError,
        CorruptObject,
        CtrlzError,
        LimitExceeded,
        PathOutsideWorkspace,
        RestoreError,
        RestoreIncomplete,
        SnapshotNotFound,
        StoreError,
        StoreFull,
        StoreLocked,
        UsageError,
        VerifyMismatch,
        WorkspaceError,
    )
    from .snapshot_manager import (
        Change,
        ContentHash,
        ExclusionConfig,
        FileState,
        SessionMetadata,
        SnapshotManager,
        SnapshotManifest,
    )
    from .types import Skipped, Snapshot
    from .workspace import Diff, Workspace, default_home

# Exports load on first use, so that `ctrlz --help` and agent hooks start fast.
_EXPORTS = {
    **dict.fromkeys(
        ["AmbiguousSnapshot", "ConfigError", "CorruptObject", "CtrlzError", "LimitExceeded",
         "PathOutsideWorkspace", "RestoreError", "RestoreIncomplete", "SnapshotNotFound",
         "StoreError", "StoreFull", "StoreLocked", "UsageError", "VerifyMismatch",
         "WorkspaceError"], "errors"),
    **dict.fromkeys(["Change", "ContentHash", "ExclusionConfig", "FileState", "SessionMetadata",
                     "SnapshotManager", "SnapshotManifest"], "snapshot_manager"),
    **dict.fromkeys(["Skipped", "Snapshot"], "types"),
    **dict.fromkeys(["Diff", "Workspace", "default_home"], "workspace"),
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ctrlz' has no attribute {name!r}")
    from importlib import import_module  # and warnings with it: not for every hook's start

    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


__version__ = "0.1.0"

__all__ = [
    "AmbiguousSnapshot",
    "Change",
    "ConfigError",
    "ContentHash",
    "CorruptObject",
    "CtrlzError",
    "Diff",
    "ExclusionConfig",
    "FileState",
    "LimitExceeded",
    "PathOutsideWorkspace",
    "RestoreError",
    "RestoreIncomplete",
    "SessionMetadata",
    "Skipped",
    "Snapshot",
    "SnapshotManager",
    "SnapshotManifest",
    "SnapshotNotFound",
    "StoreError",
    "StoreFull",
    "StoreLocked",
    "UsageError",
    "VerifyMismatch",
    "Workspace",
    "WorkspaceError",
    "default_home",
]
