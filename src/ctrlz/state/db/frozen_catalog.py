"""Opening a catalog that SQLite cannot open the usual way because its disk is full.

Why: a WAL database is read through a shared-memory index (``catalog.db-shm``) that SQLite
makes and grows on first use, writing a byte per page so that a full disk shows as an error
rather than a crash; on a full disk that fails ("disk I/O error") before the first row is read.
Every command would then fail, the read-only ones too, on exactly the day the user needs to
get files out (issue 41). So when opening fails that way, the catalog is opened *frozen*:
read-only, without the shared index, as a snapshot of what is committed. Every write to it is
refused with a one-line "the store's disk is full" (:class:`~ctrlz.errors.StoreFull`).

- No WAL content (the usual case: the last connection checkpointed and emptied it): the
  database file is all there is, opened with ``immutable=1`` (no index, no locks).
- A WAL with content (a checkpoint that could not grow the database file): those are committed
  rows, so the database and its WAL are copied to a private temp directory on another disk and
  opened there, where SQLite reads the WAL as it would have. The copy is removed on close. A
  writer that checkpoints during the copy could leave it inconsistent; on a full disk a writer
  gets nowhere, and SQLite's checks then report the copy as unreadable rather than wrong.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from urllib.parse import quote

#: SQLite's primary result codes that mean the disk could not be written
_FULL_CODES = {10, 13}  # SQLITE_IOERR (shared-memory index), SQLITE_FULL
#: less than this free on the store's disk counts as full
_NEARLY_FULL = 1 << 20


def disk_full(exc: sqlite3.Error, path: str | os.PathLike[str]) -> bool:
    """Did opening ``path`` fail because its disk is full (or the index cannot be made)?"""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None or code & 0xFF not in _FULL_CODES:
        return False
    try:
        st = os.statvfs(os.path.dirname(os.fspath(path)) or ".")
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < _NEARLY_FULL


def open_frozen(path: str | os.PathLike[str]) -> tuple[sqlite3.Connection, str | None]:
    """A read-only connection to what is committed in the catalog at ``path``, and the temp
    directory holding its copy (``None`` when it is read in place); see the module docstring."""
    path = os.fspath(path)
    try:
        wal = os.path.getsize(path + "-wal")
    except OSError:
        wal = 0
    if wal == 0:
        db = sqlite3.connect(f"file:{quote(os.path.abspath(path))}?mode=ro&immutable=1",
                             uri=True, isolation_level=None, check_same_thread=False)
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return db, None
    tmp = tempfile.mkdtemp(prefix="ctrlz-catalog-")
    try:
        copy = os.path.join(tmp, "catalog.db")
        shutil.copyfile(path + "-wal", copy + "-wal")
        shutil.copyfile(path, copy)
        db = sqlite3.connect(copy, isolation_level=None, check_same_thread=False)
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()
        db.execute("PRAGMA query_only = 1")
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return db, tmp
