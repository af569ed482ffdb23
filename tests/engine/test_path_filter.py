"""The restore's path filter (:class:`~ctrlz.engine.restore.plan.PathFilter`) against its
definition: ``in`` when the path is a named one or lies below one, ``ancestor`` when a named
one lies below it, else ``out``, however the names nest or share prefixes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as hs

from ctrlz.engine.restore.plan import PathFilter

_part = hs.sampled_from([b"0", b"a", b"ab", b"a.b", b"b", b"a-"])
_path = hs.lists(_part, min_size=1, max_size=4).map(b"/".join)


def defined(filters: list[bytes], path: bytes) -> str:
    if any(path == f or path.startswith(f + b"/") for f in filters):
        return "in"
    if any(f.startswith(path + b"/") for f in filters):
        return "ancestor"
    return "out"


@given(hs.lists(_path, max_size=6), hs.lists(_path, min_size=1, max_size=10))
def test_the_filter_answers_as_its_definition(filters: list[bytes], paths: list[bytes]) -> None:
    state = PathFilter(filters).state
    for path in paths:
        assert state(path) == defined(filters, path), (filters, path)


def test_prefixes_that_are_not_folders_do_not_count() -> None:
    state = PathFilter([b"0/src/ab", b"0/lib"]).state
    assert state(b"0/src/a") == "out"
    assert state(b"0/src/ab/c") == "in"
    assert state(b"0/src") == state(b"0") == "ancestor"
    assert state(b"0/libs") == "out"
