"""Atomic file replacement: temp file in the same directory, fsync, rename, fsync the directory.

Every piece of persistent state ctrlz writes outside SQLite goes through here, so a crash at any
instant leaves either the old file or the new one, never a torn one.
"""

from __future__ import annotations

import errno
import os

from ...errors import StoreFull

TEMP_PREFIX = ".ctrlz-tmp-"


def temp_name(name: bytes | str = "") -> str:
    """A name for a temp file that scans skip and that cannot collide with another writer."""
    base = os.fsdecode(name)[:40] if name else ""
    # os.urandom, not the secrets module: same bytes, without importing hmac/OpenSSL/random
    return f"{TEMP_PREFIX}{os.getpid()}-{os.urandom(4).hex()}-{base}"


def fsync_dir(path: str | os.PathLike[str]) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, mode: int = 0o600,
                       durable: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically. ``durable=False`` skips the fsyncs, for
    caches whose loss (an empty or old file after a power cut) costs only speed."""
    from pathlib import Path  # here, not at import: agent hooks use this module without it

    path = Path(path)
    tmp = path.parent / temp_name(path.name)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise StoreFull(f"no space left writing {path}; free some disk space") from exc
        raise
    if durable:
        fsync_dir(path.parent)
