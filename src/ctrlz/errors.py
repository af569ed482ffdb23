"""Every error ctrlz raises on purpose.

All of them derive from :class:`CtrlzError`, which derives from ``RuntimeError`` so that code
written against the SnapshotManager seed API (which raised ``RuntimeError``) keeps working.
Each message is one line that says what happened and what to do about it; the faces print it
as it is and exit non-zero, without a traceback.

::

    CtrlzError (RuntimeError)
     ├── UsageError              bad input from the caller (paths, arguments, config values)
     │    ├── PathOutsideWorkspace
     │    ├── ConfigError
     │    ├── HistoryAtRisk       a restore would drop git commits and no --git= choice was made
     │    └── CaptureOnly         a sandboxed session asked the daemon or service for more
     │                            than a capture (a rollback, a delete, gc, config)
     ├── WorkspaceError           no workspace here / store placed inside the workspace
     ├── SnapshotNotFound         a reference names no snapshot
     │    └── AmbiguousSnapshot   a prefix names more than one
     ├── LimitExceeded            max_entries / max_bytes / pool caps
     ├── StoreError               the store is unreadable, corrupt, full or locked
     │    ├── StoreLocked
     │    ├── StoreFull
     │    └── CorruptObject
     ├── RestoreError             a restore could not be planned, applied or verified
     │    ├── RestoreIncomplete   paths changed under the restore and were left as they are
     │    └── VerifyMismatch
     └── RemoteError              a remote store or an archive: unreachable, refused, corrupt
"""

from __future__ import annotations

__all__ = [
    "AmbiguousSnapshot",
    "CaptureOnly",
    "ConfigError",
    "CorruptObject",
    "CtrlzError",
    "HistoryAtRisk",
    "LimitExceeded",
    "PathOutsideWorkspace",
    "RemoteError",
    "RestoreError",
    "RestoreIncomplete",
    "SnapshotNotFound",
    "StoreError",
    "StoreFull",
    "StoreLocked",
    "UsageError",
    "VerifyMismatch",
    "WorkspaceError",
    "exhausted",
]


class CtrlzError(RuntimeError):
    """Root of every error ctrlz raises deliberately."""

    #: process exit status the CLI uses for this family of errors
    exit_code = 1


class UsageError(CtrlzError):
    exit_code = 2


class PathOutsideWorkspace(UsageError):
    pass


class ConfigError(UsageError):
    pass


class HistoryAtRisk(UsageError):
    """A restore would make commits of a git repository in the workspace unreachable (or could
    not tell) and the caller chose neither ``--git=keep`` nor ``--git=restore``: refused before
    anything was written. ``changes``: what it would have done to each repository
    (:class:`ctrlz.engine.restore.githistory.GitChange`), when raised in this process."""

    def __init__(self, message: str, changes: list[object] | None = None) -> None:
        super().__init__(message)
        self.changes = changes if changes is not None else []


class CaptureOnly(UsageError):
    """A process of a sandboxed run (``ctrlz run --sandbox``) asked the workspace daemon or
    the service for something other than a capture; see :mod:`ctrlz.session.daemon.confined`."""


class WorkspaceError(CtrlzError):
    exit_code = 3


class SnapshotNotFound(CtrlzError):
    exit_code = 4


class AmbiguousSnapshot(SnapshotNotFound):
    pass


class LimitExceeded(CtrlzError):
    exit_code = 5


class StoreError(CtrlzError):
    exit_code = 6


class StoreLocked(StoreError):
    pass


class StoreFull(StoreError):
    pass


class CorruptObject(StoreError):
    pass


class RestoreError(CtrlzError):
    exit_code = 7


class VerifyMismatch(RestoreError):
    pass


class RestoreIncomplete(RestoreError):
    """The restore finished, except for paths someone changed while it ran: those were left as
    they are (listed in ``result.conflicts``). The undo entry is recorded."""

    def __init__(self, message: str, result: object = None) -> None:
        super().__init__(message)
        self.result = result


class RemoteError(CtrlzError):
    """A remote store (S3 API or ``file://``) or an archive could not be used: unreachable,
    credentials refused, bucket missing, an object corrupt or truncated. The message names the
    remote, the key or the object, and what to do."""

    exit_code = 8


def exhausted(exc: OSError, doing: str) -> LimitExceeded | None:
    """The error to raise when ``exc`` says this process or the system ran out of something
    (descriptors, memory), not that a file cannot be read; None otherwise.

    Why: a scan skips a file it cannot read and lists it, which is right for a file the user
    cannot read either, and wrong when the reason is ctrlz's own ``ulimit -n``. A snapshot
    taken that way would say "done" while missing files that read fine a moment later."""
    import errno

    if exc.errno == errno.EMFILE:
        return LimitExceeded(f"too many open files while {doing}; raise the limit "
                             "(ulimit -n) and try again")
    if exc.errno == errno.ENFILE:
        return LimitExceeded(f"the system ran out of open files while {doing}; close some "
                             "programs and try again")
    if exc.errno == errno.ENOMEM:
        return LimitExceeded(f"out of memory while {doing}; free some memory and try again")
    return None
