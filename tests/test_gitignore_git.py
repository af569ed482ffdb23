"""ctrlz's gitignore matching against git itself.

Every path of a tree is asked of ``git check-ignore --no-index`` (in a scratch repository,
with no user or system configuration) and of ctrlz: through :meth:`Matcher.covers` (what
restores and the daemon use), through the scanner's sequence of ``enter``/``may_exclude``/
``excluded`` calls (which never enters an excluded directory), and, for the chosen cases and
git's tree, through a real snapshot. The answers must be the same for every path: files,
directories and symlinks (which dir-only patterns never match).

Trees come from hypothesis (names full of pattern syntax, nested ``.gitignore`` files at several
depths, ``.git/info/exclude``, patterns with negation, ``**``, anchoring, directory-only
slashes, classes, escapes, trailing spaces, CRLF and BOMs) and from git's own source tree with
build products laid over it (``CTRLZ_GIT_SOURCE``, else the tree ``make bench`` unpacks from
Debian's archive, fetched when missing; skipped, with the reason, when it cannot be).
"""

from __future__ import annotations

import importlib.util
import os
import random
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from ctrlz import Workspace
from ctrlz.state.ignore.exclude import Matcher, Rules
from ctrlz.state.ignore.globs import parse_lines
from ctrlz.state.trees import DIR

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

# -- asking git --------------------------------------------------------------------------------


def git_env(home: Path) -> dict[str, str]:
    """No system, global or XDG configuration: only the tree's own ignore files count."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, HOME=str(home),
               XDG_CONFIG_HOME=str(home / "xdg"), LC_ALL="C")
    return env


def git_init(root: Path, home: Path) -> None:
    """An empty repository (no template: no hooks, no sample info/exclude)."""
    subprocess.run(["git", "init", "-q", "--template=", str(root)], check=True,
                   env=git_env(home))


def git_ignored(root: Path, paths: list[bytes], home: Path) -> set[bytes]:
    """The paths git says are ignored (inside an ignored directory counts)."""
    out = subprocess.run(["git", "check-ignore", "--no-index", "--stdin", "-z"], cwd=root,
                         input=b"".join(p + b"\0" for p in paths), capture_output=True,
                         env=git_env(home))
    assert out.returncode in (0, 1), out.stderr.decode(errors="replace")
    return {p for p in out.stdout.split(b"\0") if p}


def git_ignored_files(root: Path, home: Path) -> set[bytes]:
    """The files git's own directory walk leaves out (``ls-files -o -i --exclude-standard``):
    a second answer from git, through dir.c's walk rather than one path at a time."""
    out = subprocess.run(["git", "ls-files", "-z", "-o", "-i", "--exclude-standard"], cwd=root,
                         capture_output=True, env=git_env(home), check=True)
    return {p for p in out.stdout.split(b"\0") if p}


# -- asking ctrlz ------------------------------------------------------------------------------


def all_paths(root: Path) -> dict[bytes, bool]:
    """Every path below ``root`` (not inside the root's .git) -> whether it is a directory
    (as lstat sees it: a symlink is never one)."""
    base = os.fsencode(root)
    out: dict[bytes, bool] = {}
    stack = [b""]
    while stack:
        rel = stack.pop()
        for de in os.scandir(base + b"/" + rel if rel else base):
            name: bytes = de.name  # type: ignore[assignment]
            path = rel + b"/" + name if rel else name
            if path == b".git":
                continue
            is_dir = de.is_dir(follow_symlinks=False)
            out[path] = is_dir
            if is_dir:
                stack.append(path)
    return out


def disk_reader(root: Path):  # type: ignore[no-untyped-def]
    base = os.fsencode(root)

    def read(rel: bytes) -> bytes | None:
        path = base + b"/" + rel
        try:
            if not stat.S_ISREG(os.lstat(path).st_mode):
                return None
            with open(path, "rb") as f:
                return f.read()
        except OSError:
            return None

    return read


def walk_paths(root: Path) -> set[bytes]:
    """What the scanner's walk keeps, driven through the same :class:`Matcher` calls as
    ``state/scan/walk.py`` (a directory's rules come from ``enter(..., has_ignore=False)`` and
    are replaced when its listing shows a .gitignore; excluded directories are not entered);
    a real snapshot costs ~0.1 s, this a few ms."""
    m = Matcher(Rules(), disk_reader(root))
    base = os.fsencode(root)
    kept: set[bytes] = set()
    stack = [(b"", m.root_rules, m.root_rules)]
    while stack:
        rel, rules, parent = stack.pop()
        listing = {de.name: de.is_dir(follow_symlinks=False)  # type: ignore[misc]
                   for de in os.scandir(base + b"/" + rel if rel else base)}
        if rel and b".gitignore" in listing and not rules.in_git:
            rules = m.enter(parent, rel.rpartition(b"/")[2], rel, has_ignore=True)
        check = m.may_exclude(rules)
        for name, is_dir in listing.items():
            path = rel + b"/" + name if rel else name
            if path == b".git" or (check and m.excluded(rules, name, path, is_dir)):
                continue
            kept.add(path)
            if is_dir:
                stack.append((path, m.enter(rules, name, path, has_ignore=False), rules))
    return kept


def snapshot_paths(root: Path) -> set[bytes]:
    """What a real snapshot of ``root`` captures, the root's .git left out."""
    out: set[bytes] = set()
    with Workspace.init(root) as ws:
        snap = ws.snapshot()
        stack = [(b"", e) for e in ws.repo.tree(snap.root)]
        while stack:
            prefix, e = stack.pop()
            path = prefix + b"/" + e.name if prefix else e.name
            out.add(path)
            if e.kind == DIR:
                stack += [(path, c) for c in ws.repo.tree(e.oid)]
    return {p[2:] for p in out if p.startswith(b"0/") and p != b"0/.git"
            and not p.startswith(b"0/.git/")}


def compare(root: Path, home: Path, snapshot: bool = True) -> None:
    """Assert ctrlz and git agree on every path of ``root`` (a git repository): through
    ``covers``, through the scanner's walk, and (``snapshot``) in a real snapshot."""
    paths = all_paths(root)
    ignored = git_ignored(root, sorted(paths), home)
    m = Matcher(Rules(), disk_reader(root))
    wrong = {p: ("git ignores" if p in ignored else "git keeps")
             for p, is_dir in paths.items() if (not m.covers(p, is_dir)) != (p in ignored)}
    assert not wrong, f"{describe(root)}\nmismatches: {sorted(wrong.items())[:20]}"
    expected = set(paths) - ignored
    files_left_out = {p for p, is_dir in paths.items() if not is_dir and p not in expected}
    assert git_ignored_files(root, home) == files_left_out, describe(root)
    for how, captured in (("walk", walk_paths(root)),
                          ("snapshot", snapshot_paths(root) if snapshot else expected)):
        assert captured == expected, (
            f"{describe(root)}\n{how} only: {sorted(captured - expected)[:20]}\n"
            f"git only: {sorted(expected - captured)[:20]}")


def describe(root: Path) -> str:
    """The ignore files of a failing tree, for the report."""
    lines = []
    for path in sorted(root.rglob(".gitignore")) + [root / ".git/info/exclude"]:
        if path.is_file():
            lines.append(f"{path.relative_to(root)}: {path.read_bytes()!r}")
    return "\n".join(lines)


# -- generated trees ---------------------------------------------------------------------------

#: names that collide with each other and with pattern syntax
NAMES = [b"a", b"b", b"ab", b"ba", b"abc", b"a.o", b"b.o", b"a.txt", b"x y", b"x ", b"A",
         b"\xc3\xa9", b"a\xc3\xa9", b"[a]", b"a*", b"?", b"!a", b"#a", b"a\\b", b"-", b".a",
         b"a]", b"build", b"b.o.json", b"a-b", b"\tt", b"t\t", b"a[b", b"^", b"B"]

#: pattern pieces beyond the literal names
PIECES = [b"*", b"**", b"***", b"?", b"??", b"a*", b"*a", b"*.o", b"a?", b"*b*", b"a*c",
          b"[ab]", b"[!a]", b"[^a]", b"[a-c]", b"[c-a]", b"[]a]", b"[!]a]", b"[a-]", b"[-a]",
          b"[\\]]", b"[\\a-c]", b"[a-\\c]", b"[[:alpha:]]", b"[[:digit:][:punct:]]",
          b"[[:space:]]", b"[[:upper:]]", b"[![:lower:]]", b"[[:graph:]]", b"[[:print:]]",
          b"[[:cntrl:]]", b"[[:blank:]]", b"[[:xdigit:]]", b"[[:alnum:]]", b"[[:foo:]]",
          b"[[:a]", b"[[:]", b"[a-c-e]", b"[", b"[a", b"]", b"\\*", b"\\?", b"\\[a]",
          b"a**", b"**a", b"a**b", b"\\", b"\\a", b"*\xc3?", b"?\xa9", b"[\xc3]*", b"[/]",
          b"a[/]b", b"[!/]"]


def classes(name: bytes) -> list[bytes]:
    """Patterns with a class for ``name``'s first byte that match it, or just miss it: both
    ends of ranges, negations spelled both ways."""
    c, rest = name[0], escape(name[1:])
    out = []
    for lo, hi in ((c - 1, c), (c, c + 1), (c + 1, c + 2), (c - 2, c - 1)):
        if lo > 0 and hi < 256:
            out.append(b"[\\" + bytes((lo,)) + b"-\\" + bytes((hi,)) + b"]" + rest)
    other = b"z" if c != 0x7A else b"y"
    out += [b"[!" + other + b"]" + rest, b"[^" + other + b"]" + rest,
            b"[^\\" + bytes((c,)) + b"]" + rest, b"[" + other + b"\\" + bytes((c,)) + b"]" + rest]
    return out


def escape(name: bytes) -> bytes:
    out = bytearray()
    for c in name:
        if c in b"*?[\\":
            out.append(0x5C)
        out.append(c)
    if out[:1] in (b"!", b"#"):
        out[:0] = b"\\"
    if out.endswith(b" "):
        out[-1:] = b"\\ "
    return bytes(out)


#: the alphabet of raw pattern noise
NOISE = b"ab*?[]!^-/\\ :#\xc3"

segment = st.one_of(st.sampled_from(NAMES).map(escape), st.sampled_from(NAMES),
                    st.sampled_from(PIECES))


def component(draw: st.DrawFn, name: bytes) -> bytes:
    """A pattern component that may match ``name``: itself, escaped, or with wildcards."""
    how = draw(st.integers(0, 8))
    if how == 0:
        return name
    if how == 1:
        return b"*"
    if how == 2:
        return b"?" * len(name)
    if how == 3:
        return escape(name[:1]) + b"*"
    if how == 4:
        return b"*" + escape(name[-1:])
    if how == 5:
        return b"[" + escape(name[:1]) + b"x]" + escape(name[1:])
    if how == 6:
        return draw(st.sampled_from(classes(name)))
    return escape(name)


@st.composite
def patterns(draw: st.DrawFn, paths: list[list[bytes]]) -> bytes:
    """A pattern line: built from a path of the tree (relative to the ignore file's
    directory) so that it often matches, from pattern pieces, or raw syntax noise."""
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(st.binary(max_size=8).map(lambda b: bytes(NOISE[c % len(NOISE)] for c in b)))
    if kind <= 6 and paths:
        comps = draw(st.sampled_from(paths))
        start = draw(st.integers(0, len(comps) - 1))
        segs = [component(draw, c) for c in comps[start:]]
        if start and draw(st.booleans()):
            segs = [b"**"] + segs
        elif start:
            segs = [b"*"] * start + segs
        if len(segs) > 1 and draw(st.integers(0, 3)) == 0:
            cut = draw(st.integers(1, len(segs) - 1))
            segs = segs[:cut] + [b"**"] + segs[cut + 1:]
    else:
        segs = draw(st.lists(segment, min_size=1, max_size=draw(st.sampled_from([1, 1, 2, 3]))))
    p = b"/".join(segs)
    if draw(st.booleans()):
        p = b"/" + p
    elif draw(st.integers(0, 4)) == 0:
        p = b"**/" + p
    if draw(st.integers(0, 5)) == 0:
        p += b"/**"
    if draw(st.integers(0, 3)) == 0:
        p += b"/"
    if draw(st.integers(0, 4)) == 0:
        p = b"!" + p
    p += draw(st.sampled_from([b""] * 8 + [b" ", b"  ", b"\\ ", b"\t", b"/ "]))
    return p


@st.composite
def ignore_file(draw: st.DrawFn, paths: list[list[bytes]]) -> bytes:
    lines = draw(st.lists(st.one_of(patterns(paths), st.sampled_from(
        [b"", b"# comment", b"#", b"  ", b"\r", b"!", b"/", b"\\#a", b"\\!a", b"!*", b"*"])),
        min_size=2, max_size=10))
    eol = draw(st.sampled_from([b"\n", b"\n", b"\r\n"]))
    text = eol.join(lines)
    if draw(st.booleans()):
        text += eol
    if draw(st.integers(0, 9)) == 0:
        text = b"\xef\xbb\xbf" + text
    return text


FILE = None
LINK = "link"  # a symlink to its own directory: never a directory to git or ctrlz


def directories(children: st.SearchStrategy) -> st.SearchStrategy:
    """A directory of one to four entries. A named function, not a lambda: hypothesis reads a
    lambda's source to check that it recurses, and misreads this one in a multi-line call."""
    return st.dictionaries(st.sampled_from(NAMES), children, min_size=1, max_size=4)


tree_shape = st.recursive(st.sampled_from([FILE, FILE, FILE, LINK]), directories, max_leaves=24)


@st.composite
def trees(draw: st.DrawFn) -> tuple[dict, dict[bytes, bytes]]:
    """(shape, ignore files by path): a dict is a directory, None a file, LINK a symlink."""
    shape = draw(st.dictionaries(st.sampled_from(NAMES), tree_shape, min_size=1, max_size=5))
    dirs = [b""]
    paths: list[list[bytes]] = []
    stack: list[tuple[list[bytes], dict]] = [([], shape)]
    while stack:
        comps, node = stack.pop()
        for name, child in node.items():
            paths.append(comps + [name])
            if isinstance(child, dict):
                dirs.append(b"/".join(comps + [name]))
                stack.append((comps + [name], child))
    ignores: dict[bytes, bytes] = {}
    chosen = draw(st.lists(st.sampled_from(dirs), max_size=4, unique=True))
    if draw(st.integers(0, 3)) and b"" not in chosen:
        chosen.append(b"")  # most trees have a top-level .gitignore
    for d in chosen:
        depth = d.count(b"/") + 1 if d else 0
        below = [p[depth:] for p in paths if len(p) > depth and b"/".join(p[:depth]) == d]
        ignores[d + b"/.gitignore" if d else b".gitignore"] = draw(ignore_file(below))
    if draw(st.integers(0, 3)) == 0:
        ignores[b".git/info/exclude"] = draw(ignore_file(paths))
    return shape, ignores


def random_tree(rng: random.Random) -> tuple[dict, dict[bytes, bytes]]:
    """A denser tree than :func:`trees` draws: hypothesis's own generation favours small and
    repeated examples, where most patterns match nothing. Here most lines come from the
    tree's own paths, so ignored, re-included and kept paths mix in nearly every example."""

    def subtree(depth: int) -> dict:
        return {rng.choice(NAMES): (subtree(depth + 1) if depth < 3 and rng.random() < 0.4
                                    else LINK if rng.random() < 0.1 else FILE)
                for _ in range(rng.randint(1, 5))}

    shape = subtree(0)
    paths: list[list[bytes]] = []
    dirs = [b""]
    stack: list[tuple[list[bytes], dict]] = [([], shape)]
    while stack:
        comps, node = stack.pop()
        for name, child in node.items():
            paths.append(comps + [name])
            if isinstance(child, dict):
                stack.append((comps + [name], child))
                if rng.random() < 0.4:
                    dirs.append(b"/".join(comps + [name]))

    def line(below: list[list[bytes]]) -> bytes:
        roll = rng.random()
        if roll < 0.08:
            return bytes(rng.choice(NOISE) for _ in range(rng.randint(0, 8)))
        if roll < 0.7 and below:
            comps = rng.choice(below)
            segs = [rng.choice([c, escape(c), escape(c), b"*", b"?" * len(c),
                                escape(c[:1]) + b"*", b"*" + escape(c[-1:]),
                                rng.choice(classes(c))]) for c in comps]
            cut = rng.randint(0, len(segs) - 1)
            segs = rng.choice([segs[cut:], [b"**"] + segs[cut:], [b"*"] * cut + segs[cut:]])
        else:
            segs = [rng.choice(PIECES + NAMES) for _ in range(rng.choice([1, 1, 2, 3]))]
        p = b"/".join(segs)
        p = rng.choice([p, b"/" + p, b"**/" + p]) + rng.choice([b"", b"", b"", b"/**", b"/"])
        if rng.random() < 0.25:
            p = b"!" + p
        return p + rng.choice([b""] * 6 + [b" ", b"  ", b"\\ ", b"\t", b"\\"])

    ignores: dict[bytes, bytes] = {}
    for d in dict.fromkeys(rng.sample(dirs, min(len(dirs), rng.randint(1, 4)))):
        depth = d.count(b"/") + 1 if d else 0
        below = [p[depth:] for p in paths if len(p) > depth and b"/".join(p[:depth]) == d]
        lines = [line(below) for _ in range(rng.randint(1, 8))]
        ignores[d + b"/.gitignore" if d else b".gitignore"] = (
            rng.choice([b"", b"\xef\xbb\xbf"]) + rng.choice([b"\n", b"\r\n"]).join(lines)
            + rng.choice([b"", b"\n"]))
    if rng.random() < 0.3:
        ignores[b".git/info/exclude"] = b"\n".join(line(paths) for _ in range(3))
    return shape, ignores


def build(root: Path, shape: dict, ignores: dict[bytes, bytes]) -> None:
    base = os.fsencode(root)
    stack = [(base, shape)]
    while stack:
        path, node = stack.pop()
        for name, child in node.items():
            full = path + b"/" + name
            if isinstance(child, dict):
                os.mkdir(full)
                stack.append((full, child))
            elif child == LINK:
                os.symlink(b".", full)
            else:
                with open(full, "wb") as f:
                    f.write(b"x")
    for rel, text in ignores.items():
        full = base + b"/" + rel
        if os.path.isdir(full):
            continue  # a directory named .gitignore: git reads nothing either
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(text)


def check_generated(shape: dict, ignores: dict[bytes, bytes], snapshot: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "w"
        home = Path(tmp) / "home"
        home.mkdir()
        git_init(root, home)
        build(root, shape, ignores)
        compare(root, home, snapshot=snapshot)


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(trees())
def test_generated_trees_match_git(tree: tuple[dict, dict[bytes, bytes]]) -> None:
    check_generated(*tree, snapshot=False)


@settings(max_examples=150, deadline=None, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.randoms(use_true_random=False))
def test_dense_random_trees_match_git(rng: random.Random) -> None:
    check_generated(*random_tree(rng), snapshot=False)


@pytest.mark.slow
@settings(max_examples=3000, deadline=None, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.randoms(use_true_random=False))
def test_dense_random_trees_match_git_long(rng: random.Random) -> None:
    check_generated(*random_tree(rng), snapshot=False)


@pytest.mark.slow
@settings(max_examples=2000, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(trees())
def test_generated_trees_match_git_long(tree: tuple[dict, dict[bytes, bytes]]) -> None:
    check_generated(*tree, snapshot=False)


# -- chosen cases ------------------------------------------------------------------------------

CASES: list[tuple[dict[bytes, bytes], list[bytes]]] = [
    # a file cannot be re-included when its directory is excluded
    ({b".gitignore": b"d/\n!d/keep\n"}, [b"d/keep", b"d/x", b"e/d/keep"]),
    ({b".gitignore": b"d/*\n!d/keep\n"}, [b"d/keep", b"d/x", b"d/sub/y"]),
    # ** forms, and git's reading of "start" after a literal prefix
    ({b".gitignore": b"a/**/b\n"}, [b"a/b", b"a/x/b", b"a/x/y/b", b"x/a/b"]),
    ({b".gitignore": b"a/b**\n!a/bx/\n"}, [b"a/bx/c", b"a/b", b"a/by"]),
    ({b".gitignore": b"a/**\n!a/b/\n"}, [b"a/b/c", b"a/c", b"a"]),
    ({b".gitignore": b"**/x\n"}, [b"x", b"a/x", b"a/b/x/c"]),
    ({b".gitignore": b"foo**/bar\n"}, [b"foo/bar", b"foox/bar", b"foo/x/bar", b"fo/bar"]),
    # '?', '*' and classes never match '/', even next to "**"
    ({b".gitignore": b"x?y/**\na/**/b?c\nd*e/**\nf[!a]g/**\n"},
     [b"x/y/z", b"a/b/c", b"a/q/b/c", b"d/e/f", b"f/g/h", b"xqy/z"]),
    # anchoring (a second leading '/', plain or escaped, matches nothing)
    ({b".gitignore": b"//x\n/\\/y\n\\/z\n"}, [b"x", b"y", b"z", b"d/x"]),
    ({b".gitignore": b"/top\nmid/dle\n", b"s/.gitignore": b"/top\n"},
     [b"top", b"s/top", b"x/top", b"mid/dle", b"x/mid/dle", b"s/s/top"]),
    # deeper files win, info/exclude comes last
    ({b".gitignore": b"*.o\n", b"s/.gitignore": b"!keep.o\n", b".git/info/exclude": b"keep*\n"},
     [b"keep.o", b"s/keep.o", b"s/x.o", b"keepme", b"s/keepme"]),
    # escapes, spaces, CRLF, BOM, comments
    ({b".gitignore": b"\xef\xbb\xbf\\#a\r\n\\!b\r\nc\\ \r\nd  \r\n#e\r\n\\\\f\r\n"},
     [b"#a", b"!b", b"c ", b"d", b"d  ", b"#e", b"\\f", b"e"]),
    # bytes, not characters
    ({b".gitignore": b"?\ncaf?\n"}, [b"\xc3\xa9", b"caf\xc3\xa9", b"x"]),
    # classes: both ends of a range, negation both ways, ']' and '-' as members, named
    # classes, malformed ones (which match nothing)
    ({b".gitignore": b"r[a-c]\nn[!a]\nm[^b]\nk[]a]\nj[!]a]\ni[a-]\nh[\\`-\\a]\n"},
     [b"ra", b"rc", b"rd", b"na", b"nb", b"mb", b"ma", b"k]", b"ka", b"kb", b"j]", b"jb",
      b"i-", b"ia", b"ib", b"ha", b"h`", b"hb"]),
    ({b".gitignore": b"a[[:digit:]]\nb[[:alpha:][:punct:]]\nc[[:foo:]]\nd[\ne[[:a]\n"},
     [b"a1", b"ax", b"bx", b"b.", b"b1", b"c1", b"d[", b"e[", b"ea", b"e:"]),
    # a symlink (written "name@") is never a directory, even when it points to one
    ({b".gitignore": b"l/\nm\n"}, [b"l@", b"m@", b"d/l@", b"d/x"]),
    # trailing whitespace: spaces go unless escaped, tabs stay
    ({b".gitignore": b"s  \nt\t\nu\\ \nv\\\n"}, [b"s", b"s  ", b"t", b"t\t", b"u ", b"u",
                                                    b"v", b"v\\"]),
]


@pytest.mark.parametrize(("ignores", "files"), CASES)
def test_chosen_cases_match_git(ignores: dict[bytes, bytes], files: list[bytes]) -> None:
    shape: dict = {}
    for f in files:
        node = shape
        *dirs, name = f.split(b"/")
        for d in dirs:
            node = node.setdefault(d, {})
        node[name.removesuffix(b"@")] = LINK if name.endswith(b"@") else FILE
    check_generated(shape, ignores, snapshot=True)


def test_parse_lines_reads_like_git() -> None:
    text = b"\xef\xbb\xbf# c\n\na \nb\\ \nc\\\n!d/\r\ne\0f\n/\n\\!g\nlast"
    assert parse_lines(text) == [(b"a", False, False), (b"b\\ ", False, False),
                                 (b"c\\", False, False), (b"d", True, True),
                                 (b"e", False, False), (b"\\!g", False, False),
                                 (b"last", False, False)]


# -- git's own source --------------------------------------------------------------------------


#: read at import: the conftest clears every CTRLZ_ variable before a test runs
GIT_SOURCE_ENV = os.environ.get("CTRLZ_GIT_SOURCE")


def git_source() -> tuple[Path | None, str]:
    """git 2.39.5's unpacked source and, when there is none, why: ``$CTRLZ_GIT_SOURCE``, else
    the tree ``make bench`` unpacks from Debian's archive (``bench/trees.py``; fetched into
    ``bench/out/cache`` here when it is not there yet, as the benchmark does)."""
    env = GIT_SOURCE_ENV
    if env:
        found = next((d for d in (Path(env), *Path(env).glob("git-*"))
                      if (d / "wildmatch.c").is_file()), None)
        return found, f"CTRLZ_GIT_SOURCE={env} holds no git source tree (no wildmatch.c)"
    repo = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("bench_trees", repo / "bench" / "trees.py")
    assert spec is not None and spec.loader is not None
    trees = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = trees  # its dataclasses look their module up there
    spec.loader.exec_module(trees)
    try:
        root = trees.source_tree(repo / "bench" / "out").root
    except (OSError, tarfile.TarError) as exc:  # no network to Debian's archive, most often
        return None, (f"could not fetch git's source ({trees.GIT_SOURCE[0]}: {exc}); set "
                      "CTRLZ_GIT_SOURCE to an unpacked git 2.39 source tree")
    return next((d for d in root.glob("git-*") if (d / "wildmatch.c").is_file()), None), \
        f"{root} holds no git source tree (no wildmatch.c)"


def materialize(pattern: bytes) -> bytes | None:
    """One concrete path a gitignore pattern could match (wildcards filled in), or None."""
    p = pattern.lstrip(b"!").strip().rstrip(b"/").lstrip(b"/")
    out = bytearray()
    i = 0
    while i < len(p):
        c = p[i:i + 1]
        if c == b"*":
            out += b"d" if p[i:i + 2] == b"**" else b"x"
            while p[i:i + 1] == b"*":
                i += 1
            continue
        if c == b"?":
            out += b"q"
        elif c == b"[":
            end = p.find(b"]", i + 2)
            if end < 0:
                return None
            first = p[i + 1:i + 2]
            out += b"z" if first in (b"!", b"^") else first
            i = end + 1
            continue
        elif c == b"\\":
            i += 1
            out += p[i:i + 1]
        else:
            out += c
        i += 1
    return bytes(out) or None


def skeleton(source: Path, root: Path) -> None:
    """The tree's shape with empty files (contents play no part in ignoring, and copying
    40 MB dominated the test); ignore files and symlinks are copied as they are."""
    for dirpath, _dirnames, filenames in os.walk(source):
        out = root / Path(dirpath).relative_to(source)
        out.mkdir(parents=True, exist_ok=True)
        for name in filenames:
            src = Path(dirpath) / name
            if src.is_symlink():
                os.symlink(os.readlink(src), out / name)
            elif name == ".gitignore":
                shutil.copyfile(src, out / name)
            else:
                (out / name).touch()


def build_products(root: Path) -> None:
    """Lay build products over the clean source: objects next to sources, a file or
    directory for every pattern of every .gitignore (so the rules have something to say),
    and a few things negations re-include."""
    for dirpath, _dirnames, filenames in os.walk(root):
        if "/.git" in dirpath:
            continue
        here = Path(dirpath)
        for name in filenames:
            stem, _, ext = name.rpartition(".")
            if ext == "c":
                (here / f"{stem}.o").write_bytes(b"o")
            if ext == "txt" and here.name == "Documentation":
                (here / f"{stem}.1").write_bytes(b"man")
                (here / f"{stem}.html").write_bytes(b"html")
        ignore = here / ".gitignore"
        if not ignore.is_file():
            continue
        for line, _negated, dironly in parse_lines(ignore.read_bytes()):
            rel = materialize(line)
            if rel is None:
                continue
            target = here / os.fsdecode(rel)
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                if dironly:
                    target.mkdir(exist_ok=True)
                    (target / "inside").write_bytes(b"i")
                elif not target.exists():
                    target.write_bytes(b"p")
            except OSError:
                continue


def test_git_source_tree_matches_git(tmp_path: Path) -> None:
    source, why = git_source()
    if source is None:
        pytest.skip(why)
    root = tmp_path / "git"
    home = tmp_path / "home"
    home.mkdir()
    skeleton(source, root)
    git_init(root, home)
    build_products(root)
    paths = all_paths(root)
    ignored = git_ignored(root, sorted(paths), home)
    assert len(ignored) > 500  # the products are there, and ignored
    compare(root, home, snapshot=True)
