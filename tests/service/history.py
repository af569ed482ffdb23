"""A workspace with thousands of snapshots, made quickly through the real library.

The dashboard's timeline must stay usable with a long history, so the tests and
``bench/service.py`` need one. Each snapshot here is a real ``Workspace.snapshot`` of a small
tree (a few files change between some of them, so most snapshots reuse every cached tree and
cost a couple of milliseconds), of the kinds an agent's month produces: mostly ``auto`` and
``tool``, some ``idle``, ``build`` and ``git``, a labelled ``manual`` one now and then, a few
pinned.

The library stamps a snapshot with the wall clock, and a test cannot wait a month; so once they
are taken, :func:`make_history` spreads their ``created_ns`` evenly over ``days`` (keeping
their order, which is all the catalog's ordering and the parent chain rely on). That is the one
thing done to the store behind the library's back, and it only moves time stamps.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

#: pools big enough that retention keeps every snapshot the fixture takes
CONFIG = ("auto_max = 1000000\nmanual_max = 1000000\ntool_max = 1000000\n"
          "safety_max = 1000000\nmax_count = 1000000\n")
#: the kinds of snapshot, in the proportions a long agent history has
CYCLE = ("auto", "tool", "auto", "tool", "idle", "auto", "tool", "build", "auto", "tool",
         "auto", "tool", "git", "auto", "tool", "auto")


def make_tree(root: Path, files: int = 12) -> None:
    """A small project: a few sources, a README, the pools' configuration."""
    (root / "src").mkdir(parents=True, exist_ok=True)
    (root / "README.md").write_text("# webapp\n\nA small web application.\n")
    (root / ".ctrlz.toml").write_text(CONFIG)
    for i in range(files):
        (root / "src" / f"module_{i}.py").write_text(f"def handler_{i}(request):\n"
                                                     f"    return {i}\n")


def make_history(root: Path, home: Path, count: int, days: float = 30.0) -> list[str]:
    """Protect ``root`` (made if needed) and take ``count`` snapshots; their ids, oldest
    first. A file changes before every third snapshot, one is created every 40th and one
    removed every 97th, so the changes column and the dots' sizes vary."""
    from ctrlz.workspace import Workspace

    make_tree(root)
    ids: list[str] = []
    with Workspace.init(root, home=home) as ws:
        for i in range(count):
            if i % 3 == 0:
                n = (i // 3) % 12
                (root / "src" / f"module_{n}.py").write_text(
                    f"def handler_{n}(request):\n    return {i}\n" + "# note\n" * (i % 50))
            if i % 40 == 39:
                (root / "src" / f"feature_{i}.py").write_text(f"FEATURE = {i}\n" * 20)
            if i % 97 == 96:
                gone = sorted((root / "src").glob("feature_*.py"))
                if gone:
                    gone[0].unlink()
            kind = CYCLE[i % len(CYCLE)]
            label = None
            if i % 250 == 0:
                kind, label = "manual", f"milestone {i // 250}"
            snap = ws.snapshot(type=kind, label=label, pinned=i % 1000 == 0)
            ids.append(snap.id)
        store = ws.repo.path
    spread(Path(store) / "catalog.db", ids, days)
    return ids


def spread(catalog: Path, ids: list[str], days: float) -> None:
    """Give the snapshots ``ids`` (oldest first) times evenly spaced over the last ``days``,
    ending a minute ago, with a little jitter so the picture is not a ruler."""
    if not ids:
        return
    step = int(days * 86_400 * 10**9 / max(1, len(ids)))
    end = time.time_ns() - 60 * 10**9 - step
    db = sqlite3.connect(catalog, timeout=30)
    try:
        with db:
            db.executemany("UPDATE snapshots SET created_ns = ? WHERE id = ?",
                           [(end - (len(ids) - 1 - i) * step + (i * 7919 % 13) * step // 20,
                             sid) for i, sid in enumerate(ids)])
    finally:
        db.close()
