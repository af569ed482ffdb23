"""gitignore files compiled as git matches them (``state/ignore/wildmatch.py`` over the grammar of
``state/ignore/globs.py``): unit tests of git's rules one by one, and hypothesis properties that
need
no git (the comparison with git itself is ``tests/test_gitignore_git.py``)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctrlz.state.ignore.exclude import Matcher, Rules
from ctrlz.state.ignore.wildmatch import compile_ignore


def ignored(text: bytes, path: bytes, is_dir: bool = False) -> bool:
    """Whether a root ``.gitignore`` holding ``text`` leaves ``path`` out."""
    files = {b".gitignore": text}
    return not Matcher(Rules(), files.get).covers(path, is_dir)


@pytest.mark.parametrize(("pattern", "path", "is_dir", "expected"), [
    (b"*.o", b"a/b/x.o", False, True),  # no slash: any depth
    (b"/x.o", b"a/x.o", False, False),  # a leading slash anchors
    (b"/x.o", b"x.o", False, True),
    (b"a/*.o", b"a/b/x.o", False, False),  # '*' never crosses '/' in a path pattern
    (b"a/**/x.o", b"a/b/c/x.o", False, True),
    (b"a/**/x.o", b"a/x.o", False, True),  # '**/' matches zero directories too
    (b"**/x.o", b"q/x.o", False, True),
    (b"a/**", b"a/b/c", False, True),
    (b"build/", b"build", False, False),  # a trailing slash: directories only
    (b"build/", b"build", True, True),
    (b"build/", b"build/f", False, True),  # everything below an excluded directory
    (b"x?.c", b"xy.c", False, True),
    (b"x?.c", b"x/.c", False, False),
    (b"[ab].c", b"b.c", False, True),
    (b"[!ab].c", b"b.c", False, False),
    (b"[^ab].c", b"c.c", False, True),
    (b"[a-c].c", b"b.c", False, True),
    (b"[[:digit:]].c", b"7.c", False, True),
    (b"[[:digit:]].c", b"x.c", False, False),
    (b"\\#x", b"#x", False, True),  # an escaped '#' is a name, not a comment
    (b"#x", b"#x", False, False),
    (b"\\!x", b"!x", False, True),
    (b"\\*", b"a", False, False),  # an escaped star is a star
    (b"\\*", b"*", False, True),
    (b"x\\ ", b"x ", False, True),  # an escaped trailing space stays
    (b"x  ", b"x", False, True),  # unescaped trailing spaces go
])
def test_git_pattern_rules(pattern: bytes, path: bytes, is_dir: bool, expected: bool) -> None:
    assert ignored(pattern + b"\n", path, is_dir) is expected


def test_the_last_matching_pattern_decides() -> None:
    text = b"*.log\n!keep.log\n"
    assert ignored(text, b"a.log") and not ignored(text, b"keep.log")
    assert ignored(b"!keep.log\n*.log\n", b"keep.log")


def test_a_negation_cannot_reach_into_an_excluded_directory() -> None:
    text = b"out/\n!out/keep\n"
    assert ignored(text, b"out/keep")
    text = b"out/*\n!out/keep\n"  # the directory itself is not excluded: its entries are
    assert not ignored(text, b"out/keep") and ignored(text, b"out/other")


def test_comments_blank_lines_crlf_and_a_bom_are_read_as_git_reads_them() -> None:
    text = b"\xef\xbb\xbf*.tmp\r\n\r\n# *.c\r\n"
    assert ignored(text, b"x.tmp") and not ignored(text, b"x.c")


def test_a_file_is_compiled_once_per_content() -> None:
    assert compile_ignore(b"*.o\n") is compile_ignore(b"*.o\n")
    assert compile_ignore(b"# nothing\n\n").empty


# -- properties --------------------------------------------------------------------------------

names = st.binary(min_size=1, max_size=8).filter(
    lambda n: b"/" not in n and b"\0" not in n and n not in (b".", b"..", b".git")
    and b"\n" not in n and b"\r" not in n and not n.startswith(b".ctrlz-tmp-")
    and not n.startswith(b"\xef\xbb\xbf"))  # on a file's first line, git drops a BOM


def escaped(name: bytes) -> bytes:
    """``name`` as a pattern that matches only itself: every byte git would read as syntax
    escaped (a trailing space too)."""
    return b"".join(b"\\" + bytes([c]) if bytes([c]) in b"\\*?[]!# " else bytes([c])
                    for c in name)


@settings(max_examples=300, deadline=None)
@given(names, names)
def test_an_escaped_name_ignores_that_name_and_no_other(name: bytes, other: bytes) -> None:
    text = escaped(name) + b"\n"
    assert ignored(text, name)
    assert ignored(text, b"d/" + name)
    assert ignored(text, other) is (other == name)


@settings(max_examples=300, deadline=None)
@given(names, st.lists(names, min_size=1, max_size=5))
def test_a_star_and_a_literal_is_a_suffix_test(ext: bytes, paths: list[bytes]) -> None:
    """``*<literal>`` against a name is ``endswith``, whatever the bytes."""
    text = b"*" + escaped(ext) + b"\n"
    for p in paths:
        assert ignored(text, p) is p.endswith(ext)


@settings(max_examples=200, deadline=None)
@given(names, st.lists(names, min_size=1, max_size=4))
def test_negating_a_pattern_again_puts_back_what_it_took(name: bytes, dirs: list[bytes]) -> None:
    path = b"/".join([*dirs, name])
    assert ignored(escaped(name) + b"\n", path)
    assert not ignored(escaped(name) + b"\n!" + escaped(name) + b"\n", path)
