"""Pure rules that turn exec events into snapshot triggers (no I/O, easy to test).

The build list is Moat's. A pattern matches when the command line starts with its words, so
``make`` matches ``make``, ``make all`` and ``make -j4 test``; ``npm run build`` matches only
that script.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

BUILD_COMMANDS = (
    "npm run build", "npm run compile",
    "yarn build",
    "go build", "go install",
    "make", "make all", "make build",
    "cargo build",
    "mvn package", "mvn compile",
    "gradle build",
)
_BUILD_WORDS = tuple(tuple(p.split()) for p in BUILD_COMMANDS)

#: options of git itself that take a value (``git -C dir commit``)
_GIT_VALUE_OPTIONS = {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path"}


def _words(argv: Sequence[str]) -> list[str]:
    if not argv:
        return []
    return [os.path.basename(argv[0]), *argv[1:]]


def is_build(argv: Sequence[str]) -> bool:
    words = _words(argv)
    return any(tuple(words[: len(p)]) == p for p in _BUILD_WORDS)


def is_git_commit(argv: Sequence[str]) -> bool:
    words = _words(argv)
    if not words or words[0] != "git":
        return False
    i = 1
    while i < len(words) and words[i].startswith("-"):
        i += 2 if words[i] in _GIT_VALUE_OPTIONS else 1
    return i < len(words) and words[i] == "commit"


def is_git_ref_change(rel: bytes) -> bool:
    """Paths under ``.git`` whose change means a new commit (or a moved branch)."""
    if not rel.startswith(b".git/"):
        return False
    tail = rel[len(b".git/"):]
    return tail in (b"HEAD", b"packed-refs", b"logs/HEAD") or tail.startswith(b"refs/heads/")
