"""Listing one directory from the disk: lstat only, the exclusion rules, the stat cache.

The walk never follows a symlink: links are captured as links (their target is the blob), and
a directory is entered through ``os.scandir`` on a path whose every component was seen as a
real directory. FIFOs, sockets and devices are skipped and reported, as are files over the
new-file size limit. An entry whose stat matches a trusted stat-cache entry keeps its object
id; any other file goes to the reader. The per-entry loop is the scan's hot path: keep its
work to tuple comparisons and local names.
"""

from __future__ import annotations

import os
from itertools import count

from ...errors import LimitExceeded, exhausted
from ...types import Skipped
from ..ignore.exclude import _TEMP, GITIGNORE
from ..trees import DIR, FILE, SYMLINK
from .incremental import cached_entries, reuse_unlisted
from .model import IFDIR, IFLNK, IFMT, IFREG, NAME, OID, OVER_MAX_BYTES, DirNode, special_kind

#: the file systems whose folders are trusted to change their mtime and ctime whenever a name
#: in them is added, removed or renamed (POSIX asks it of every one; network and FUSE file
#: systems, whose folder times a server or a cache may hold back, are not among them): on
#: these a folder whose stamp is unchanged is not listed again (:func:`list_known`)
STAMPED_FS = frozenset((b"ext2", b"ext3", b"ext4", b"xfs", b"btrfs", b"tmpfs", b"f2fs", b"zfs",
                        b"bcachefs", b"jfs", b"reiserfs", b"overlay"))
#: files at least this big that the scan must read wait until the walk has the workspace's
#: total (see :func:`release_deferred`); smaller ones are read as they are found
DEFER_MIN = 1 << 20
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..db.statcache import CacheEntry
    from .context import ScanContext

    #: what a name must have for an ignore rule to exclude it (:func:`_screen`)
    Screen = tuple[frozenset[bytes], tuple[bytes, ...], tuple[bytes, ...]]


def list_disk(sc: ScanContext, node: DirNode, stack: list[DirNode]) -> None:
    """List ``node`` with ``os.scandir``: fill its entries, queue the reads it needs and push
    the subdirectories to enter onto ``stack``. A folder whose stamp is the cache's is
    listed from its known names instead (:func:`list_known`)."""
    stamp = node.stamp
    if stamp is not None and stamp[1] == sc.stamp_dev and node.cached is not None \
            and sc.stamps.get(node.rel) == stamp and list_known(sc, node, stack):
        return
    try:
        with os.scandir(node.path) as it:
            listing = list(it)
    except OSError as exc:
        if (err := exhausted(exc, f"listing {os.fsdecode(node.path)}")) is not None:
            raise err from exc
        node.unreadable = True
        sc.skipped.append(Skipped(node.rel, f"directory unreadable: {exc.strerror}"))
        return
    if _reads_ignore_file(sc, node):
        for de in listing:
            if de.name == GITIGNORE:
                _enter_ignore_file(sc, node)
                break
    node.listed = len(listing)
    take_listing(sc, node, stack, listing)


def list_known(sc: ScanContext, node: DirNode, stack: list[DirNode]) -> bool:
    """List a folder whose stamp the cache keeps (git's untracked cache): while its own stat
    is the stamp, no name in it was added, removed or renamed since its cached listing, which
    was its whole listing. So the folder is not read: each cached name is stat'ed (one
    ``lstat`` relative to the folder, cheaper than a listing's) and one whose stat matches its
    trusted cache entry is taken as such; any other name goes to :func:`take_listing`, as a
    listed entry would. The folder is opened and its stat taken again first: ``False``
    (nothing done, ``node.stamp`` now that stat) when it is not the stamp any more, or when
    it cannot be opened; the caller then lists it from the disk."""
    assert node.cached is not None
    try:
        fd = os.open(node.path, _DIR_FLAGS)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        now = (st.st_mode, st.st_dev, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        if now != node.stamp:
            node.stamp = now  # taken before the listing that follows: it may be kept
            return False
        listing = node.cached[1]
        names, keys, flags = listing.walk_parts()
        if _reads_ignore_file(sc, node) and GITIGNORE in names:
            _enter_ignore_file(sc, node)
        node.listed = len(names)
        sc.stats.stamped += 1
        check, quick = _screen(sc, node)
        lits, suffixes, prefixes = quick if quick is not None else ((), (), ())
        lstat = os.lstat
        same = node.same
        rest = []
        full = sc._needed is None  # not a dirty scan
        # the rows are unpacked as they are compared, and only the indices of those found
        # unchanged are kept (:attr:`DirNode.same`)
        for i, name, key, flag in zip(count(), names, keys, flags, strict=False):
            if check and (quick is None or name in lits or name.endswith(suffixes)
                          or name.startswith(prefixes)):
                rest.append(_Named(node.path, name))  # a rule may exclude it: the full way
                continue
            try:
                s = lstat(name, dir_fd=fd)
            except OSError:
                rest.append(_Named(node.path, name))  # it raises again there, and is told
                continue
            mode = s.st_mode
            if key == (mode, s.st_size, s.st_mtime_ns, s.st_ctime_ns, s.st_ino) \
                    and flag and s.st_nlink == 1:
                same.append(i)
            elif mode == key[0] and mode & IFMT == IFDIR:
                # the row's tree id matters only to a dirty scan (:func:`_take_dir`)
                _take_dir(sc, node, stack, name, node.path + b"/" + name, s,
                          (key, b"", True) if full else listing.row(i))
            else:
                rest.append(_Named(node.path, name, s))
    finally:
        os.close(fd)
    if rest:
        take_listing(sc, node, stack, rest, (check, quick))
    else:
        _tally(sc, node, 0, 0, 0, 0, 0)
    return True


def list_names(sc: ScanContext, node: DirNode, stack: list[DirNode],
               names: frozenset[bytes]) -> None:
    """List a directory in which the watcher saw only ``names`` change: every other entry is
    the cached one (as in a directory it saw no change in), and only ``names`` are stat'ed,
    each exactly as :func:`list_disk` takes an entry. The caller rules out a changed
    ``.gitignore`` (the watcher asks for a full scan then anyway)."""
    assert node.cached is not None
    if _reads_ignore_file(sc, node) and (GITIGNORE in node.cached[1]
                                         or os.path.lexists(node.path + b"/" + GITIGNORE)):
        _enter_ignore_file(sc, node)
    cached_entries(sc, node, stack,
                   [item for item in node.cached[1].items() if item[0] not in names])
    sc.skipped += [k for k in sc.previous_skipped
                   if k.path.rpartition(b"/")[0] == node.rel
                   and k.path.rpartition(b"/")[2] not in names]
    take_listing(sc, node, stack, [_Named(node.path, name) for name in sorted(names)])


class _Named:
    """One name of a directory, answering what :func:`take_listing` asks of an
    ``os.DirEntry`` (one ``lstat``, on first use; a missing name raises as a vanished
    entry's ``stat`` does)."""

    __slots__ = ("name", "path", "_stat")

    def __init__(self, parent: bytes, name: bytes, stat: os.stat_result | None = None) -> None:
        self.name = name
        self.path = parent + b"/" + name
        self._stat = stat

    def stat(self, *, follow_symlinks: bool = False) -> os.stat_result:
        if self._stat is None:
            self._stat = os.lstat(self.path)
        return self._stat

    def is_dir(self, *, follow_symlinks: bool = False) -> bool:
        return self.stat().st_mode & IFMT == IFDIR


def _reads_ignore_file(sc: ScanContext, node: DirNode) -> bool:
    return bool(node.rel) and sc.matcher.rules.use_gitignore and not node.rules.in_git


def _enter_ignore_file(sc: ScanContext, node: DirNode) -> None:
    parent_rules = node.slot[0].rules if node.slot else node.rules
    node.rules = sc.matcher.enter(parent_rules, node.rel.rpartition(b"/")[2], node.rel,
                                  has_ignore=True)


def _screen(sc: ScanContext, node: DirNode) -> tuple[bool, Screen | None]:
    """Whether a rule may exclude a name in ``node`` at all, and if so, when only ignore
    files are in play (the usual case), the literals, suffixes and prefixes that a name must
    have for a rule to exclude it: the per-entry call (and its ``is_dir``) happens only for
    such a name. ``matcher.excluded`` does the same test first, so the answers are the same;
    this only saves a call per entry. (ctrlz's own temp files are always excluded.)"""
    matcher, rules = sc.matcher, node.rules
    check = matcher.may_exclude(rules)
    if check and matcher._ignores_only and not rules.forced:
        dc = rules.check or matcher._check(rules)
        if not dc.always:
            return check, (dc.lits, dc.suffixes, (_TEMP, *dc.prefixes))
    return check, None


def take_listing(sc: ScanContext, node: DirNode, stack: list[DirNode],
                 listing: Sequence[os.DirEntry[bytes] | _Named],
                 screen: tuple[bool, Screen | None] | None = None) -> None:
    """Take the entries of ``listing`` into ``node`` (its rules already entered): the
    scan's hot path, one pass over a directory. ``screen``: what :func:`_screen` says, when
    the caller asked it already (:func:`list_known`)."""
    matcher = sc.matcher
    limits = sc.limits
    rules = node.rules
    cached_map = node.cached[1].indexed() if node.cached is not None else {}
    check, quick = screen if screen is not None else _screen(sc, node)
    prefix = node.rel + b"/" if node.rel else b""
    entries = node.entries
    same = node.same
    files = links = nbytes = 0
    reads = read_bytes = 0
    dirty = node.dirty
    for de in listing:
        name: bytes = de.name  # type: ignore[assignment]
        # ask the matcher only about a name some rule may exclude (``excluded`` drops
        # ctrlz's own temp files first)
        if check if quick is None else (name in quick[0] or name.endswith(quick[1])
                                        or name.startswith(quick[2])):
            try:
                is_dir = de.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if matcher.excluded(rules, name, prefix + name, is_dir):
                continue
        elif name.startswith(_TEMP):
            continue
        try:
            s = de.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue  # vanished since the listing
        except OSError as exc:
            if (err := exhausted(exc, f"reading {os.fsdecode(de.path)}")) is not None:
                raise err from exc
            sc.skipped.append(Skipped(prefix + name, f"cannot stat: {exc.strerror}"))
            continue
        mode = s.st_mode
        key = (mode, s.st_size, s.st_mtime_ns, s.st_ctime_ns, s.st_ino)
        cached = cached_map.get(name)
        # The usual case first: a file or link whose stat key a trusted cache entry has
        # (a directory's cached key is zero but for its mode, so it never matches a
        # stat's). It stays a cache entry in ``same``: build.finish makes it an entry only
        # if its directory is rebuilt. A file with another link is always noted below.
        if cached is not None and cached[0] == key and cached[2] and s.st_nlink == 1:
            same.append(cached[3])  # its row; counted by _tally
            continue
        fmt = mode & IFMT
        if fmt == IFDIR:
            if _take_dir(sc, node, stack, name, de.path, s, cached):  # type: ignore[arg-type]
                dirty = True
            continue
        if fmt == IFREG:
            kind = FILE
            if s.st_nlink > 1:  # writable through a name no watcher of ours may see
                sc.linked.append(prefix + name)
        elif fmt == IFLNK:
            kind = SYMLINK
        else:
            sc.skipped.append(Skipped(prefix + name, special_kind(mode)))
            continue
        size, mtime = key[1], key[2]
        entry = [name, kind, mode & 0o7777, size, mtime, key, None]
        if cached is not None and cached[2] and cached[0] == key:
            entry[OID] = cached[1]
        else:
            dirty = True
            if kind == FILE and size > limits.max_file_size:
                sc.skipped.append(Skipped(
                    prefix + name, f"larger than max_file_size ({size:,} > "
                    f"{limits.max_file_size:,} bytes)"))
                continue
            if kind == SYMLINK:
                try:
                    entry[OID] = sc.sink.put(os.readlink(de.path))
                except OSError as exc:
                    if (err := exhausted(exc, f"reading {os.fsdecode(de.path)}")) is not None:
                        raise err from exc
                    sc.skipped.append(Skipped(prefix + name,
                                              f"cannot read link: {exc.strerror}"))
                    continue
            else:
                reads += 1
                read_bytes += size
                if size >= DEFER_MIN and not limits.refuse_over_max_bytes:
                    sc.deferred.append((node, entry, de.path, size))  # type: ignore[arg-type]
                else:
                    sc._reader.queue(node, entry, de.path, size)  # type: ignore[arg-type]
        entries.append(entry)
        if kind == FILE:
            files += 1
            nbytes += size
        else:
            links += 1
    node.dirty = dirty
    _tally(sc, node, files, links, nbytes, reads, read_bytes)


def _take_dir(sc: ScanContext, node: DirNode, stack: list[DirNode], name: bytes, path: bytes,
              s: os.stat_result, cached: CacheEntry | None) -> bool:
    """Take a subdirectory of ``node`` found with the stat ``s``: push it onto ``stack`` to
    be listed, or in a dirty scan reuse it whole when the watcher saw nothing change below
    it. True when this makes ``node`` differ from its cache entry."""
    mode = s.st_mode
    rel = node.rel + b"/" + name if node.rel else name
    entry = [name, DIR, mode & 0o7777, 0, 0, None, None]
    node.entries.append(entry)
    dirty = False
    if cached is None or cached[0][0] != mode:
        dirty = True
        # its permissions changed: whether it can be read at all may have too, so it is
        # listed from the disk, as a full scan would (never from the cache)
        sc.relist.add(rel)
    elif sc._needed is not None and rel not in sc._needed:
        sub = sc.cache.get(rel)
        if sub is not None and sub[0] == cached[1]:
            reuse_unlisted(sc, rel, entry, sub)
            return False
    child_rules = sc.matcher.enter(node.rules, name, rel, has_ignore=False)
    stamp = (mode, s.st_dev, s.st_mtime_ns, s.st_ctime_ns, s.st_ino)
    if (was := sc.stamps.get(rel)) == stamp:
        stamp = was  # one tuple in the old cache and the new (a cache's memory is per folder)
    stack.append(DirNode(rel, path, child_rules, sc.cache.get(rel), (node, entry), mode & 0o7777,
                         stamp))
    sc.stats.dirs += 1
    return dirty


def _tally(sc: ScanContext, node: DirNode, files: int, links: int, nbytes: int, reads: int,
           read_bytes: int) -> None:
    """Add what a listing of ``node`` found to the scan's counts, and refuse past the limits.
    ``files``, ``links`` and ``nbytes``: what it found apart from ``node.same``, counted here
    (a loop of its own keeps the listings' per-entry loops short)."""
    if node.same:
        assert node.cached is not None
        listing = node.cached[1]
        f, k, b = listing.counts()
        if len(node.same) == f + k:  # every file and link unchanged: the usual case
            files, links, nbytes = files + f, links + k, nbytes + b
        else:
            keys = listing.keys()
            for i in node.same:
                key = keys[i]
                if key[0] & IFMT == IFREG:
                    files += 1
                    nbytes += key[1]
                else:
                    links += 1
    limits = sc.limits
    m = sc._reader.meter
    if m is not None:  # a progress bar: what was found, and what the stat cache settled
        m.files_total += files
        m.bytes_total += nbytes
        m.files += files - reads
        m.bytes += nbytes - read_bytes
    stats = sc.stats
    stats.files += files
    stats.symlinks += links
    stats.bytes += nbytes
    sc.entry_budget[0] += files + links  # folders are not counted: see Limits
    if sc.entry_budget[0] > limits.max_entries:
        raise LimitExceeded(
            f"the workspace has more than max_entries={limits.max_entries:,} files; "
            "exclude large generated folders (exclude_patterns in .ctrlz.toml) or raise "
            "the limit (max_entries in .ctrlz.toml, or CTRLZ_MAX_ENTRIES)")
    if stats.bytes > limits.max_bytes and limits.refuse_over_max_bytes:
        raise LimitExceeded(
            f"the workspace holds more than max_bytes={limits.max_bytes:,} bytes; "
            "exclude large folders (exclude_patterns, exclude_globs) or raise max_bytes")


def release_deferred(sc: ScanContext) -> None:
    """Read the large files the walk held back, once the walk knows the total: over
    ``max_bytes``, the largest of them are left out (and reported) until the rest fits, so
    a workspace that outgrew its cap is still snapshotted and the store does not swallow
    the files that made it outgrow it. Only files the scan had to read are held back: what
    the stat cache vouches for is stored already and costs nothing."""
    deferred, sc.deferred = sc.deferred, []
    stats, limit = sc.stats, sc.limits.max_bytes
    if stats.bytes > limit:
        total = stats.bytes
        deferred.sort(key=lambda d: d[3], reverse=True)
        while deferred and stats.bytes > limit:
            node, entry, _path, size = deferred.pop(0)
            node.entries.remove(entry)
            stats.files -= 1
            stats.bytes -= size
            if sc._reader.meter is not None:
                sc._reader.meter.files_total -= 1
                sc._reader.meter.bytes_total -= size
            rel = node.rel + b"/" + entry[NAME] if node.rel else entry[NAME]
            sc.skipped.append(Skipped(rel, (
                f"new or changed file of {size:,} bytes, left out: the workspace holds "
                f"{total:,} bytes{OVER_MAX_BYTES}{limit:,} (largest first); raise max_bytes "
                "or exclude it")))
    for node, entry, path, size in deferred:
        sc._reader.queue(node, entry, path, size)
