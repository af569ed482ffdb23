"""Reading a git repository's refs and reachability, without writing to it.

:mod:`ctrlz.engine.restore.githistory` judges what a restore does to a repository's history; this
module is how it learns the facts: the refs (``HEAD``, loose refs, ``packed-refs``) of a
``.git`` directory on disk or in a snapshot's tree, read as files, and how many commits would
become unreachable, asked of the current repository with read-only git commands
(``GIT_OPTIONAL_LOCKS=0``, no user or system configuration). Nothing here writes to a
repository, and without git installed the count is None, never a guess.
"""

from __future__ import annotations

import os

from ...state.trees import DIR, FILE

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any


# -- reading refs ------------------------------------------------------------------------------

class Refs:
    """The refs of one repository: ``head`` (the symbolic ref HEAD names, or None when
    detached), ``head_oid`` (what HEAD resolves to; None when unborn) and every other ref by
    full name (``refs/heads/main``). ``present``: whether there is a repository at all."""

    __slots__ = ("present", "head", "head_oid", "refs")

    def __init__(self, present: bool, head: str | None = None, head_oid: str | None = None,
                 refs: dict[str, str] | None = None) -> None:
        self.present = present
        self.head = head
        self.head_oid = head_oid
        self.refs = refs if refs is not None else {}

    def tips(self) -> set[str]:
        """Every commit a ref keeps reachable (a detached HEAD's included)."""
        return set(self.refs.values()) | ({self.head_oid} if self.head_oid else set())


def _oid(text: bytes) -> str | None:
    """A full SHA-1 or SHA-256 name in hex, or None for anything else."""
    s = text.strip().decode("ascii", "replace").lower()
    return s if len(s) in (40, 64) and all(c in "0123456789abcdef" for c in s) else None


def parse_refs(files: dict[bytes, bytes] | None) -> Refs:
    """``files``: a ``.git`` directory's ``HEAD``, ``packed-refs`` and ``refs/...`` files by
    their path inside it (None: there is no ``.git``). Loose refs win over packed ones, as in
    git; symbolic refs other than HEAD (``refs/remotes/origin/HEAD``) name no commit of their
    own and are left out."""
    if files is None:
        return Refs(False)
    refs: dict[str, str] = {}
    for line in files.get(b"packed-refs", b"").splitlines():
        if line.startswith((b"#", b"^")):
            continue
        oid, _, name = line.partition(b" ")
        value = _oid(oid)
        if value and name.startswith(b"refs/"):
            refs[os.fsdecode(name.strip())] = value
    for path, data in files.items():
        if path.startswith(b"refs/"):
            value = _oid(data)
            if value:
                refs[os.fsdecode(path)] = value
    head_data = files.get(b"HEAD", b"").strip()
    head: str | None = None
    if head_data.startswith(b"ref:"):
        head = os.fsdecode(head_data[4:].strip())
        head_oid = refs.get(head)
    else:
        head_oid = _oid(head_data)
    return Refs(True, head, head_oid, refs)


def wanted(rel: bytes) -> bool:
    return rel in (b"HEAD", b"packed-refs") or rel.startswith(b"refs/")


def files_on_disk(gitdir: bytes) -> dict[bytes, bytes] | None:
    """The ref files of the ``.git`` directory at ``gitdir`` (None when it is not a directory:
    missing, a gitlink file, a symlink, which a restore never follows)."""
    try:
        if not os.path.isdir(gitdir) or os.path.islink(gitdir):
            return None
    except OSError:
        return None
    out: dict[bytes, bytes] = {}
    for rel in (b"HEAD", b"packed-refs"):
        data = _read(os.path.join(gitdir, rel))
        if data is not None:
            out[rel] = data
    base = os.path.join(gitdir, b"refs")
    for top, _dirs, names in os.walk(base):  # never follows a symlinked directory
        for name in names:
            full = os.path.join(top, name)
            data = _read(full)
            if data is not None and not os.path.islink(full):
                out[b"refs/" + os.path.relpath(full, base)] = data
    return out


def _read(path: bytes) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def files_in_tree(read_tree: Callable[[bytes], list[Any]], read_blob: Callable[[bytes], bytes],
                  oid: bytes | None) -> dict[bytes, bytes] | None:
    """The ref files of a ``.git`` tree of a snapshot (None: no such tree)."""
    if oid is None:
        return None
    out: dict[bytes, bytes] = {}
    stack: list[tuple[bytes, bytes]] = [(b"", oid)]
    while stack:
        prefix, tree = stack.pop()
        for e in read_tree(tree):
            rel = prefix + e.name
            if e.kind == DIR and (rel == b"refs" or rel.startswith(b"refs/")):
                stack.append((rel + b"/", e.oid))
            elif e.kind == FILE and wanted(rel):
                out[rel] = read_blob(e.oid)
    return out


def tree_at(read_tree: Callable[[bytes], list[Any]], top: bytes, vpath: bytes) -> Any | None:
    """The entry at ``vpath`` (``0/sub/.git``) of the snapshot whose top tree is ``top``."""
    oid, entry = top, None
    for name in vpath.split(b"/"):
        entry = next((e for e in read_tree(oid) if e.name == name), None)
        if entry is None or entry.kind != DIR:
            return None
        oid = entry.oid
    return entry


def loose_in_tree(read_tree: Callable[[bytes], list[Any]], read_blob: Callable[[bytes], bytes],
                  gitdir: bytes | None) -> Callable[[str], bytes | None]:
    """A reader of the loose objects (zlib-compressed, as stored) of the ``.git`` tree
    ``gitdir`` of a snapshot, by object id; None for an object it does not hold loose."""
    def loose(oid: str) -> bytes | None:
        d = tree_at(read_tree, gitdir, b"objects/" + oid[:2].encode()) if gitdir else None
        if d is None:
            return None
        f = next((x for x in read_tree(d.oid) if x.name == oid[2:].encode()), None)
        return read_blob(f.oid) if f is not None and f.kind == FILE else None

    return loose


# -- counting what becomes unreachable ---------------------------------------------------------

def count_unreachable(gitdir: bytes, lost: Iterable[str], kept: Iterable[str],
                      loose: Callable[[str], bytes | None] = lambda oid: None) -> int | None:
    """How many commits reachable from ``lost`` are reachable from none of ``kept`` once the
    restore is done, asked of the repository at ``gitdir`` with ``git`` (read-only). A kept
    tip this repository does not have (the commits an undo brings back) is followed through
    ``loose`` (its zlib-compressed loose object, as the restore writes it) until it meets
    commits the repository has. None when git is not installed or it cannot tell (a damaged
    repository, a kept commit found in neither place, a pack the restore writes)."""
    import shutil

    git = shutil.which("git")
    if git is None:
        return None
    lost, kept = sorted(lost), sorted(kept)
    have = _present(git, gitdir, kept)
    if have is None:
        return None
    missing = [k for k in kept if k not in have]
    if missing:
        walked = _walk_loose(missing, loose)
        if walked is None:
            return None
        seen, boundary = walked
        found = _present(git, gitdir, sorted(seen))
        if found is None or not boundary <= found:
            return None
        have |= found
    revs = "".join(f"{o}\n" for o in lost) + "".join(f"^{o}\n" for o in sorted(have))
    out = _git(git, gitdir, ["rev-list", "--count", "--stdin"], revs)
    try:
        return int(out) if out is not None else None
    except ValueError:
        return None


def _git(git: str, gitdir: bytes, args: list[str], stdin: str) -> bytes | None:
    """One read-only git command on the repository at ``gitdir``; its output, or None."""
    import subprocess

    # no HOME and no system config: the user's aliases and hooks are not ours to run; only
    # what the command line sets (safe.directory: a repository owned by someone else)
    env = {"GIT_OPTIONAL_LOCKS": "0", "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C",
           "GIT_DIR": os.fsdecode(gitdir)}
    try:
        done = subprocess.run([git, "-c", "safe.directory=*", *args], input=stdin.encode(),
                              env=env, capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def _present(git: str, gitdir: bytes, oids: list[str]) -> set[str] | None:
    """Which of ``oids`` the repository holds (``git cat-file --batch-check``)."""
    if not oids:
        return set()
    out = _git(git, gitdir, ["cat-file", "--batch-check"], "".join(f"{o}\n" for o in oids))
    if out is None:
        return None
    return {line.split()[0].decode() for line in out.splitlines()
            if line and not line.endswith(b" missing")}


#: how many commits :func:`_walk_loose` reads before it gives up (says "cannot tell")
WALK_LIMIT = 20_000


def _walk_loose(tips: list[str], loose: Callable[[str], bytes | None],
                ) -> tuple[set[str], set[str]] | None:
    """Follow ``tips`` (commits or annotated tags) through loose objects back to the first
    commits ``loose`` does not have (the boundary, which the current repository must hold
    for the count to be exact). Returns (every id met, the boundary); None when an object
    cannot be read or parsed."""
    import zlib

    boundary: set[str] = set()
    seen: set[str] = set()
    stack = list(tips)
    while stack:
        oid = stack.pop()
        if oid in seen:
            continue
        seen.add(oid)
        if len(seen) > WALK_LIMIT:
            return None
        data = loose(oid)
        if data is None:
            boundary.add(oid)
            continue
        try:
            raw = zlib.decompress(data)
        except zlib.error:
            return None
        head, _, body = raw.partition(b"\0")
        kind = head.split(b" ")[0]
        header = body.split(b"\n\n", 1)[0].split(b"\n")
        key = {b"commit": b"parent ", b"tag": b"object "}.get(kind)
        if key is None:
            return None
        for line in header:
            if line.startswith(key):
                parent = _oid(line[len(key):])
                if parent is None:
                    return None
                stack.append(parent)
    return seen, boundary
