"""Trees known to be complete on a remote: a local cache that spares a push its full walk.

A push must send every object its snapshots reach that the remote lacks. Finding them by
walking every tree of every snapshot costs time that grows with the workspace, not with the
change. This cache, one file per remote in the local store
(``<store>/remote-cache/<name>/complete``, never in the workspace), lists trees whose *closure*
(the tree and everything below it) is on the remote, and the packs that closure sits in. A push
does not enter a tree listed here, so it walks only the trees that are new since the last push.

What keeps it correct (``docs/remote.md`` says it for people; :mod:`ctrlz.engine.remote.push`
applies it):

* a push adds entries only after its packs and indexes are uploaded *and* the ref naming its
  snapshots is written; an interrupted push adds nothing;
* the file names the remote it belongs to: its URL and the digest of its ``config`` (an
  encrypted remote's config holds a random salt, so a remote made again at the same URL, or
  with another key, is another remote and the file is ignored);
* it is used only while every pack it names is on the remote (listed, with its index) and not
  condemned by gc; otherwise it is dropped whole and the push walks everything again, which
  refills it. The push then relies on those packs like on any object it reuses, so the
  pusher's half of the gc rule covers them too.

Losing the file costs one full walk, never correctness, so it is written without fsync; a
digest at its end makes a torn or stale-garbage file read as empty.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from ..fsio.atomic import atomic_write_bytes

MAGIC = b"CTZKNOWN1\n"
#: more trees than this and the file keeps only what the last push walked or reused
MAX_TREES = 250_000


@dataclass
class KnownTrees:
    """Trees whose closure is on the remote, and every pack those closures use."""

    trees: set[bytes] = field(default_factory=set)
    packs: set[bytes] = field(default_factory=set)


def load_known(path: Path, remote: str) -> KnownTrees:
    """The cache at ``path`` if it belongs to ``remote`` (an identity string), else empty."""
    try:
        raw = path.read_bytes()
    except OSError:
        return KnownTrees()
    body, digest = raw[:-32], raw[-32:]
    if not body.startswith(MAGIC) or hashlib.blake2b(body, digest_size=32).digest() != digest:
        return KnownTrees()
    head_end = body.find(b"\n", len(MAGIC))
    try:
        head = json.loads(body[len(MAGIC):head_end])
        if head.get("remote") != remote:
            return KnownTrees()
        width = int(head["width"])
        packs = {bytes.fromhex(p) for p in head["packs"]}
    except (ValueError, KeyError, TypeError, AttributeError):
        return KnownTrees()
    ids = body[head_end + 1:]
    if width <= 0 or len(ids) % width:
        return KnownTrees()
    return KnownTrees({ids[i:i + width] for i in range(0, len(ids), width)}, packs)


def save_known(path: Path, remote: str, known: KnownTrees) -> None:
    """Replace the cache at ``path`` (a lost race with another push only loses entries)."""
    width = len(next(iter(known.trees))) if known.trees else 32
    trees = [t for t in known.trees if len(t) == width]
    head = json.dumps({"remote": remote, "width": width,
                       "packs": sorted(p.hex() for p in known.packs)}).encode()
    body = b"".join([MAGIC, head, b"\n", *sorted(trees)])
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, body + hashlib.blake2b(body, digest_size=32).digest(),
                       durable=False)


def forget_known(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass
