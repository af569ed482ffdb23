"""A remote in a local directory (``file:///path``): for tests, NAS mounts and USB disks.

It keeps the S3 backend's promises with filesystem primitives. A create-only write is a temp
file, fsynced, then ``link()``ed to its name (which fails if the name exists: atomic, and
never overwrites). A compare-and-swap holds an ``flock`` on a lock file beside the key while it
compares the current content's digest (the ETag here) and renames the new version into place.
Every rename is followed by an fsync of the directory, so what a caller was told is written
survives a crash.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

from ...errors import RemoteError
from ..fsio.atomic import fsync_dir, temp_name
from .backend import Conflict, Missing


class LocalBackend:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.url = "file://" + str(root)

    def _path(self, key: str) -> Path:
        if not key or key.startswith("/") or ".." in key.split("/"):
            raise RemoteError(f"{self.url}: invalid key {key!r}")
        return self.root / key

    def _io(self, exc: OSError, key: str) -> RemoteError:
        return RemoteError(f"{self.url}: {key}: {exc.strerror or exc}")

    def check(self) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RemoteError(f"{self.url}: cannot use the directory: "
                              f"{exc.strerror or exc}") from None
        if not os.access(self.root, os.W_OK | os.X_OK):
            raise RemoteError(f"{self.url}: the directory is not writable")

    def get(self, key: str) -> tuple[bytes, str]:
        try:
            data = self._path(key).read_bytes()
        except FileNotFoundError:
            raise Missing(f"{self.url}: {key} does not exist") from None
        except OSError as exc:
            raise self._io(exc, key) from None
        return data, _etag(data)

    def get_range(self, key: str, start: int, length: int) -> bytes:
        try:
            with open(self._path(key), "rb") as f:
                return os.pread(f.fileno(), length, start)
        except FileNotFoundError:
            raise Missing(f"{self.url}: {key} does not exist") from None
        except OSError as exc:
            raise self._io(exc, key) from None

    def _temp(self, path: Path, data: bytes) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.parent / temp_name(path.name)
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        return tmp

    def put_new(self, key: str, data: bytes) -> bool:
        path = self._path(key)
        try:
            tmp = self._temp(path, data)
            try:
                os.link(tmp, path)
            except FileExistsError:
                return False
            finally:
                os.unlink(tmp)
            fsync_dir(path.parent)
        except OSError as exc:
            raise self._io(exc, key) from None
        return True

    def put_cas(self, key: str, data: bytes, etag: str | None) -> str:
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path.parent / f".{path.name}.lock", "a") as lock:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
                try:
                    current = _etag(path.read_bytes())
                except FileNotFoundError:
                    current = None
                if current != etag:
                    raise Conflict(f"{self.url}: {key} changed meanwhile")
                tmp = self._temp(path, data)
                os.replace(tmp, path)
                fsync_dir(path.parent)
        except OSError as exc:
            raise self._io(exc, key) from None
        return _etag(data)

    def delete(self, key: str) -> None:
        try:
            self._path(key).unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise self._io(exc, key) from None

    def list(self, prefix: str) -> Iterator[tuple[str, int, float]]:
        base = self.root / prefix.rstrip("/") if prefix else self.root
        if not base.is_dir():
            return
        for dirpath, _dirs, files in os.walk(base):
            for name in sorted(files):
                if name.startswith("."):  # temp files and CAS lock files
                    continue
                full = os.path.join(dirpath, name)
                try:
                    st = os.stat(full)
                except FileNotFoundError:
                    continue
                yield os.path.relpath(full, self.root), st.st_size, st.st_mtime

    def server_time(self) -> float:
        return time.time()


def _etag(data: bytes) -> str:
    return '"' + hashlib.sha256(data).hexdigest() + '"'
