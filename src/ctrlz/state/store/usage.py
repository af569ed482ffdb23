"""What a workspace store takes against ``store_cap``: the catalog, the packs, the loose
objects and the stat cache (``STORE_FILES``), never ``toolcalls/`` or the other side files
(see :mod:`ctrlz.engine.retention`).

:func:`store_usage` reads the packs' and loose objects' sizes from the catalog, so the byte cap
checked after every snapshot, ``ctrlz list`` and ``ctrlz status`` cost the same with ten packs
or ten thousand; :func:`disk_usage` lists the files, the ground truth tests compare it with.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .repository import Repository

#: the files and directories of a store that count against ``store_cap``
STORE_FILES = ("catalog.db", "catalog.db-wal", "catalog.db-shm", "statcache", "packs", "objects")


def disk_usage(path: Path) -> int:
    """Bytes the workspace store at ``path`` takes against ``store_cap`` (its files' sizes):
    the entries of ``STORE_FILES``, never ``toolcalls/`` or the other side files."""
    total = 0
    for name in STORE_FILES:
        top = os.path.join(path, name)
        try:
            st = os.lstat(top)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode):
            total += st.st_size
            continue
        for dirpath, _dirs, files in os.walk(top):
            for f in files:
                try:
                    total += os.lstat(os.path.join(dirpath, f)).st_size
                except OSError:
                    pass
    return total


def store_usage(repo: Repository) -> int:
    """What :func:`disk_usage` measures, read from the catalog instead of by listing the
    store, so a snapshot's cap check costs the same with ten packs or ten thousand. Leftovers
    of a crashed write, which the catalog does not know, are not counted: gc removes them."""
    total = repo.catalog.packed_bytes()
    for name in STORE_FILES:
        if name not in ("packs", "objects"):
            try:
                total += os.lstat(os.path.join(repo.path, name)).st_size
            except OSError:
                pass
    return total
