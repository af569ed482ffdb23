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

import json
import os
import struct
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import zstandard

from ...errors import RemoteError
from ..atomic import TEMP_PREFIX, atomic_write_bytes
from ..hashing import ALGORITHMS, digest_function
from .backend import Backend, Missing
from .crypto import Sealer, new_encryption, open_encryption

FORMAT = "ctrlz-remote 1"
PACK_MAGIC = b"CTZRPK01"
PACK_HEAD = 16  # magic and salt
INDEX_MAGIC = b"CTZRIX01"
ENTRY = struct.Struct(">32sQQQB")  # oid, offset, blob length, raw size, codec
INDEX_HEAD = struct.Struct(">8s32scI")  # magic, pack id, kind, count
PACK_TARGET = 32 << 20
DEFAULT_GRACE = 3600.0
TREE, DATA = b"t", b"d"


@dataclass(frozen=True)
class Location:
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

    def add(self, pack: bytes, kind: bytes, entries: Iterable[tuple[bytes, int, int, int, int]]
            ) -> None:
        end = PACK_HEAD
        oids = []
        for oid, off, ln, size, codec in entries:
            self.objects.setdefault(oid, Location(pack, off, ln, size, codec))
            oids.append(oid)
            end = max(end, off + ln)
        self.packs[pack] = (kind, end)
        self.pack_objects[pack] = oids


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
        self.grace = float(config.get("gc_grace_seconds", DEFAULT_GRACE))

    # -- opening -------------------------------------------------------------------------

    @classmethod
    def open(cls, backend: Backend, *, key: bytes | None, create: str | None = None,
             encrypt: bool = False, grace: float | None = None) -> RemoteRepo:
        """Open the remote; with ``create`` (a hash algorithm) make it if it is empty."""
        backend.check()
        try:
            raw, _ = backend.get("config")
        except Missing:
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
        listing, taken second, holds every pack of every index listed first)."""
        names = [k.rpartition("/")[2] for k, _, _ in self.backend.list("index/")]
        names = [n for n in names if len(n) == 64]
        packs = {k.rpartition("/")[2] for k, _, _ in self.backend.list("data/")}
        if cache is not None:
            cache.mkdir(parents=True, exist_ok=True)

        def load(name: str) -> tuple[bytes, bytes, list[tuple[bytes, int, int, int, int]]]:
            path = cache / name if cache is not None else None
            raw = None
            if path is not None:
                try:
                    raw = path.read_bytes()
                    return self.parse_index(name, raw)
                except (OSError, RemoteError):
                    # absent, damaged, or removed just now by another process that found
                    # it stale: the cache is only a copy, fetch it again
                    raw = None
            try:
                raw, _ = self.backend.get(f"index/{name}")
            except Missing:
                return b"", b"", []  # gc removed it after the listing
            parsed = self.parse_index(name, raw)
            if path is not None:
                try:
                    atomic_write_bytes(path, raw)
                except FileNotFoundError:
                    pass  # its temp file went with another process's clean-up: no copy
            return parsed

        index = RemoteIndex()
        index.dangling = {bytes.fromhex(n) for n in names if n not in packs}
        with ThreadPoolExecutor(workers) as pool:
            for pack, kind, entries in pool.map(load, [n for n in names if n in packs]):
                if pack:
                    index.add(pack, kind, entries)
        if cache is not None:
            for stale in set(os.listdir(cache)) - set(names):
                if stale.startswith(TEMP_PREFIX) and not _older_than(cache / stale, 3600):
                    continue  # another process writing its copy (or a crash's, kept an hour)
                try:
                    os.unlink(cache / stale)
                except OSError:
                    pass
        return index

    def fetch(self, wanted: Iterable[tuple[bytes, Location]], workers: int = 8,
              gap: int = 1 << 20, span: int = 64 << 20
              ) -> Iterator[tuple[bytes, Location, bytes]]:
        """(oid, location, stored bytes) for each wanted object, unsealed but not yet checked
        against its id (the caller does that). Reads are ranges, merged when objects lie
        close together in a pack, and run in parallel."""
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
                 ) -> list[tuple[bytes, Location, bytes]]:
            pack, start, end, run = job
            data = self.backend.get_range(pack_key(pack), start, end - start)
            if len(data) != end - start:
                raise RemoteError(f"{self.url}: pack {pack_key(pack)} is truncated (wanted "
                                  f"bytes {start}-{end}, got {len(data)}); run "
                                  "`ctrlz verify --remote`")
            out = []
            for oid, loc in run:
                blob = data[loc.offset - start:loc.offset - start + loc.length]
                out.append((oid, loc, self.unseal(blob, oid, f"object {oid.hex()[:16]} in "
                                                             f"{pack_key(pack)}")))
            return out

        window = workers * 2  # bounded read-ahead: a 2 GB clone never sits in memory whole
        with ThreadPoolExecutor(workers) as pool:
            for i in range(0, len(runs), window):
                for batch in pool.map(read, runs[i:i + window]):
                    yield from batch


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
    from ..transfer import clone_seal, decode_stored

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
