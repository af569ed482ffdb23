"""ctrlz: undo for AI agents.

Content-addressed, deduplicated snapshots of a workspace, taken automatically or on demand, with
diffs and restores that only ever touch what a snapshot covered, behind a safety snapshot.

The public API is what this module exports: :class:`Workspace` (the native API the CLI uses), the
SnapshotManager family (compatible with the nono-py API), the records they return, and the errors
they raise. Everything else is private and may change.
"""

from .errors import (
    AmbiguousSnapshot,
    ConfigError,
    CorruptObject,
    CtrlzError,
    LimitExceeded,
    PathOutsideWorkspace,
    RestoreError,
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
