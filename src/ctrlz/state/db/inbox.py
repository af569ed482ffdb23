"""The tool-call inbox: captures an agent hook left durably without opening the catalog.

Why: a file tool's ``PreToolUse`` hook runs in a fresh interpreter before every edit an agent
makes, and the agent waits for it. Indexing its pre-image the usual way (SQLite, the object
store, hashing, three commits) costs that process more in imports than in work: on the 2-core
machine of docs/benchmarks.md, ``import sqlite3`` alone is 6 to 10 ms, the tool-call store's
modules about 20. A hook that writes here needs none of them: it writes one file, fsyncs it,
renames it into place and fsyncs the directory, and the agent goes on. The next process that
opens the tool-call store (the post-tool hook of the same call, the workspace daemon, any
``ctrlz`` command, the service) indexes every record first, in the order they were taken
(:mod:`ctrlz.toolcalls.intake`), so no reader ever sees the store without them.

Layout: ``<store>/toolcalls/inbox/``, one file per capture::

    <taken_ns, 20 digits>-<pid>-<8 hex>.cap    a record, complete and durable
    <same name>.part                           one being written (a crash leaves it: swept)
    <same name>.bad                            one that could not be read (kept, reported)

A record is ``MAGIC``, one line of JSON (the header: what the capture is, and each path's
image with the length of its body), then the bodies back to back. A record is renamed into
place only after its bytes are fsynced, so a ``.cap`` is whole unless the disk itself failed;
:func:`read` still checks every length and raises :class:`BadRecord` rather than guess.

This module is the format alone (files, no rows): what a record means is the intake's.
"""

from __future__ import annotations

import os

from ... import jsontext
from .. import failpoints
from ..fsio.atomic import fsync_dir

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAGIC = b"CTZINBOX1\n"
#: the header's version (its ``v``)
VERSION = 1
DIR = "inbox"
RECORD, PART, BAD = ".cap", ".part", ".bad"
#: a ``.part`` this old is a crashed writer's even if its pid was reused since
STALE_PART_S = 3600


class BadRecord(Exception):
    """A record that cannot be read as written (the message says why)."""


def inbox_dir(toolcalls_dir: str) -> str:
    return os.path.join(toolcalls_dir, DIR)


def write(toolcalls_dir: str, header: dict[str, Any], bodies: list[bytes], taken_ns: int
          ) -> str:
    """Leave one record durably; returns its name. ``header["images"]`` lists each path's
    image, and the bodies follow in that order (``size`` of each says how long).
    Raises ``OSError`` (nothing left behind but what the next intake sweeps)."""
    folder = inbox_dir(toolcalls_dir)
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    else:
        fsync_dir(toolcalls_dir)
    name = f"{taken_ns:020d}-{os.getpid()}-{os.urandom(4).hex()}"
    part = os.path.join(folder, name + PART)
    data = b"".join([MAGIC, jsontext.dumps(header).encode(), b"\n", *bodies])
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            failpoints.hit("inbox-written")
            os.fsync(fd)
        finally:
            os.close(fd)
        failpoints.hit("inbox-before-rename")
        os.rename(part, os.path.join(folder, name + RECORD))
    except BaseException:
        try:
            os.unlink(part)
        except OSError:
            pass
        raise
    fsync_dir(folder)
    return name + RECORD


def listing(toolcalls_dir: str) -> tuple[list[str], list[str]]:
    """(records in the order they were taken, ``.part`` files); both empty when there is no
    inbox. One ``listdir``: what every opener of the tool-call store pays when idle."""
    try:
        names = os.listdir(inbox_dir(toolcalls_dir))
    except (FileNotFoundError, NotADirectoryError):
        return [], []
    return (sorted(n for n in names if n.endswith(RECORD)),
            [n for n in names if n.endswith(PART)])


def read(toolcalls_dir: str, name: str) -> tuple[dict[str, Any], list[bytes]]:
    """A record's header and its bodies, one per image (``b""`` for an image with none)."""
    with open(os.path.join(inbox_dir(toolcalls_dir), name), "rb") as f:
        data = f.read()
    if not data.startswith(MAGIC):
        raise BadRecord("not an inbox record (wrong magic)")
    end = data.find(b"\n", len(MAGIC))
    if end < 0:
        raise BadRecord("truncated header")
    try:
        header = jsontext.loads(data[len(MAGIC):end])
        sizes = [int(image["size"]) for image in header["images"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise BadRecord(f"unreadable header: {exc}") from None
    bodies, at = [], end + 1
    for size in sizes:
        if size < 0 or at + size > len(data):
            raise BadRecord("truncated body")
        bodies.append(data[at:at + size])
        at += size
    if at != len(data):
        raise BadRecord(f"{len(data) - at} bytes past the last body")
    return header, bodies


def remove(toolcalls_dir: str, names: list[str]) -> None:
    """Delete records the catalog now holds (it also remembers their names, so a record a
    crash left behind after its commit is never indexed twice)."""
    folder = inbox_dir(toolcalls_dir)
    for name in names:
        try:
            os.unlink(os.path.join(folder, name))
        except FileNotFoundError:
            pass
    if names:
        fsync_dir(folder)


def set_aside(toolcalls_dir: str, name: str) -> str:
    """Rename a record that cannot be read to ``.bad``, where intake no longer tries it and a
    person can still look at it; returns the new name."""
    folder = inbox_dir(toolcalls_dir)
    bad = name[:-len(RECORD)] + BAD
    os.rename(os.path.join(folder, name), os.path.join(folder, bad))
    fsync_dir(folder)
    return bad


def sweep_parts(toolcalls_dir: str, parts: list[str], now_s: float) -> list[str]:
    """Delete the ``.part`` files of writers that are gone (their pid no longer runs, or the
    file is older than :data:`STALE_PART_S`); returns the names deleted. A live hook's own
    ``.part`` is left alone: it is about to become a record."""
    folder = inbox_dir(toolcalls_dir)
    gone = []
    for name in parts:
        path = os.path.join(folder, name)
        try:
            pid = int(name.split("-")[1])
            age = now_s - os.stat(path).st_mtime
        except (IndexError, ValueError, OSError):
            continue
        if age < STALE_PART_S and _alive(pid):
            continue
        try:
            os.unlink(path)
        except FileNotFoundError:
            continue
        gone.append(name)
    return gone


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
