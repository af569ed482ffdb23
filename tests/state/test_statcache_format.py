"""The stat cache's packed format (:class:`~ctrlz.state.db.statcache.Listing`, VERSION 6).

A listing must answer exactly what the ``dict[bytes, CacheEntry]`` it replaces answered, the
file must round-trip, a version-5 file (those dicts) must load packed, and a file the loader
cannot use (corrupt, truncated, another version, another hash) must load as an empty cache: a
rescan, never a wrong answer.
"""

from __future__ import annotations

import marshal
import os
import stat
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as hs

from ctrlz import Workspace
from ctrlz.state.db import statcache
from ctrlz.state.db.statcache import CacheEntry, Listing, StatCache
from tests.conftest import make_tree

_names = hs.binary(min_size=1, max_size=12).filter(lambda b: b"\0" not in b and b"/" not in b)
_int64 = hs.integers(min_value=-(2**63), max_value=2**63 - 1)
_uint64 = hs.integers(min_value=0, max_value=2**64 - 1)
_modes = hs.sampled_from([stat.S_IFREG | 0o644, stat.S_IFREG | 0o755, stat.S_IFLNK | 0o777,
                          stat.S_IFDIR | 0o755])
_size = hs.integers(min_value=0, max_value=2**63 - 1)  # an off_t
_entries = hs.tuples(hs.tuples(_modes, _size, _int64, _int64, _uint64),
                     hs.binary(min_size=32, max_size=32), hs.booleans())


@settings(max_examples=200, deadline=None)
@given(hs.dictionaries(_names, _entries, max_size=20), _names)
def test_a_listing_answers_as_the_dict_it_packs(rows: dict[bytes, CacheEntry],
                                                 probe: bytes) -> None:
    listing = Listing.pack(rows.items())
    assert listing.decode() == rows
    assert list(listing) == sorted(rows)
    assert len(listing) == len(rows)
    assert listing.items() == sorted(rows.items())
    for name, entry in rows.items():
        assert name in listing
        assert listing.get(name) == entry == listing[name]
        assert listing.oid(name) == entry[1]
    assert (probe in listing) == (probe in rows)
    assert listing.get(probe) == rows.get(probe)
    names, keys, flags = listing.walk_parts()
    assert list(zip(names, keys, flags, strict=True)) == [
        (n, rows[n][0], int(rows[n][2])) for n in sorted(rows)]
    files = [e[0][1] for e in rows.values() if stat.S_ISREG(e[0][0])]
    links = sum(1 for e in rows.values() if stat.S_ISLNK(e[0][0]))
    if sum(files) < 1 << 64:
        assert listing.counts() == (len(files), links, sum(files))
    else:
        assert listing.counts()[0] == 0xFFFF_FFFF
    assert {n: e[3] for n, e in listing.indexed().items()} == {
        n: i for i, n in enumerate(sorted(rows))}


def test_a_name_is_found_whole_never_inside_another() -> None:
    """Names sit between NULs, so a name that is part of another is not found in it."""
    entry = ((stat.S_IFREG | 0o644, 1, 2, 3, 4), b"o" * 32, True)
    listing = Listing.pack([(b"abc", entry), (b"b", ((stat.S_IFREG | 0o644, 9, 9, 9, 9),
                                                     b"p" * 32, False))])
    assert b"bc" not in listing and b"a" not in listing and b"" not in listing
    assert listing.get(b"b") == ((stat.S_IFREG | 0o644, 9, 9, 9, 9), b"p" * 32, False)
    assert Listing().decode() == {} and len(Listing()) == 0 and Listing().walk_parts()[0] == []


def _cache() -> StatCache:
    entry = ((stat.S_IFREG | 0o644, 5, 10**18, 10**18 + 1, 77), b"x" * 32, True)
    root = {b"": (b"t" * 32, Listing.pack([(b"f", entry)]), (1, 0, 0, 5))}
    return StatCache("snap_x", 123, "blake3", [root], [[b"f"]],
                     [{b"d": (stat.S_IFDIR | 0o755, 1, 2, 3, 4)}])


def test_the_file_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "statcache"
    statcache.save(path, _cache())
    back = statcache.load(path, "blake3")
    want = _cache()
    assert (back.snapshot_id, back.scan_ns, back.algorithm, back.linked, back.stamps) == \
        (want.snapshot_id, want.scan_ns, want.algorithm, want.linked, want.stamps)
    assert back.roots == want.roots


def test_an_unusable_file_is_an_empty_cache(tmp_path: Path) -> None:
    """Corrupt, truncated, of version 4 or of another hash: each loads as no cache, so the
    next snapshot lists and stats everything once."""
    path = tmp_path / "statcache"
    statcache.save(path, _cache())
    good = path.read_bytes()
    old = marshal.dumps((4, "snap_x", 123, "blake3",
                         [{b"": (b"t" * 32, {b"f": ((0o100644, 5, 1, 1, 7), b"x" * 32, True)},
                                 (1, 0, 0, 5))}], [[]], [{}]))
    for data in (good[:len(good) // 2], b"garbage", b"", old):
        path.write_bytes(data)
        empty = statcache.load(path, "blake3")
        assert empty.snapshot_id is None and empty.roots == []
    path.write_bytes(good)
    assert statcache.load(path, "sha256").snapshot_id is None


def test_a_version_5_file_loads_packed_and_spares_the_upgrade_a_rehash(ws_dir: Path) -> None:
    """The upgrade: the cache a version-5 ctrlz wrote (each folder's rows in a plain dict)
    loads as the same rows packed, so the first snapshot after upgrading trusts what it
    trusted before and reads no file again; a damaged one is still an empty cache."""
    make_tree(ws_dir, {"a.txt": "a", "d": {"b.txt": "b", "e": {"c.txt": "c"}}})
    ws = Workspace.init(ws_dir)
    ws.snapshot()
    path = ws.repo.statcache_path
    time.sleep(0.1)  # past the racy window, so the files are trusted, not re-hashed
    ws.snapshot()
    now = statcache.load(path, ws.repo.algorithm)
    assert now.roots and any(len(listing) for root in now.roots
                             for _, listing, _ in root.values())
    path.write_bytes(marshal.dumps((5, now.snapshot_id, now.scan_ns, now.algorithm,
                                    [{rel: (oid, listing.decode(), totals)
                                      for rel, (oid, listing, totals) in root.items()}
                                     for root in now.roots], now.linked, now.stamps)))
    upgraded = statcache.load(path, ws.repo.algorithm)
    assert upgraded.snapshot_id == now.snapshot_id and upgraded.roots == now.roots
    ws.repo._statcache_memo = None
    snap = ws.snapshot()
    assert ws.last_scan.hashed == 0 and snap.modified == 0
    (ws_dir / "a.txt").write_text("changed")
    os.utime(ws_dir / "a.txt", ns=(1, 1))
    assert ws.snapshot().modified == 1
