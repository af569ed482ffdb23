"""The directories an extract (``restore --to DIR``) makes, and their removal when it fails.

Why: a failed extract used to leave behind the empty folder it had made (and any parents of
it), which a retry then met, and which looked like a result. What it made goes again; what
was there before never does. Only ``rmdir`` removes anything here, so a directory that holds
a file (a file the extract had put in place, or anyone else's) stays as it is.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from ...errors import RestoreError
from ...types import quote_path
from .actions import MKDIR, Action


def make(dirs: Sequence[bytes]) -> list[bytes]:
    """Create ``dirs`` and their missing parents; returns the ones this call made, each after
    its parent. A directory that appears meanwhile (someone else's) is not counted as made.
    If one cannot be made, what was made goes again and the error names it."""
    made: list[bytes] = []
    for d in dirs:
        missing: list[bytes] = []
        probe = d
        while probe not in (b"", b"/") and not os.path.lexists(probe):
            missing.append(probe)
            probe = os.path.dirname(probe)
        for m in reversed(missing):
            try:
                os.mkdir(m)
            except FileExistsError:
                continue
            except OSError as exc:
                remove(made)
                raise RestoreError(f"cannot make {quote_path(m)}: {exc.strerror or exc}; "
                                   "nothing was written") from exc
            made.append(m)
    return made


def by_plan(applied: Iterable[Action], roots: Sequence[bytes]) -> list[bytes]:
    """The directories an apply made inside the destination roots, deepest first (a plan
    makes a parent before its children)."""
    out = []
    for a in applied:
        if a.op == MKDIR:
            root, _, rel = a.path.partition(b"/")
            out.append(roots[int(root)] + b"/" + rel)
    return out[::-1]


def remove(made: Sequence[bytes], inner: Iterable[bytes] = ()) -> None:
    """After a failure: ``inner`` (what the apply made, deepest first), then the ``made``
    directories, each after its children. Each only while empty; an error leaves it (what
    cannot go stays, and the failure's own error is the one to report)."""
    for d in [*inner, *reversed(made)]:
        _rmdir(d)


def _rmdir(path: bytes) -> None:
    try:
        os.rmdir(path)
    except OSError:
        pass
