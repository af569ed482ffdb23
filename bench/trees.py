"""Benchmark inputs: the three workspaces, the shared change set, and the measurement floors.

Every tool must see byte-identical input, so trees are generated once from fixed seeds, reused
across tools and runs (a ``.complete`` marker records the parameters), and the change set is a
deterministic list of paths that :class:`ChangeSet` can apply and undo exactly.

Generation is fast by design: small files are slices of one pre-generated token corpus (so they
compress like real code without calling ``random`` per byte), and large files tile a few
megabyte-sized buffers with a per-file header and chunk counter (so no two chunks dedupe).
"""

from __future__ import annotations

import json
import mmap
import os
import random
import shutil
import struct
import subprocess
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import blake3

SEED = 20260421

_JS_WORDS = (
    "const", "let", "var", "function", "return", "if", "else", "for", "while", "of", "in", "new",
    "this", "null", "undefined", "true", "false", "module", "exports", "require", "import",
    "export", "default", "from", "async", "await", "class", "extends", "super", "try", "catch",
    "finally", "throw", "typeof", "instanceof", "Object", "Array", "String", "Number", "Promise",
    "Symbol", "Map", "Set", "prototype", "length", "push", "slice", "map", "filter", "reduce",
    "forEach", "keys", "values", "assign", "call", "apply", "bind", "options", "config", "value",
    "result", "error", "callback", "props", "state", "next", "resolve", "reject", "emit", "on",
    "off", "path", "fs", "util", "buffer", "stream", "event", "data", "index", "key", "name",
    "type", "args", "arguments", "handler", "context",
)
_PUNCT = ("(", ")", "{", "}", "[", "]", ";", ",", ".", " = ", " => ", " === ", " + ", ": ",
          "\n", "\n  ", "\n    ", "'use strict';\n", "// ", " && ", " || ", "!")


def _corpus(rng: random.Random, size: int) -> bytes:
    """JS-like text that compresses about like real minified-and-not code (3-5x with zstd)."""
    idents = [f"{rng.choice(_JS_WORDS)}{rng.choice(['', '', '_', 'A', 'Fn', str(i)])}"
              for i in range(4000)]
    tokens = list(_JS_WORDS) * 3 + idents + list(_PUNCT) * 40
    parts = rng.choices(tokens, k=size // 5 + 1)
    text = " ".join(parts).encode()
    return text[:size]


def _du_apparent(paths: list[Path]) -> int:
    """Bytes as ``du -sb`` counts them: apparent sizes, hard links counted once."""
    out = subprocess.run(["du", "-sbc", *map(str, paths)], check=True, capture_output=True,
                         text=True).stdout.splitlines()
    return int(out[-1].split()[0])


def du_bytes(paths: list[Path]) -> tuple[int, int]:
    """(apparent bytes, allocated bytes) of ``paths`` taken together, hard links once."""
    alloc = subprocess.run(["du", "-sc", "-B1", *map(str, paths)], check=True,
                           capture_output=True, text=True).stdout.splitlines()
    return _du_apparent(paths), int(alloc[-1].split()[0])


# -- trees -------------------------------------------------------------------------------------


@dataclass
class Tree:
    """A generated workspace and its pristine description."""

    name: str
    root: Path
    files: int
    bytes: int


def _marker(root: Path) -> Path:
    return root.parent / f".{root.name}.complete"


def _reuse(root: Path, params: dict[str, object]) -> Tree | None:
    marker = _marker(root)
    if root.is_dir() and marker.is_file():
        data = json.loads(marker.read_text())
        if data.get("params") == params:
            return Tree(data["name"], root, data["files"], data["bytes"])
    return None


def _finish(name: str, root: Path, params: dict[str, object]) -> Tree:
    files = total = 0
    for entry in walk(root):
        files += 1
        total += entry.stat(follow_symlinks=False).st_size
    _marker(root).write_text(json.dumps({"name": name, "params": params, "files": files,
                                         "bytes": total}))
    return Tree(name, root, files, total)


def _fresh(root: Path) -> None:
    _marker(root).unlink(missing_ok=True)
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)


#: git's own source as Debian ships it (what ``apt-get source git`` unpacks first), from the
#: Debian archive that apt uses: a real C/shell/Perl tree with 37 .gitignore files
GIT_SOURCE = ("https://deb.debian.org/debian/pool/main/g/git/git_2.39.5.orig.tar.xz",
              "git_2.39.5.orig.tar.xz")


def source_tree(out: Path) -> Tree:
    """A real source tree: git 2.39.5's source, downloaded once (cached) and unpacked."""
    url, name = GIT_SOURCE
    root = out / "trees" / "source"
    params: dict[str, object] = {"archive": name}
    if (tree := _reuse(root, params)) is not None:
        return tree
    cache = out / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    archive = cache / name
    if not archive.exists():
        import urllib.request

        tmp = archive.with_suffix(".part")
        with urllib.request.urlopen(url, timeout=120) as resp, open(tmp, "wb") as f:
            shutil.copyfileobj(resp, f)
        tmp.rename(archive)
    _fresh(root)
    with tarfile.open(archive) as tar:
        tar.extractall(root, filter="data")
    return _finish("source", root, params)


def small_tree(out: Path, n_files: int = 100_000) -> Tree:
    """``n_files`` small files laid out like node_modules: packages, nested deps, lib/dist dirs.

    Sizes are log-normal (median ~1.7 KB, mean ~3.5 KB, capped at 256 KB), contents are slices
    of a JS-like corpus at random offsets, and a few files (LICENSE variants) repeat verbatim,
    as they do in real dependency trees.
    """
    root = out / "trees" / "small"
    params: dict[str, object] = {"n_files": n_files, "seed": SEED, "v": 2}
    if (tree := _reuse(root, params)) is not None:
        return tree
    _fresh(root)
    rng = random.Random(SEED)
    corpus = _corpus(rng, 48 << 20)
    licenses = [f"MIT License\n\nCopyright (c) {2010 + i} author{i}\n\n".encode()
                + corpus[i * 7919:i * 7919 + 900] for i in range(12)]
    nm = root / "node_modules"
    written = 0
    pkg = 0
    top: list[Path] = []
    while written < n_files:
        pkg += 1
        # ~20% of packages nest under an earlier one's node_modules, like conflicting versions
        if top and rng.random() < 0.2:
            base = rng.choice(top) / "node_modules"
        else:
            base = nm
        name = f"pkg-{rng.choice(_JS_WORDS).lower()}-{pkg}"
        if rng.random() < 0.15:
            base = base / f"@scope{pkg % 37}"
        pdir = base / name
        if base == nm:
            top.append(pdir)
        n = max(3, min(int(rng.lognormvariate(2.9, 0.9)), n_files - written))
        dirs = [pdir, pdir / "lib", pdir / "lib" / "util", pdir / "dist", pdir / "src" / "core"]
        for d in dirs:
            d.mkdir(parents=True, exist_ok=True)
        manifest = json.dumps({"name": name, "version": f"{pkg % 9}.{pkg % 13}.{pkg % 7}",
                               "main": "lib/index.js", "license": "MIT"}, indent=2).encode()
        (pdir / "package.json").write_bytes(manifest)
        (pdir / "LICENSE").write_bytes(licenses[pkg % len(licenses)])
        written += 2
        for i in range(n - 2):
            size = min(int(rng.lognormvariate(7.45, 1.2)), 256 << 10)
            off = rng.randrange(0, len(corpus) - size - 1)
            d = dirs[i % len(dirs)]
            ext = (".js", ".js", ".d.ts", ".json", ".md", ".map")[i % 6]
            header = f"/* {name} file {i} */\n".encode()
            with open(d / f"f{i}{ext}", "wb") as fh:
                fh.write(header + corpus[off:off + size])
            written += 1
    return _finish("small", root, params)


def large_tree(out: Path, total: int = 2_000_000_000, n_files: int = 20) -> Tree:
    """``n_files`` big files totalling ``total`` bytes: half random, half CSV/log-like text.

    Random files come from BLAKE3's extendable output (deterministic, several GB/s, no repeated
    blocks). Text files tile one 5 MiB buffer of log lines, but each 4 MiB chunk starts at its
    own offset and gets its own permutation of the digits, so no two chunks (or content-defined
    sub-chunks) are identical while the text still compresses like a real log.
    """
    root = out / "trees" / "large"
    params: dict[str, object] = {"total": total, "n_files": n_files, "seed": SEED, "v": 3}
    if (tree := _reuse(root, params)) is not None:
        return tree
    _fresh(root)
    rng = random.Random(SEED)
    chunk = 4 << 20
    lines = []
    size = 0
    t = 1_700_000_000
    while size < chunk + (1 << 20):
        t += rng.randrange(1, 5000)
        line = (f"{t},{rng.choice(['GET', 'POST', 'PUT'])},/api/v{rng.randrange(3)}/"
                f"{rng.choice(_JS_WORDS)}/{rng.randrange(100000)},{rng.randrange(100, 600)},"
                f"{rng.random():.6f},{rng.choice(_JS_WORDS)}\n").encode()
        lines.append(line)
        size += len(line)
    text_base = b"".join(lines)
    digits = list(b"0123456789")
    per = total // n_files
    for i in range(n_files):
        random_kind = i % 2 == 0
        sub = "blob" if random_kind else "data"
        path = root / sub / f"{i:03d}.{'bin' if random_kind else 'csv'}"
        path.parent.mkdir(parents=True, exist_ok=True)
        xof = blake3.blake3(f"{SEED}-{i}".encode())
        with open(path, "wb") as fh:
            left = per
            c = 0
            while left > 0:
                n = min(chunk, left)
                if random_kind:
                    body = xof.digest(length=n, seek=c * chunk)
                else:
                    perm = digits[:]
                    rng.shuffle(perm)
                    table = bytes.maketrans(bytes(digits), bytes(perm))
                    off = rng.randrange(0, 1 << 20)
                    body = text_base[off:off + n].translate(table)
                fh.write(body)
                left -= n
                c += 1
    return _finish("large", root, params)


def walk(root: Path) -> Iterator[os.DirEntry[str]]:
    """Every non-directory entry under ``root`` (no symlink following)."""
    stack = [str(root)]
    while stack:
        with os.scandir(stack.pop()) as it:
            for entry in it:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                else:
                    yield entry


# -- the change set ----------------------------------------------------------------------------


@dataclass
class ChangeSet:
    """10 edits and 10 new files, chosen deterministically, that can be applied and undone.

    Small files are edited by inserting a line (size changes); files over 1 MiB get an in-place
    64-byte patch in the middle (rewriting a 100 MB file is not a "small change"). Five of the new
    files go into a new directory, so restores must also remove a directory.
    """

    root: Path
    edits: list[str]
    new_files: list[str]
    new_dir: str
    originals: dict[str, tuple[int, bytes, int]] = field(default_factory=dict)

    @classmethod
    def choose(cls, root: Path, n: int = 10) -> ChangeSet:
        rels = sorted(os.path.relpath(e.path, root) for e in walk(root) if e.is_file())
        rng = random.Random(SEED + 1)
        edits = sorted(rng.sample(rels, min(n, len(rels))))
        anchor = os.path.dirname(edits[0])
        new_dir = os.path.join(anchor, "bench_new_dir")
        new_files = [os.path.join(os.path.dirname(edits[i % len(edits)]), f"bench_new_{i}.txt")
                     for i in range(n - n // 2)]
        new_files += [os.path.join(new_dir, f"new_{i}.txt") for i in range(n // 2)]
        return cls(root, edits, new_files, new_dir)

    def paths(self) -> list[str]:
        return self.edits + self.new_files

    def apply(self, rep: int) -> None:
        """Make the changes; ``rep`` varies the content so repeated runs never dedupe."""
        for i, rel in enumerate(self.edits):
            p = self.root / rel
            size = p.stat().st_size
            line = f"// bench edit {i} rep {rep} {time.time_ns()}\n".encode()
            if size > 1 << 20:
                off = size // 2
                with open(p, "r+b") as fh:
                    fh.seek(off)
                    old = fh.read(64)
                    self.originals[rel] = (off, old, size)
                    fh.seek(off)
                    fh.write(line.ljust(64, b"#")[:64])
            else:
                old = p.read_bytes()
                self.originals[rel] = (-1, old, size)
                cut = len(old) // 2
                p.write_bytes(old[:cut] + line + old[cut:])
        (self.root / self.new_dir).mkdir(parents=True, exist_ok=True)
        for i, rel in enumerate(self.new_files):
            body = f"new file {i} rep {rep}\n".encode() * (64 + 50 * i)
            (self.root / rel).write_bytes(body)

    def is_pristine(self) -> bool:
        """True when every edited file is back to its original bytes and the new paths are gone."""
        for rel, (off, old, size) in self.originals.items():
            p = self.root / rel
            if not p.is_file() or p.stat().st_size != size:
                return False
            if off < 0:
                if p.read_bytes() != old:
                    return False
            else:
                with open(p, "rb") as fh:
                    fh.seek(off)
                    if fh.read(len(old)) != old:
                        return False
        return not any((self.root / r).exists() for r in self.new_files) and not (
            self.root / self.new_dir).exists()

    def undo(self) -> None:
        """Force the tree back to pristine (used only if a tool's restore did not)."""
        for rel, (off, old, _size) in self.originals.items():
            p = self.root / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            if off < 0:
                p.write_bytes(old)
            else:
                with open(p, "r+b") as fh:
                    fh.seek(off)
                    fh.write(old)
        for rel in self.new_files:
            (self.root / rel).unlink(missing_ok=True)
        shutil.rmtree(self.root / self.new_dir, ignore_errors=True)


# -- floors ------------------------------------------------------------------------------------


def lstat_floor_python(root: Path) -> float:
    """Seconds for a Python scandir walk that lstat()s every entry: what any scanner pays."""
    t0 = time.perf_counter()
    stack = [str(root)]
    while stack:
        with os.scandir(stack.pop()) as it:
            for entry in it:
                entry.stat(follow_symlinks=False)
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
    return time.perf_counter() - t0


def lstat_floor_find(root: Path) -> float:
    """Seconds for ``find -printf '%s'``, which lstat()s every entry in C."""
    t0 = time.perf_counter()
    subprocess.run(["find", str(root), "-printf", "%s\n"], check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def read_hash_floor(root: Path, threads: bool = True) -> float:
    """Seconds to read and BLAKE3 every file (warm cache): the floor for a first snapshot."""
    buf = bytearray(16 << 20)
    view = memoryview(buf)
    t0 = time.perf_counter()
    for entry in walk(root):
        if not entry.is_file(follow_symlinks=False):
            continue
        h = blake3.blake3(max_threads=blake3.blake3.AUTO if threads else 1)
        with open(entry.path, "rb", buffering=0) as fh:
            while n := fh.readinto(buf):
                h.update(view[:n])
        h.digest()
    return time.perf_counter() - t0


def durable_write_rate(where: Path, total: int = 1 << 30) -> float:
    """Bytes per second this disk makes durable: ``total`` bytes of random data written past
    the page cache (``O_DIRECT``, 2 MiB at a time, as ctrlz writes its large objects) and
    fsynced, in a temp file under ``where`` (the stores' filesystem). Divided into what a
    snapshot stores, it is the least time any tool that fsyncs before it returns can take."""
    where.mkdir(parents=True, exist_ok=True)
    path = where / ".write-floor"
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    try:
        fd = os.open(path, flags | getattr(os, "O_DIRECT", 0), 0o600)
    except OSError:  # no O_DIRECT here: through the page cache, fsynced all the same
        fd = os.open(path, flags, 0o600)
    buf = mmap.mmap(-1, 2 << 20)  # page-aligned, as O_DIRECT wants
    buf.write(os.urandom(2 << 20))
    try:
        t0 = time.perf_counter()
        for n in range(total // len(buf)):
            for page in range(0, len(buf), 4096):  # no two pages alike: nothing to dedupe
                struct.pack_into("<Q", buf, page, n)
            os.write(fd, buf)
        os.fsync(fd)
        return total / (time.perf_counter() - t0)
    finally:
        os.close(fd)
        buf.close()
        path.unlink()


def compress_floor(root: Path, threads: int | None = None) -> float:
    """Seconds to read, BLAKE3 and zstd-compress every file (level 1, one frame per 4 MiB
    read, a file whose first MiB does not shrink by a fifth kept raw: what ctrlz does to a
    large file), on as many threads as cores, writing nothing: the CPU a compressed first
    snapshot cannot do without. On a machine whose cores are hyper-threads of one another,
    this is where a first snapshot of compressible data runs out of room."""
    from concurrent.futures import ThreadPoolExecutor

    import zstandard

    def one(path: str) -> None:
        cctx = zstandard.ZstdCompressor(level=1)
        h = blake3.blake3()
        with open(path, "rb", buffering=0) as fh:
            first = fh.read(4 << 20)
            sample = first[:1 << 20]
            squeeze = len(cctx.compress(sample)) < len(sample) * 0.8
            chunk = first
            while chunk:
                h.update(chunk)
                if squeeze:
                    cctx.compress(chunk)
                chunk = fh.read(4 << 20)
        h.digest()

    paths = [e.path for e in walk(root) if e.is_file(follow_symlinks=False)]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads or os.cpu_count() or 2) as pool:
        list(pool.map(one, paths))
    return time.perf_counter() - t0
