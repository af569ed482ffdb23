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


def write_new(path: str | bytes | os.PathLike[str], data: bytes, mode: int = 0o600,
              durable: bool = True, chmod: int | None = None) -> None:
    """Create ``path`` (which must not exist) holding ``data``, fsync'd unless not
    ``durable``. On any failure, an interrupt included, the half-written file is removed, so
    a caller never leaves a torn temp file or record behind. ``mode`` is the creation mode
    (the umask applies); ``chmod`` sets an exact one, as a restored file's. The one loop
    every durable writer needs: a short write (a nearly full disk) goes on where it
    stopped."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if chmod is not None:
            os.fchmod(fd, chmod)
        if durable:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(path)
        raise
    os.close(fd)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, mode: int = 0o600,
                       durable: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically. ``durable=False`` skips the fsyncs, for
    caches whose loss (an empty or old file after a power cut) costs only speed."""
    from pathlib import Path  # here, not at import: agent hooks use this module without it

    path = Path(path)
    tmp = path.parent / temp_name(path.name)
    try:
        write_new(tmp, data, mode, durable)
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
