"""Which paths a snapshot covers (``state/ignore/exclude.py``): ctrlz's own rules (force-includes,
patterns, globs, its temp files, the store) and how they meet the ignore files. Unit tests, and
a hypothesis property holding :meth:`Matcher.covers` (what restores use) to the order the
module's docstring gives, and to the scanner's walk over a real tree."""

from __future__ import annotations

import fnmatch
import os
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ctrlz.state.ignore.exclude import Matcher, Rules


def matcher(rules: Rules, files: dict[bytes, bytes] | None = None,
            internal: frozenset[bytes] = frozenset()) -> Matcher:
    return Matcher(rules, (files or {}).get, internal)


def test_force_include_wins_over_patterns_globs_and_ignore_files() -> None:
    m = matcher(Rules(exclude_patterns=("node_modules",), exclude_globs=("*.log",),
                      force_include=("keep",)), {b".gitignore": b"keep/\n*.tmp\n"})
    assert not m.covers(b"node_modules/x")
    assert not m.covers(b"a.log") and not m.covers(b"a.tmp")
    assert m.covers(b"keep/a.log", ) and m.covers(b"keep/x.tmp")
    assert m.covers(b"src/keep/node_modules/y", is_dir=True)


def test_a_pattern_is_a_component_or_with_a_slash_a_substring() -> None:
    m = matcher(Rules(exclude_patterns=("build", "a/b")))
    assert not m.covers(b"x/build/y") and m.covers(b"x/builder")
    assert not m.covers(b"a/b/c") and not m.covers(b"xa/by")  # a substring, as seed 002 says
    assert m.covers(b"a/c")


def test_globs_match_the_file_name_only() -> None:
    m = matcher(Rules(exclude_globs=("*.pyc", "tmp?")))
    assert not m.covers(b"a/b/x.pyc") and not m.covers(b"tmp1")
    assert m.covers(b"tmp12") and m.covers(b"x.pyc.txt")


def test_ctrlz_temp_files_and_the_store_are_never_covered() -> None:
    m = matcher(Rules(force_include=("w",)), internal=frozenset({b".ctrlz"}))
    assert not m.covers(b"w/.ctrlz-tmp-abc")
    assert not m.covers(b".ctrlz/objects", is_dir=True)
    assert m.covers(b".ctrlz", is_dir=False)  # only the directory is the store


def test_gitignore_can_be_turned_off_and_never_applies_inside_git() -> None:
    files = {b".gitignore": b"*\n!.gitignore\n", b".git/info/exclude": b"x\n"}
    assert not matcher(Rules(), files).covers(b"a")
    assert matcher(Rules(use_gitignore=False), files).covers(b"a")
    assert matcher(Rules(), {b".gitignore": b"*.o\n"}).covers(b".git/objects/ab.o")
    assert not matcher(Rules(), {b".git/info/exclude": b"x\n"}).covers(b"d/x")


def test_a_deeper_ignore_file_takes_precedence() -> None:
    files = {b".gitignore": b"*.gen\n", b"src/.gitignore": b"!keep.gen\n"}
    m = matcher(Rules(), files)
    assert not m.covers(b"a.gen") and not m.covers(b"src/x.gen")
    assert m.covers(b"src/keep.gen") and not m.covers(b"keep.gen")


def test_rules_round_trip_through_json_and_their_fingerprint_is_stable() -> None:
    r = Rules(False, ("a",), ("*.b",), ("c",))
    assert Rules.from_json(r.to_json()) == r
    assert r.fingerprint() == Rules.from_json(r.to_json()).fingerprint() != Rules().fingerprint()
    assert Rules.from_json({}) == Rules()


# -- properties --------------------------------------------------------------------------------

WORDS = [b"a", b"b", b"build", b"x.log", b"keep", b".ctrlz-tmp-1"]
paths = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(b"/".join)
rules = st.builds(
    lambda pats, globs, force: Rules(False, tuple(pats), tuple(globs), tuple(force)),
    st.lists(st.sampled_from(["build", "a/b", "b/", "x.log"]), max_size=2),
    st.lists(st.sampled_from(["*.log", "b*", "[ak]*"]), max_size=2),
    st.lists(st.sampled_from(["keep", "a/keep", "b"]), max_size=2))


def model(r: Rules, rel: bytes, is_dir: bool) -> bool:
    """The module docstring's order, written out plainly: whether ``rel`` is covered."""
    parts = rel.split(b"/")
    forced = False
    for i, name in enumerate(parts):
        prefix = b"/".join(parts[:i + 1])
        if name.startswith(b".ctrlz-tmp-"):
            return False

        def hit(patterns: tuple[str, ...], name: bytes = name, prefix: bytes = prefix) -> bool:
            return any((os.fsencode(p) == name) if "/" not in p else os.fsencode(p) in prefix
                       for p in patterns if p)

        forced = forced or hit(r.force_include)
        if forced:
            continue
        if hit(r.exclude_patterns) or any(
                fnmatch.fnmatchcase(os.fsdecode(name), g) for g in r.exclude_globs):
            return False
    return True


@settings(max_examples=400, deadline=None)
@given(rules, paths, st.booleans())
def test_covers_follows_the_documented_order(r: Rules, rel: bytes, is_dir: bool) -> None:
    assert matcher(r).covers(rel, is_dir) is model(r, rel, is_dir)


@settings(max_examples=60, deadline=None)
@given(rules, st.lists(paths, min_size=1, max_size=8))
def test_covers_agrees_with_the_scanners_walk(r: Rules, files: list[bytes]) -> None:
    """What the walk keeps of a real tree is exactly what ``covers`` says, path by path."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for f in files:
            full = root / os.fsdecode(f)
            if any(p.is_file() for p in [*full.parents, full] if root in p.parents):
                continue  # a file already stands where a directory would go
            full.parent.mkdir(parents=True, exist_ok=True)
            if not full.is_dir():
                full.write_bytes(b"x")
        m = matcher(r)
        every = {os.fsencode(os.path.relpath(os.path.join(d, n), root)): n in dirs
                 for d, dirs, names in os.walk(root) for n in [*dirs, *names]}
        assert walk(m, root) == {p for p, is_dir in every.items() if m.covers(p, is_dir)}


def walk(m: Matcher, root: Path) -> set[bytes]:
    """The scanner's calls (``state/scan/walk.py``): ``may_exclude`` per directory,
    ``excluded`` per entry, excluded directories never entered."""
    base = os.fsencode(root)
    kept: set[bytes] = set()
    stack = [(b"", m.root_rules)]
    while stack:
        rel, d = stack.pop()
        check = m.may_exclude(d)
        for de in os.scandir(base + b"/" + rel if rel else base):
            name: bytes = de.name  # type: ignore[assignment]
            path = rel + b"/" + name if rel else name
            is_dir = de.is_dir(follow_symlinks=False)
            if (check or name.startswith(b".ctrlz-tmp-")) and m.excluded(d, name, path, is_dir):
                continue
            kept.add(path)
            if is_dir:
                stack.append((path, m.enter(d, name, path, has_ignore=False)))
    return kept
