"""The restore journal: an intent record that makes an interrupted restore recoverable.

Before a restore writes its first byte, it makes one small record durable in the store
(``<store>/restore-journal``): what kind of restore it is, the safety snapshot that holds the
state before it, the destination roots, every directory in which it may create a temp file, and
the token those temp files are named with (``.ctrlz-tmp-<token>-<n>``). The record is removed
once the restore has verified its result and recorded its undo entry.

If the process dies in between (``kill -9``, a power cut, the OOM killer), the record is still
there, and the store lock (an ``flock``, released by the kernel when its holder dies) is free.
The next ctrlz process that opens the store (any command, the daemon, the MCP server) then
*finishes the interrupted restore's bookkeeping*: it removes the temp files, keeps any inode the
restore had taken aside whose bytes the store does not hold, leaves the undo entry that the
restore would have left, and removes the record. The workspace is then a mix of the two states,
every path of which the store holds: ``ctrlz undo`` puts back the state before the restore, and
running the restore again completes it.

The same clean-up runs in-process when a restore fails with an error, so a failed restore and a
crashed one end alike: no temp files, an undo path, a clear message.

``restore --to`` (an extract into a new or empty directory outside the workspace) writes no
record into the store: it must work on the day the store's disk is full (issue 41). There is
nothing for a record in the store to protect: the workspace is untouched, there is no undo
entry to leave, and every temp file is inside the destination. Its record lives in the
destination instead (:data:`INCOMPLETE`, written before the first file and removed once the
result is verified, or once a failed extract has removed its temp files and reported the
error). A kill leaves it, and it says what the kill left: an incomplete extract, with the
token its temp files are named with, which a retry into the same directory is refused over
until the user removes it. A directory that lost its last files without saying so would pass
for a complete restore.
"""

from __future__ import annotations

import os
from collections import namedtuple
from collections.abc import Iterable
from types import MappingProxyType

from ...errors import CtrlzError, RestoreError
from ...state.fsio.atomic import TEMP_PREFIX, atomic_write_bytes, fsync_dir, write_new
from ...types import quote_path

TYPE_CHECKING = False
if TYPE_CHECKING:  # opening a workspace checks for a journal; only a crash needs the rest
    from typing import Any

    from ...state.store.objects import ObjectStore
    from ...state.store.repository import Repository

JOURNAL_NAME = "restore-journal"
#: the record of an extract into a new directory, in that directory (see the module docstring)
INCOMPLETE = ".ctrlz-restore-incomplete"
VERSION = 1


_FIELDS = "token kind target safety roots dirs undo created_ns"


class Intent(namedtuple("Intent", _FIELDS, defaults=(MappingProxyType({}), 0))):
    """One restore's intent record. A named tuple, not a dataclass: every process that opens
    a workspace loads this module to look for a journal (see :mod:`ctrlz.types`)."""

    __slots__ = ()
    token: str
    kind: str  # rollback / revert / rewind / undo / redo / toolcall / restore-to / ...
    target: str  # the snapshot being restored
    safety: str | None  # the safety snapshot holding the state before the restore
    roots: list[bytes]  # destination roots, in the order of the virtual roots "0", "1", ...
    dirs: list[bytes]  # virtual directories in which temp files may exist
    #: how to leave an undo path: {"record": {...operation...}}, {"undo_of": seq},
    #: {"redo_of": seq}, or {} (restore --to: the destination is new); default {}
    undo: dict[str, Any]
    created_ns: int

    def to_bytes(self) -> bytes:
        data = self._asdict()
        data["undo"] = dict(self.undo or {})
        data["roots"] = [r.hex() for r in self.roots]
        data["dirs"] = [d.hex() for d in self.dirs]
        data["version"] = VERSION
        from ... import jsontext  # a restore's work; opening a workspace only stats the journal

        return jsontext.dumps(data, sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, raw: bytes) -> Intent:
        from ... import jsontext

        data = jsontext.loads(raw)
        data.pop("version", None)
        data["roots"] = [bytes.fromhex(r) for r in data["roots"]]
        data["dirs"] = [bytes.fromhex(d) for d in data["dirs"]]
        data["undo"] = data.get("undo") or {}
        return cls(**data)

    @property
    def label(self) -> str:
        return f"{self.kind} to {self.target}"


def path(store: str | os.PathLike[str]) -> str:
    return os.path.join(os.fspath(store), JOURNAL_NAME)


def write(store: str | os.PathLike[str], intent: Intent) -> None:
    """Durable before the restore's first write (temp file, fsync, rename, fsync the dir)."""
    atomic_write_bytes(path(store), intent.to_bytes(), durable=True)


def write_incomplete(dest: str | os.PathLike[str] | bytes, intent: Intent) -> None:
    """An extract's record, in its destination, durable before its first file. An error
    writing it is the destination's (a full disk there), so it is raised as an ``OSError``,
    as the extract's own writes are."""
    name = os.path.join(os.fsencode(dest), os.fsencode(INCOMPLETE))
    write_new(name, intent.to_bytes())
    fsync_dir(os.fsdecode(dest))


def clear_incomplete(dest: str | os.PathLike[str] | bytes, strict: bool = True) -> None:
    """The extract is complete and verified, or failed and cleaned up after itself (its
    error says what it left): its record goes, durably. ``strict`` false: as far as it can,
    for a failure that is being reported already."""
    try:
        os.unlink(os.path.join(os.fsencode(dest), os.fsencode(INCOMPLETE)))
        fsync_dir(os.fsdecode(dest))
    except OSError:
        if strict:
            raise


def pending(store: str | os.PathLike[str]) -> bool:
    return os.path.exists(path(store))


def read(store: str | os.PathLike[str]) -> Intent | None:
    try:
        with open(path(store), "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None
    try:
        return Intent.from_bytes(raw)
    except (ValueError, KeyError, TypeError):
        return None  # torn by hand or by a foreign tool; nothing to act on


def clear(store: str | os.PathLike[str]) -> None:
    try:
        os.unlink(path(store))
    except FileNotFoundError:
        return
    fsync_dir(os.fspath(store))


def temp_prefix(token: str) -> str:
    """The names of a restore's temp files (``<prefix><n>``, or ``<prefix>a<n>`` for an inode
    taken aside) start with this, so that :func:`sweep` finds exactly that restore's."""
    return f"{TEMP_PREFIX}{token}-"


def sweep(intent: Intent, objects: ObjectStore) -> list[str]:
    """Remove the temp files of an interrupted restore; returns notes for the user.

    A temp file holds bytes copied out of the store, so it can always go. An inode the restore
    had taken aside (``…-a<n>``, the file it was replacing or deleting) goes only when the store
    holds its bytes; otherwise it is kept under a visible name, and the note says where."""
    prefix = os.fsencode(temp_prefix(intent.token))
    notes: list[str] = []
    from ..dirs import DirHandles

    with DirHandles(intent.roots, limit=16) as dirs:
        for vdir in _existing(intent.dirs):
            try:
                fd = dirs.get(vdir)
                names = [n for n in os.listdir(fd) if os.fsencode(n).startswith(prefix)]
            except OSError:
                continue  # the directory is gone, or is no directory now: nothing of ours
            for raw_name in names:
                name = os.fsencode(raw_name)
                try:
                    fd = dirs.get(vdir)
                    if name[len(prefix):].startswith(b"a") and not _stored(objects, fd, name):
                        kept = b"ctrlz-rescued-" + name[len(prefix):]
                        os.rename(name, kept, src_dir_fd=fd, dst_dir_fd=fd)
                        notes.append(f"kept {quote_path(vdir + b'/' + kept)}: a file the "
                                     "interrupted restore had taken aside, whose bytes no "
                                     "snapshot holds")
                    else:
                        os.unlink(name, dir_fd=fd)
                except FileNotFoundError:
                    continue
    return notes


def _existing(dirs: Iterable[bytes]) -> list[bytes]:
    return sorted(set(dirs))


def _stored(objects: ObjectStore, dir_fd: int, name: bytes) -> bool:
    """Does the store hold exactly these bytes (a file's content, or a link's target)?"""
    import stat as st

    s = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if st.S_ISLNK(s.st_mode):
        return objects.has(objects.digest(os.fsencode(os.readlink(name, dir_fd=dir_fd))))
    if not st.S_ISREG(s.st_mode):
        return True  # a directory or special file is never taken aside by a restore
    from ...state.store.packs import LOOSE_MIN

    if s.st_size >= LOOSE_MIN:  # captured as a clone? then it shares that clone's blocks
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        try:
            if objects.known_clone(fd, s.st_size) is not None:
                return True
        finally:
            os.close(fd)
    from ..dirs import hash_at

    return objects.has(hash_at(objects, dir_fd, name))


# -- finishing a restore's bookkeeping (after a crash, or after a failure in-process) ---------

def recover(repo: Repository) -> list[str]:
    """Finish what an interrupted restore left: temp files, undo entry, journal. Returns notes
    for the user (empty when there was nothing to do). Cheap when there is no journal (one
    stat); skipped while another live process holds the store lock."""
    if not pending(repo.path):
        return []
    if not repo.lock.try_acquire():
        return []  # its owner is alive and will finish it
    try:
        intent = read(repo.path)
        if intent is None:
            clear(repo.path)
            return []
        try:
            notes = abandon(repo, intent, "interrupted")
        except CtrlzError:
            raise
        except OSError as exc:
            raise RestoreError(f"cannot clean up the interrupted {intent.label}: "
                               f"{exc.strerror or exc}; fix that and run any ctrlz command "
                               "again") from exc
        return [f"cleaned up an interrupted {intent.label}; {undo_hint(intent)}", *notes]
    finally:
        repo.lock.release()


def abandon(repo: Repository, intent: Intent, status: str) -> list[str]:
    """A restore that stopped (a failure here, a crash found later): its temp files go, its
    undo entry is left with ``status``, its record goes. Returns :func:`sweep`'s notes."""
    notes = sweep(intent, repo.objects)
    leave_undo_path(repo, intent, status)
    clear(repo.path)
    return notes


def leave_undo_path(repo: Repository, intent: Intent, status: str) -> None:
    """The operation log's entry of the restore ``intent`` describes (its ``undo``), so that
    ``ctrlz undo`` (or running it again) has a way back whatever became of it."""
    from ...state.db.oplog import OpLog

    undo = intent.undo
    log = OpLog(repo.catalog)
    if "record" in undo:
        r = undo["record"]
        log.record(r["kind"], intent.target, [bytes.fromhex(p) for p in r.get("paths", ())],
                   intent.safety, explicit=[bytes.fromhex(p) for p in r.get("explicit", ())],
                   status=status, session_id=r.get("session_id"))
    elif "undo_of" in undo:
        if status == "done":
            log.mark_undone(int(undo["undo_of"]), intent.safety)
        else:
            # the first attempt's capture is the state the operation produced: a later,
            # completed undo must keep it for redo, not its own capture of a half-undone tree
            log.note_undo_attempt(int(undo["undo_of"]), intent.safety)
    elif "redo_of" in undo:
        if status == "done":
            log.mark_redone(int(undo["redo_of"]), intent.safety)
        else:  # as for an undo: the first attempt's capture is the state before the redo
            log.note_redo_attempt(int(undo["redo_of"]), intent.safety)
    # an undo or redo that stopped half-way stays where it was: running it again completes it


def undo_hint(intent: Intent) -> str:
    """How the user gets back from a restore that stopped: the end of its error message."""
    if "record" in intent.undo and intent.safety:
        return (f"the state before it is in safety snapshot {intent.safety}: `ctrlz undo` "
                "puts it back")
    if ("undo_of" in intent.undo or "redo_of" in intent.undo) and intent.safety:
        verb = "undo" if "undo_of" in intent.undo else "redo"
        return (f"run `ctrlz {verb}` again to finish it (safety snapshot {intent.safety} "
                "holds the state before it)")
    return "the files written so far were left in place; remove them and try again"
