"""Indexing the captures hooks left in the inbox, before anyone reads the tool-call store.

:func:`take_in` runs whenever the store is opened (:func:`ctrlz.toolcalls.core.opened`) and
finds records waiting; an empty inbox costs one ``listdir``. Under the store's lock, each
record, oldest first, becomes what :func:`~ctrlz.toolcalls.api.fs_snapshot` would have made
at the moment it was taken: the snapshot registered in its turn (:mod:`.register`), its
bodies stored and fsynced, its entries added (the first capture of a path wins), the redo
stack cleared, the budgets enforced. Its name is recorded in ``tc_inbox`` in that same
transaction and the file deleted after the commit, so a crash anywhere leaves a record either
waiting (indexed next time) or indexed and remembered (deleted next time, never indexed
twice: a second intake of the same capture could start a turn or clear a redo stack).

A record that cannot be read is set aside as ``.bad`` and reported where hook errors go
(``ctrlz status`` shows them); the ``.part`` files of writers that died are deleted.
"""

from __future__ import annotations

import os
import time

from ..state.db import inbox
from . import records
from .images import FILE, KINDS, RAW_BELOW, SYMLINK, Image, is_plain_rel
from .register import register_rows

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NoReturn

    from .place import Place

_TABLE = "CREATE TABLE IF NOT EXISTS tc_inbox (name TEXT PRIMARY KEY)"


def waiting(place: Place) -> bool:
    """Whether the inbox holds anything for :func:`take_in` (one ``listdir``)."""
    names, parts = inbox.listing(place.store.dir)
    return bool(names or parts)


def take_in(place: Place) -> int:
    """Index every record waiting, oldest first; returns how many were indexed now."""
    tc_dir = place.store.dir
    with place.store.lock:
        names, parts = inbox.listing(tc_dir)  # again, now that no other writer runs
        if parts:
            inbox.sweep_parts(tc_dir, parts, time.time())
        if not names:
            return 0
        db = place.db
        with place.store.catalog.transaction():
            db.execute(_TABLE)
            done = {row[0] for row in db.execute("SELECT name FROM tc_inbox")}
            # names whose files are gone were deleted after their commit: forget them
            db.executemany("DELETE FROM tc_inbox WHERE name = ?",
                           [(n,) for n in done.difference(names)])
        taken, indexed, evicted = [], 0, False
        for name in names:
            if name not in done:
                try:
                    header, bodies = inbox.read(tc_dir, name)
                    _check(header)
                except (inbox.BadRecord, OSError) as exc:
                    _set_aside(place, name, exc)
                    continue
                evicted = _index(place, name, header, bodies) or evicted
                indexed += 1
            taken.append(name)
        inbox.remove(tc_dir, taken)
        if evicted:
            place.store.compact()
        return indexed


def _index(place: Place, name: str, header: dict[str, Any], bodies: list[bytes]) -> bool:
    """One record in one transaction; returns whether a budget evicted anything."""
    from ..state import failpoints

    db = place.db
    session_id = header["session_id"]
    writer = place.store.objects.writer()
    try:
        with place.store.catalog.transaction():
            snap = register_rows(db, session_id, header["scope_id"], lazy=False,
                                 agent=header.get("agent"), tool=header.get("tool"),
                                 args_key=header.get("args_key"),
                                 turn_key=header.get("turn_key"),
                                 taken_ns=header["taken_ns"])
            images = []
            for item, body in zip(header["images"], bodies, strict=True):
                rel = os.fsencode(item["path"])
                if not records.has_entry(db, snap.seq, rel):
                    images.append((rel, _stored(writer, item, body)))
            writer.commit(place.store.catalog)  # the bodies are durable before their rows
            for rel, image in images:
                records.add_entry(db, snap.seq, rel, image)
            records.clear_redo(db, session_id)
            db.execute("INSERT INTO tc_inbox (name) VALUES (?)", (name,))
            gone = records.enforce_cap(db, session_id, snap.seq)
            failpoints.hit("intake-before-commit")
    except BaseException:
        writer.abort()
        raise
    failpoints.hit("intake-committed")
    return bool(gone)


def _fits(value: Any) -> bool:
    """An integer SQLite can store (a bigger one raised OverflowError in the transaction,
    at every opening of the store)."""
    return isinstance(value, int) and not isinstance(value, bool) and -(1 << 63) <= value < 1 << 63


def _check(header: dict[str, Any]) -> None:
    """Raise :class:`~ctrlz.state.db.inbox.BadRecord` for a header that cannot be indexed as
    written: a record that would fail its transaction every time is set aside, never left
    to make every opening of the store fail."""
    def bad(why: str) -> NoReturn:
        raise inbox.BadRecord(why)

    if header.get("v") != inbox.VERSION or header.get("kind") != "pre":
        bad(f"unknown record version {header.get('v')!r} or kind {header.get('kind')!r}")
    for key in ("session_id", "scope_id"):
        value = header.get(key)
        if not (isinstance(value, str) and value.strip()):
            bad(f"no {key}")
    for key in ("agent", "tool", "args_key", "turn_key"):
        if not isinstance(header.get(key), (str, type(None))):
            bad(f"{key} is not text")
    taken = header.get("taken_ns")
    if not _fits(taken) or taken <= 0:
        bad("no time taken")
    images = header.get("images")
    if not isinstance(images, list):
        bad("no list of images")
    for image in images:
        if not isinstance(image, dict) or image.get("kind") not in KINDS:
            bad(f"not an image: {image!r}"[:200])
        mode = image.get("mode")
        if mode is not None and not (_fits(mode) and 0 <= mode <= 0o7777):
            bad(f"a mode that is not a mode: {mode!r}"[:200])
        try:
            rel = os.fsencode(image.get("path"))
        except (TypeError, UnicodeError):
            bad(f"a path that is not a path: {image.get('path')!r}"[:200])
        if not is_plain_rel(rel):
            bad(f"a path outside the workspace: {os.fsdecode(rel)!r}"[:200])


def _stored(writer: Any, item: dict[str, Any], body: bytes) -> Image:
    kind = item["kind"]
    if kind == FILE:
        return Image(FILE, writer.put(body, compress=len(body) >= RAW_BELOW), len(body),
                     item.get("mode"))
    if kind == SYMLINK:
        return Image(SYMLINK, writer.put(body), len(body))
    return Image(kind, mode=item.get("mode"))


def _set_aside(place: Place, name: str, exc: BaseException) -> None:
    """Keep an unreadable record out of the way, and say so where hook errors are read."""
    from .hook_log import record_error

    try:
        bad = inbox.set_aside(place.store.dir, name)
    except OSError:
        bad = name
    record_error(place.store.dir, "ctrlz", {"hook_event_name": "inbox", "cwd": place.root},
                 RuntimeError(f"inbox record {bad} set aside: {exc}"))
