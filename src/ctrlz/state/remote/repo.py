"""The remote repository format: what each key holds, and reading and writing it.

Layout under the remote's prefix (``docs/format.md`` has the byte layouts)::

    config                  JSON, written once (create-only): format, hash algorithm,
                            encryption (salt, key check), gc grace period
    data/<2 hex>/<64 hex>   packs, named by the digest of their bytes; create-only
    index/<64 hex>          one index per pack (same name): its objects' offsets; create-only
    refs/<workspace id>     one per workspace: its snapshot records and who made each;
                            replaced only by compare-and-swap on the ETag
    gc/state                packs gc has condemned, and when (compare-and-swap)

A pack is ``b"CTZRPK01"``, 8 salt bytes (zero, so that an interrupted push uploading the same
objects again makes the same pack; random when a push must upload objects again because gc
condemned the pack they were in), then object blobs: each object's stored bytes (the codec its
store chose), or, on an encrypted remote, those bytes sealed with the object's id as associated
data. Trees and file contents go in separate packs (``kind`` ``t`` / ``d`` in the index), so a
pull reads the small tree packs first and knows what else it needs.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import struct
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import zstandard

from ...errors import RemoteError
from ..fsio.atomic import TEMP_PREFIX, atomic_write_bytes
from ..hashing import ALGORITHMS, digest_function, hasher_factory
from .backend import Backend, Missing
from .crypto import Sealer, new_encryption, open_encryption

T = TypeVar("T")
FORMAT = "ctrlz-remote 1"
PACK_MAGIC = b"CTZRPK01"
PACK_HEAD = 16  # magic and salt
INDEX_MAGIC = b"CTZRIX01"
ENTRY = struct.Struct(">32sQQQB")  # oid, offset, blob length, raw size, codec
INDEX_HEAD = struct.Struct(">8s32scI")  # magic, pack id, kind, count
PACK_TARGET = 32 << 20
DEFAULT_GRACE = 3600.0
TREE, DATA = b"t", b"d"


class Location(NamedTuple):
    """Where one object sits on the remote. A tuple, not a dataclass: an index of 100,000
    objects builds 100,000 of these on every push, and a tuple is several times cheaper."""

    pack: bytes
    offset: int
    length: int  # bytes of the blob on the remote
    size: int  # raw size of the object
    codec: int


@dataclass
class RemoteIndex:
    """Where every object on the remote lives (from all index files)."""

    objects: dict[bytes, Location] = field(default_factory=dict)
    packs: dict[bytes, tuple[bytes, int]] = field(default_factory=dict)  # id -> (kind, size)
    pack_objects: dict[bytes, list[bytes]] = field(default_factory=dict)
    #: indexes whose pack does not exist (a gc deleting it raced a push re-uploading the same
    #: pack): ignored for reading, collected by gc
    dangling: set[bytes] = field(default_factory=set)
    #: further locations of objects held by more than one pack (gc's repacking copies live
    #: objects out of a mostly-garbage pack before it condemns it; pushes may duplicate too)
    others: dict[bytes, list[Location]] = field(default_factory=dict)

    def add(self, pack: bytes, kind: bytes, entries: Iterable[tuple[bytes, int, int, int, int]]
            ) -> None:
        end = PACK_HEAD
        oids = []
        objects = self.objects
        for oid, off, ln, size, codec in entries:
            if oid not in objects:
                objects[oid] = Location(pack, off, ln, size, codec)
            elif objects[oid].pack != pack:
                self.others.setdefault(oid, []).append(Location(pack, off, ln, size, codec))
            oids.append(oid)
            if off + ln > end:
                end = off + ln
        self.packs[pack] = (kind, end)
        self.pack_objects[pack] = oids

    def avoid(self, packs: set[bytes]) -> None:
        """Locate objects outside ``packs`` (those gc condemned) wherever another copy
        exists, so that a push relies on, and a pull reads, the copy gc keeps."""
        if not packs:
            return
        for oid, more in self.others.items():
            here = self.objects[oid]
            if here.pack in packs:
                better = next((loc for loc in more if loc.pack not in packs), None)
                if better is not None:
                    more[more.index(better)] = here
                    self.objects[oid] = better

    def location_in(self, oid: bytes, pack: bytes) -> Location | None:
        """Where ``oid`` sits in ``pack``, if it does."""
        loc = self.objects.get(oid)
        if loc is not None and loc.pack == pack:
            return loc
        return next((o for o in self.others.get(oid, ()) if o.pack == pack), None)


def pack_key(pack: bytes) -> str:
    h = pack.hex()
    return f"data/{h[:2]}/{h}"


def index_key(pack: bytes) -> str:
    return f"index/{pack.hex()}"


def ref_key(workspace: str) -> str:
    return f"refs/{workspace}"


GC_KEY = "gc/state"


class RemoteRepo:
    """One remote: its backend, its config and (when encrypted) its sealer."""

    def __init__(self, backend: Backend, config: dict[str, Any], sealer: Sealer | None) -> None:
        self.backend = backend
        self.url = backend.url
        self.config = config
        self.sealer = sealer
        self.algorithm: str = config["algorithm"]
        self.digest = digest_function(self.algorithm)
        self.new_hasher = hasher_factory(self.algorithm)
        self.grace = float(config.get("gc_grace_seconds", DEFAULT_GRACE))
        #: this remote and no other: its URL and its config, which on an encrypted remote holds
        #: a random salt (local caches about the remote are keyed by it)
        self.identity = backend.url + " " + hashlib.sha256(
            json.dumps(config, sort_keys=True).encode()).hexdigest()

    # -- opening -------------------------------------------------------------------------

    @classmethod
    def open(cls, backend: Backend, *, key: bytes | None, create: str | None = None,
             encrypt: bool = False, grace: float | None = None) -> RemoteRepo:
        """Open the remote; with ``create`` (a hash algorithm) make it if it is empty. The
        backend's own check (a request of its own) runs only when there is no config: a
        missing bucket or refused credentials already fail the config read with one line."""
        try:
            raw, _ = backend.get("config")
        except Missing:
            backend.check()
            if create is None:
                raise RemoteError(f"{backend.url} holds no ctrlz remote yet; push to it "
                                  "first") from None
            raw = _new_config(backend, create, key if encrypt else None, grace)
        try:
            config = json.loads(raw)
            if config.get("format") != FORMAT or config.get("algorithm") not in ALGORITHMS:
                raise ValueError(config.get("format"))
        except (ValueError, AttributeError) as exc:
            raise RemoteError(f"{backend.url}: not a ctrlz remote, or from a newer ctrlz "
                              f"({exc})") from None
        sealer = None
        if config.get("encryption"):
            if not key:
                raise RemoteError(f"{backend.url} is encrypted; give the key with --key-file "
                                  "or --key-env when adding the remote")
            sealer = open_encryption(config["encryption"], key, backend.url)
        elif encrypt:
            raise RemoteError(f"{backend.url} already holds an unencrypted ctrlz remote; "
                              "use another prefix for an encrypted one")
        return cls(backend, config, sealer)

    # -- sealing -------------------------------------------------------------------------

    def seal(self, data: bytes, aad: bytes) -> bytes:
        return self.sealer.seal(data, aad) if self.sealer else data

    def unseal(self, data: bytes, aad: bytes, what: str) -> bytes:
        return self.sealer.open(data, aad, f"{self.url}: {what}") if self.sealer else data

    def _put_doc(self, key: str, doc: dict[str, Any], etag: str | None) -> str:
        body = self.seal(zstandard.ZstdCompressor(level=3).compress(
            json.dumps(doc, sort_keys=True).encode()), key.encode())
        return self.backend.put_cas(key, body, etag)

    def _get_doc(self, key: str) -> tuple[dict[str, Any] | None, str | None]:
        try:
            raw, etag = self.backend.get(key)
        except Missing:
            return None, None
        try:
            doc = json.loads(zstandard.ZstdDecompressor().decompressobj().decompress(
                self.unseal(raw, key.encode(), key)))
            if not isinstance(doc, dict):
                raise ValueError("not an object")
        except (zstandard.ZstdError, ValueError) as exc:
            raise RemoteError(f"{self.url}: {key} is damaged ({exc}); run "
                              "`ctrlz verify --remote`") from None
        return doc, etag

    # -- refs and gc state -----------------------------------------------------------------

    def read_ref(self, workspace: str) -> tuple[dict[str, Any] | None, str | None]:
        return self._get_doc(ref_key(workspace))

    def write_ref(self, workspace: str, doc: dict[str, Any], etag: str | None) -> str:
        return self._put_doc(ref_key(workspace), doc, etag)

    def workspaces(self) -> list[str]:
        return sorted(k.rpartition("/")[2] for k, _, _ in self.backend.list("refs/"))

    def read_gc(self) -> tuple[dict[str, Any], str | None]:
        doc, etag = self._get_doc(GC_KEY)
        return doc or {"format": "ctrlz-gc 1", "generation": 0, "condemned": {}}, etag

    def write_gc(self, doc: dict[str, Any], etag: str | None) -> str:
        return self._put_doc(GC_KEY, doc, etag)

    def condemned(self) -> set[bytes]:
        """The packs gc has condemned (to be deleted once the grace period is over)."""
        state, _ = self.read_gc()
        out = set()
        for key in state.get("condemned", {}):
            try:
                out.add(bytes.fromhex(key))
            except ValueError:
                continue
        return out

    # -- packs and indexes -----------------------------------------------------------------

    def build_pack(self, kind: bytes, objects: Iterable[tuple[bytes, int, int, bytes]],
                   salt: bytes = bytes(8)
                   ) -> tuple[bytes, bytes, bytes, list[tuple[bytes, int, int, int, int]]]:
        """(pack id, pack bytes, index bytes, entries) for ``objects`` given as
        (oid, raw size, codec, stored bytes)."""
        parts = [PACK_MAGIC, salt]
        entries = []
        offset = PACK_HEAD
        for oid, size, codec, stored in objects:
            blob = self.seal(stored, oid)
            parts.append(blob)
            entries.append((oid, offset, len(blob), size, codec))
            offset += len(blob)
        body = b"".join(parts)
        pack = self.digest(body)
        index = INDEX_HEAD.pack(INDEX_MAGIC, pack, kind, len(entries)) + b"".join(
            ENTRY.pack(*e) for e in entries)
        index = self.seal(zstandard.ZstdCompressor(level=3).compress(index),
                          index_key(pack).encode())
        return pack, body, index, entries

    def parse_index(self, name: str, raw: bytes) -> tuple[bytes, bytes,
                                                          list[tuple[bytes, int, int, int, int]]]:
        key = f"index/{name}"
        try:
            data = zstandard.ZstdDecompressor().decompressobj().decompress(
                self.unseal(raw, key.encode(), key))
            magic, pack, kind, count = INDEX_HEAD.unpack_from(data)
            if magic != INDEX_MAGIC or pack.hex() != name or \
                    len(data) != INDEX_HEAD.size + count * ENTRY.size:
                raise ValueError("bad header or length")
            entries = list(ENTRY.iter_unpack(data[INDEX_HEAD.size:]))
        except (zstandard.ZstdError, struct.error, ValueError) as exc:
            raise RemoteError(f"{self.url}: {key} is damaged ({exc}); run "
                              "`ctrlz verify --remote`") from None
        return pack, kind, entries

    def load_index(self, cache: Path | None, workers: int = 8) -> RemoteIndex:
        """Read every index file, through a local cache of the immutable ones. An index whose
        pack is not listed is left out (packs are written before their index, so the pack
        listing, taken second, holds every pack of every index listed first). The pack
        listing's round trip runs while the cached copies are parsed."""
        names = [k.rpartition("/")[2] for k, _, _ in self.backend.list("index/")]
        lister = ThreadPoolExecutor(1)
        packs_f = lister.submit(lambda: {k.rpartition("/")[2]
                                         for k, _, _ in self.backend.list("data/")})
        lister.shutdown(wait=False)
        names = [n for n in names if len(n) == 64]
        if cache is not None:
            cache.mkdir(parents=True, exist_ok=True)

        Parsed = tuple[bytes, bytes, list[tuple[bytes, int, int, int, int]]]

        def cached(name: str) -> Parsed | None:
            if cache is None:
                return None
            try:
                return self.parse_index(name, (cache / name).read_bytes())
            except (OSError, RemoteError):
                # absent, damaged, or removed just now by another process that found it
                # stale: the cache is only a copy, fetch it again
                return None

        def fetch(name: str) -> Parsed:
            try:
                raw, _ = self.backend.get(f"index/{name}")
            except Missing:
                return b"", b"", []  # gc removed it after the listing
            parsed = self.parse_index(name, raw)
            if cache is not None:
                try:
                    atomic_write_bytes(cache / name, raw)
                except FileNotFoundError:
                    pass  # its temp file went with another process's clean-up: no copy
            return parsed

        index = RemoteIndex()
        # cached copies are parsed here (threads would only take turns on the GIL); only
        # downloads go to the pool. The listing's order is kept: the first location wins.
        parsed = {n: cached(n) for n in names}
        packs = packs_f.result()
        index.dangling = {bytes.fromhex(n) for n in names if n not in packs}
        wanted = [n for n in names if n in packs]
        loaded: list[Parsed | None] = [parsed[n] for n in wanted]
        absent = [i for i, got in enumerate(loaded) if got is None]
        if absent:
            with ThreadPoolExecutor(min(workers, len(absent))) as pool:
                for i, got in zip(absent, pool.map(fetch, [wanted[i] for i in absent]),
                                  strict=True):
                    loaded[i] = got
        for got in loaded:
            if got is not None and got[0]:
                index.add(*got)
        if cache is not None:
            for stale in set(os.listdir(cache)) - set(names):
                if stale.startswith(TEMP_PREFIX) and not _older_than(cache / stale, 3600):
                    continue  # another process writing its copy (or a crash's, kept an hour)
                try:
                    os.unlink(cache / stale)
                except OSError:
                    pass
        return index

    @staticmethod
    def keep_index(cache: Path | None, pack: bytes, raw: bytes) -> None:
        """Put an index this process just uploaded into the local cache, so that the next
        :meth:`load_index` does not download it again (indexes never change)."""
        if cache is None:
            return
        try:
            cache.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(cache / pack.hex(), raw, durable=False)
        except OSError:
            pass  # only a copy: the next load fetches it

    def fetch(self, wanted: Iterable[tuple[bytes, Location]], workers: int = 8,
              gap: int = 1 << 20, span: int = 64 << 20
              ) -> Iterator[tuple[bytes, Location, bytes]]:
        """(oid, location, stored bytes) for each wanted object, unsealed but not yet checked
        against its id (the caller does that). Reads are ranges, merged when objects lie
        close together in a pack, and run in parallel."""
        for oid, loc, stored, _ in self.fetch_each(wanted, None, workers, gap, span):
            yield oid, loc, stored

    def fetch_each(self, wanted: Iterable[tuple[bytes, Location]],
                   work: Callable[[bytes, Location, bytes], T] | None, workers: int = 8,
                   gap: int = 1 << 20, span: int = 64 << 20
                   ) -> Iterator[tuple[bytes, Location, bytes, T | None]]:
        """:meth:`fetch`, with ``work`` (oid, location, stored bytes) run on the download
        threads as each object arrives and its result yielded beside it: checking objects
        there (decompress and hash release the GIL) overlaps with the downloads and uses both
        cores, where the caller's one thread would do them one by one."""
        by_pack: dict[bytes, list[tuple[bytes, Location]]] = {}
        for oid, loc in wanted:
            by_pack.setdefault(loc.pack, []).append((oid, loc))
        runs: list[tuple[bytes, int, int, list[tuple[bytes, Location]]]] = []
        for pack, items in by_pack.items():
            items.sort(key=lambda x: x[1].offset)
            start = end = -1
            run: list[tuple[bytes, Location]] = []
            for oid, loc in items:
                if run and (loc.offset - end > gap or loc.offset + loc.length - start > span):
                    runs.append((pack, start, end, run))
                    run = []
                if not run:
                    start = loc.offset
                run.append((oid, loc))
                end = max(end, loc.offset + loc.length)
            if run:
                runs.append((pack, start, end, run))

        def read(job: tuple[bytes, int, int, list[tuple[bytes, Location]]]
                 ) -> list[tuple[bytes, Location, bytes, T | None]]:
            pack, start, end, run = job
            data = self.backend.get_range(pack_key(pack), start, end - start)
            if len(data) != end - start:
                raise RemoteError(f"{self.url}: pack {pack_key(pack)} is truncated (wanted "
                                  f"bytes {start}-{end}, got {len(data)}); run "
                                  "`ctrlz verify --remote`")
            out = []
            view = memoryview(data)
            for oid, loc in run:
                blob = bytes(view[loc.offset - start:loc.offset - start + loc.length]) \
                    if len(run) > 1 else data
                stored = self.unseal(blob, oid, f"object {oid.hex()[:16]} in "
                                                f"{pack_key(pack)}")
                out.append((oid, loc, stored,
                            work(oid, loc, stored) if work is not None else None))
            return out

        # bounded read-ahead, sliding: a 2 GB clone never sits in memory whole, and one slow
        # read holds back only the results after it, never the next reads
        window = workers * 2
        with ThreadPoolExecutor(workers) as pool:
            pending: deque[Future[list[tuple[bytes, Location, bytes, T | None]]]] = deque()
            jobs = iter(runs)
            for job in itertools.islice(jobs, window):
                pending.append(pool.submit(read, job))
            try:
                while pending:
                    batch = pending.popleft().result()
                    for job in itertools.islice(jobs, 1):
                        pending.append(pool.submit(read, job))
                    yield from batch
            finally:
                for f in pending:
                    f.cancel()


def _new_config(backend: Backend, algorithm: str, key: bytes | None,
                grace: float | None) -> bytes:
    config: dict[str, Any] = {"format": FORMAT, "algorithm": algorithm,
                              "gc_grace_seconds": grace if grace is not None else DEFAULT_GRACE,
                              "encryption": None}
    if key is not None:
        config["encryption"], _ = new_encryption(key)
    raw = json.dumps(config, indent=1).encode()
    if not backend.put_new("config", raw):  # someone else made it first: theirs holds
        raw, _ = backend.get("config")
    return raw


def check_stored(digest: Callable[[bytes], bytes], oid: bytes, size: int, codec: int,
                 stored: bytes) -> bytes:
    """Decode and check one fetched object (the raw bytes, or :class:`RemoteError`)."""
    from ...errors import CorruptObject
    from ..interchange.transfer import clone_seal, decode_stored

    try:
        data = decode_stored(oid, size, codec, stored)
        expected = clone_seal(oid, size, codec, stored) or oid  # a clone: its seal
    except CorruptObject as exc:
        raise RemoteError(str(exc)) from None
    if digest(data) != expected:
        raise RemoteError(f"object {oid.hex()[:16]} does not match its id")
    return data


def _older_than(path: os.PathLike[str], seconds: float) -> bool:
    import time

    try:
        return os.lstat(path).st_mtime < time.time() - seconds
    except OSError:
        return False
