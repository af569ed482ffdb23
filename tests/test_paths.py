"""The one inside-the-workspace path check (:mod:`ctrlz.paths`), on hostile trees.

The property test builds a real tree per example: a workspace, a directory beside it, and
symlinks among them (relative and absolute, into the workspace, out of it, to the root, to
themselves, in loops, and with names that are not UTF-8), then asks :func:`ctrlz.paths.where`
about paths through them (``..``, ``.``, trailing slashes, the root named through a link). Its
answer is checked against what the kernel and ``os.path.realpath`` say: a path is inside when
the directory a write to it lands in is a directory of the workspace (the same inode), and the
relative path it gives reaches that directory without a link.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctrlz.errors import PathOutsideWorkspace, UsageError
from ctrlz.paths import where, within, workspace_relative

NAMES = [b"a", b"b", b"\xff\xfe", b"..d", b"l"]
#: where a link may point; {ws}, {out} and {base} are the tree's absolute directories
TARGETS = [b"a", b"b", b"..", b"../..", b"../out", b"../../out", b".", b"l", b"a/l",
           b"{ws}", b"{ws}/a", b"{out}", b"{base}/alias", b"/", b"missing/deeper",
           b"\xff\xfe"]
ENTRY = st.tuples(st.sampled_from([b"ws", b"ws/a", b"ws/b", b"out"]), st.sampled_from(NAMES),
                  st.sampled_from(["dir", "file", "link"]), st.sampled_from(TARGETS))
PART = st.sampled_from([*NAMES, b"..", b".", b"", b"missing"])
START = st.sampled_from([b"", b"{ws}/", b"{base}/alias/", b"{out}/", b"{base}/",
                         b"{ws}/a/"])
CWD = st.sampled_from([b"ws", b"ws/a", b"out", b"alias"])


def build(base: bytes, entries: list[tuple[bytes, bytes, str, bytes]]) -> None:
    """The tree: ws/ (the workspace), out/ beside it, alias -> ws, then ``entries`` in order;
    one that cannot be made (its parent is missing, or the name is taken) is left out."""
    os.mkdir(base + b"/ws")
    os.mkdir(base + b"/out")
    os.symlink(base + b"/ws", base + b"/alias")
    for parent, name, kind, target in entries:
        full = base + b"/" + parent + b"/" + name
        try:
            if kind == "dir":
                os.mkdir(full)
            elif kind == "file":
                with open(full, "xb"):
                    pass
            else:
                os.symlink(expand(target, base), full)
        except OSError:
            continue


def expand(text: bytes, base: bytes) -> bytes:
    return (text.replace(b"{ws}", base + b"/ws").replace(b"{out}", base + b"/out")
            .replace(b"{base}", base))


def directories(root: bytes) -> set[tuple[int, int]]:
    """(device, inode) of the root and every directory below it, reached without a link."""
    found = set()
    for top, _dirs, _files in os.walk(root):
        st_ = os.lstat(top)
        found.add((st_.st_dev, st_.st_ino))
    return found


def stat_of(path: bytes) -> tuple[int, int] | None | str:
    """The kernel's answer for a directory at ``path``, links followed: its (device, inode),
    None when there is no directory there, "loop" for ELOOP."""
    try:
        st_ = os.stat(path)
    except OSError as exc:
        return "loop" if exc.errno == 40 else None
    return (st_.st_dev, st_.st_ino) if os.path.isdir(path) else None


@settings(max_examples=300, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(entries=st.lists(ENTRY, max_size=8), start=START, parts=st.lists(PART, min_size=1,
       max_size=5), cwd=CWD)
def test_a_write_is_inside_where_the_kernel_lands_it(
        entries: list[tuple[bytes, bytes, str, bytes]], start: bytes, parts: list[bytes],
        cwd: bytes) -> None:
    base = os.fsencode(os.path.realpath(tempfile.mkdtemp(prefix="ctrlz-paths-")))
    try:
        build(base, entries)
        root = base + b"/ws"
        path = expand(start, base) + b"/".join(parts)
        if not path:
            return
        here = base + b"/" + cwd
        found = where(path, root, here, on_disk=True, allow_root=False)
        # the same answer for the path as text (undecodable bytes as surrogate escapes)
        again = where(os.fsdecode(path), root, here, on_disk=True, allow_root=False)
        assert (again.rel, again.why, again.target) == (found.rel, found.why, found.target)
        full = path if path.startswith(b"/") else here + b"/" + path
        head, tail = os.path.split(full)
        whole = tail in (b"", b".", b"..")  # the path names a directory through its end
        landing = stat_of(full if whole else head)
        if landing == "loop":
            assert not found.inside, (path, found)
            return
        if found.inside:
            assert found.rel and b".." not in found.rel.split(b"/")
            assert b"" not in found.rel.split(b"/") and b"." not in found.rel.split(b"/")
            parent = os.path.dirname(found.rel)
            reached = root + (b"/" + parent if parent else b"")
            # the relative path reaches its directory without a link (what the capture's
            # O_NOFOLLOW walk demands), and it is where the write really lands
            assert os.path.realpath(reached) == reached, (path, found)
            if not whole:
                assert os.path.basename(found.rel) == tail
            if landing is not None:
                assert stat_of(root + b"/" + found.rel if whole else reached) == landing, (
                    path, found)
            else:  # nothing there yet: os.path.realpath says where it would be
                real = os.path.realpath(full if whole else head)
                assert real == (root + b"/" + found.rel if whole else reached), (path, found)
        elif landing is not None:
            in_root = landing in directories(root)
            if whole:  # the root itself is refused (allow_root=False)
                assert not in_root or landing == stat_of(root), (path, found)
            else:
                assert not in_root, (path, found)
        else:  # nothing there yet: os.path.realpath says where it would be
            real = os.path.realpath(full if whole else head)
            assert not within(real, root) or (whole and real == root), (path, found)
        if found.inside and not whole and os.path.islink(root + b"/" + found.rel):
            real = os.path.realpath(root + b"/" + found.rel)
            expected = (real[len(root) + 1:] if within(real, root) and real != root
                        else None)
            assert found.target == (None if expected == found.rel else expected)
        else:
            assert found.target is None
    finally:
        shutil.rmtree(base)


@settings(max_examples=300, deadline=None, database=None)
@given(start=st.sampled_from([b"", b"/ws/", b"/", b"/out/", b"/ws/a/"]),
       parts=st.lists(PART, min_size=1, max_size=6))
def test_a_name_is_read_as_text(start: bytes, parts: list[bytes]) -> None:
    """A name in the workspace (a path to restore) is lexical: ``..`` is resolved as text,
    nothing on disk is looked at, and what comes back is a plain relative path."""
    path = start + b"/".join(parts)
    if not path:
        return
    found = where(path, b"/ws", b"/ws/a")
    full = os.path.normpath(path if path.startswith(b"/") else b"/ws/a/" + path)
    assert found.inside == within(full, b"/ws")
    if found.inside:
        assert found.rel == (b"" if full == b"/ws" else full[4:])
        assert not {b"", b".", b".."} & set(found.rel.split(b"/")) or found.rel == b""


def test_the_refusals_say_why(tmp_path: os.PathLike[str]) -> None:
    root = os.fsencode(os.path.realpath(tmp_path))
    os.symlink(b"loop", root + b"/loop")
    assert where(root + b"/loop/x", root, on_disk=True).why.endswith(
        "goes through a loop of symlinks")
    assert "outside the workspace" in where(b"../x", root).why
    assert where(b"", root).why == "empty path"
    assert where(b"a\0b", root).why == "a path cannot contain a NUL byte"
    assert "lone surrogate" in where("\ud800", root).why
    assert where(b"a..b.txt", root).rel == b"a..b.txt"
    assert where(b".", root).rel == b"" and not where(b".", root, allow_root=False).inside
    with pytest.raises(PathOutsideWorkspace, match="is outside the workspace"):
        workspace_relative(root, b"/etc/passwd", root)
    with pytest.raises(UsageError, match="NUL"):
        workspace_relative(root, b"x\0", root)


def test_a_link_to_a_workspace_file_names_both(tmp_path: os.PathLike[str]) -> None:
    """A tool writes through a link: the link and its target are both named (the target
    only when it lies in the workspace)."""
    root = os.fsencode(os.path.realpath(tmp_path)) + b"/ws"
    os.makedirs(root + b"/packages/lib")
    os.symlink(b"packages/lib", root + b"/lib")
    os.symlink(b"packages/lib/f.txt", root + b"/f.txt")
    os.symlink(b"/etc/hostname", root + b"/out.txt")
    found = where(b"lib/f.txt", root, root, on_disk=True)
    assert (found.rel, found.target) == (b"packages/lib/f.txt", None)
    found = where(b"f.txt", root, root, on_disk=True)
    assert (found.rel, found.target) == (b"f.txt", b"packages/lib/f.txt")
    found = where(b"out.txt", root, root, on_disk=True)
    assert (found.rel, found.target) == (b"out.txt", None)
    # the lexical rule keeps the name, and leaves the link to the restore engine
    assert where(b"lib/f.txt", root, root).rel == b"lib/f.txt"


def test_within() -> None:
    assert within("/a/b", "/a") and within("/a", "/a") and within("/x", "/")
    assert not within("/ab", "/a") and not within(b"/ab", b"/a/")
    assert within(b"/a/b", b"/a/")
