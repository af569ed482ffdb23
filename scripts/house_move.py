"""The one-off tool that moved the house for issue 43 §1: ``state/``, ``session/``, ``engine/``
and ``toolcalls/`` split into sub-packages named by the code's own words, so that no folder of
the engine, state or session layers holds more than 15 modules at its top level.

Why a script and not a hand-made commit: other engineers edit these same files while the move
is reviewed, so the move is replayed on the newest ``main`` rather than rebased. Run it from a
clean checkout of the tree to move, then commit what it staged::

    git checkout -b tmp main && python scripts/house_move.py && git commit -m "house: move ..."

What it does, in order, and nothing by hand:

1. refuses to run on a dirty tree, on a tree it has moved already, or where a module it moves is
   missing or a place it moves one to is taken (each said in one line);
2. reads every text file it may rewrite (src/, tests/, bench/, scripts/, docs/, setup.py,
   Makefile, pyproject.toml, the top-level ``*.md``) and rewrites, in one pass each:
   ``from``-imports, absolute and relative, re-aimed from the file's new place (a ``from X
   import a, b`` whose names now live in two packages becomes two imports), and the same
   written as text (code a test hands a child interpreter, a doc's example); every dotted name
   ``ctrlz.<old module>[.attr]`` (imports, ``python -m``, monkeypatch and mock strings, logger
   names, docstrings, C comments) and, in backquotes, ``<layer>.<old module>``; relative
   ``:mod:`` references in docstrings; and the paths ``src/ctrlz/<old>.py``,
   ``ctrlz/<old>.py`` and ``<layer>/<old>.py``;
3. ``git mv`` each module (history follows), writes the rewritten files in their new places,
   and gives each new package a one-line ``__init__.py`` (no re-exports);
4. drops the keys of the moved top-level modules from tests/test_architecture.py's ``LAYERS``,
   and adds the folder-size test there if it is not there yet;
5. sorts the import blocks it touched (``ruff check --select I --fix``), wraps the lines its
   longer names pushed past 100 characters, and stages everything.

It is not idempotent on purpose: a second run finds the moved tree and refuses.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "ctrlz"
LINE_LENGTH = 100
MOST_MODULES = 15

#: new package (under src/ctrlz) -> (its one-line docstring, the modules it takes, as paths
#: under src/ctrlz without ``.py``)
PACKAGES: dict[str, tuple[str, list[str]]] = {
    "state/store": (
        "The object store: a repository's objects, packs and clones, and their upkeep.",
        ["state/repository", "state/toolcall_store", "state/objects", "state/object_writer",
         "state/packs", "state/clones", "state/cut_objects", "state/behind", "state/strays",
         "state/compact", "state/sweep", "state/groups", "state/usage", "state/lock"]),
    "state/ignore": (
        "Ignore rules: which paths a snapshot covers (gitignore files, patterns, globs).",
        ["state/exclude", "state/wildmatch", "state/globs"]),
    "state/fsio": (
        "Platform file I/O: atomic replacement, direct I/O, copy-on-write clones, thread pools.",
        ["state/atomic", "state/direct_io", "state/cow", "state/pools"]),
    "state/db": (
        "The records beside the objects: the catalog, the oplog, sessions, stat cache, inbox.",
        ["state/catalog", "state/frozen_catalog", "state/transaction", "state/oplog",
         "state/sessiondb", "state/statcache", "state/inbox"]),
    "state/interchange": (
        "Snapshots leaving a store: archives, object transfer, portable snapshot records.",
        ["state/archive", "state/transfer", "state/portable"]),
    "engine/restore": (
        "The restore engine: plan, apply, check, the journal, and what it does to git history.",
        ["engine/restore", "engine/plan", "engine/apply", "engine/check", "engine/actions",
         "engine/requests", "engine/journal", "engine/aside", "engine/madedirs",
         "engine/durable", "engine/githistory", "engine/gitrefs"]),
    "session/daemon": (
        "The workspace daemon: its process, its serving thread, the audit of its watcher.",
        ["session/daemon", "session/daemon_process", "session/daemon_startup", "session/serial",
         "session/watch_audit", "session/confined"]),
    "session/remotes": (
        "Remotes of a workspace: which remote, push and pull, background push, clone.",
        ["session/remotes", "session/remote_registry", "session/autopush", "session/cloning"]),
    "session/run": (
        "``ctrlz run``: one protected session, its snapshot triggers and its sandbox.",
        ["session/run", "session/scheduler", "session/triggers", "session/sandboxing"]),
    "toolcalls/restore": (
        "Putting tool calls back: fs_restore, turn rollback and redo, rewind, fork.",
        ["toolcalls/restore", "toolcalls/rewinds", "toolcalls/turns", "toolcalls/fork"]),
}

#: modules that join a package that stands already: the btrfs backend hands the scanner a
#: frozen copy of the root to walk, and takes a Repository (in fsio/ it would point back up at
#: store/); the session layer's own top-level modules join it (ARCHITECTURE.md's layer table)
INTO_STANDING: dict[str, list[str]] = {
    "state/scan": ["state/btrfs"],
    "session": ["config", "locator", "reports"],
}

#: old path under src/ctrlz (no .py) -> new path
FILE_MOVES: dict[str, str] = {
    old: f"{pkg}/{old.rsplit('/', 1)[-1]}"
    for pkg, olds in [*((p, o) for p, (_, o) in PACKAGES.items()), *INTO_STANDING.items()]
    for old in olds}
#: old dotted module -> new dotted module
MODULE_MOVES: dict[str, str] = {"ctrlz." + old.replace("/", "."): "ctrlz." + new.replace("/", ".")
                                for old, new in FILE_MOVES.items()}

#: the top-level names that were a layer of their own in LAYERS and now sit under session/
GONE_FROM_TOP = [old for old in FILE_MOVES if "/" not in old]


def fail(message: str) -> None:
    print(f"house_move: {message}", file=sys.stderr)
    sys.exit(1)


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True,
                          text=True).stdout


# -- refusing ----------------------------------------------------------------------------------


def check_tree() -> None:
    dirty = git("status", "--porcelain", "--untracked-files=no").strip()
    if dirty:
        fail("the tree is dirty (commit or stash first):\n" + dirty)
    moved = [new for new in FILE_MOVES.values() if (SRC / f"{new}.py").exists()]
    missing = [old for old in FILE_MOVES if not (SRC / f"{old}.py").exists()]
    if moved and len(missing) == len(FILE_MOVES):
        fail("the tree is moved already (src/ctrlz/state/store/ and the rest exist)")
    if missing:
        fail("modules to move are missing (renamed on main? update PACKAGES): "
             + ", ".join(f"src/ctrlz/{m}.py" for m in missing))
    taken = [new for new in FILE_MOVES.values() if (SRC / f"{new}.py").exists()]
    taken += [pkg for pkg in PACKAGES if (SRC / pkg).exists()]
    if taken:
        fail("places to move to are taken: " + ", ".join(f"src/ctrlz/{t}" for t in taken))
    untracked = git("ls-files", "--others", "--exclude-standard", "src").strip()
    if untracked:
        fail("untracked files under src/ would not move with the rest:\n" + untracked)


# -- names -------------------------------------------------------------------------------------


def old_modules() -> set[str]:
    """Every dotted module of the tree before the move (packages by their ``__init__``)."""
    names = set()
    for path in SRC.rglob("*.py"):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names.add(".".join(parts))
    return names


def moved(dotted: str) -> str:
    """``dotted`` (a module, or a name inside one) as it is called after the move."""
    parts = dotted.split(".")
    for k in range(len(parts), 1, -1):
        new = MODULE_MOVES.get(".".join(parts[:k]))
        if new is not None:
            return ".".join([new, *parts[k:]])
    return dotted


def relative(from_package: str, target: str) -> str:
    """``target`` written as a relative import spec seen from inside ``from_package``."""
    here, there = from_package.split("."), target.split(".")
    common = 0
    while common < min(len(here), len(there)) and here[common] == there[common]:
        common += 1
    return "." * (len(here) - common + 1) + ".".join(there[common:])


#: an absolute ``from ctrlz… import a, b as c`` written as text (in a string of code a test
#: runs in a child interpreter, after a ``\n`` there; in a doc's example), any dotted name
#: ``ctrlz.…``, or one without ``ctrlz.`` that opens a name in backquotes (``engine.durable``)
NAMES = re.compile(r"(?:(?<![\w.])|(?<=\\n))from (?P<base>ctrlz(?:\.\w+)*) import "
                   r"(?P<names>\w+(?: as \w+)?(?:, \w+(?: as \w+)?)*)"
                   r"|(?<![\w.])ctrlz(?:\.[A-Za-z_]\w*)+"
                   r"|(?<=`)(?P<short>(?:state|engine|session|toolcalls)(?:\.\w+)+)")


def rewrite_names(text: str, modules: set[str]) -> str:
    def one(match: re.Match[str]) -> str:
        if match.group("short") is not None:
            return moved(f"ctrlz.{match.group('short')}").removeprefix("ctrlz.")
        base = match.group("base")
        if base is None:
            return moved(match.group(0))
        groups: dict[str, list[str]] = {}
        for name in match.group("names").split(", "):
            sub = f"{base}.{name.split(' ')[0]}"
            frm = moved(sub).rpartition(".")[0] if sub in modules else moved(base)
            groups.setdefault(frm, []).append(name)
        return "; ".join(f"from {frm} import {', '.join(names)}" for frm, names in groups.items())

    return NAMES.sub(one, text)


PATH_PREFIXED = re.compile(r"(?<![\w-])((?:src/)?ctrlz/)((?:[a-z_]+/)*[a-z_]+)\.py\b")
PATH_BARE = re.compile(r"(?<![\w./-])((?:state|session|engine|toolcalls)/(?:[a-z_]+/)*[a-z_]+)"
                       r"\.py\b")


def rewrite_paths(text: str) -> str:
    text = PATH_PREFIXED.sub(
        lambda m: f"{m.group(1)}{FILE_MOVES.get(m.group(2), m.group(2))}.py", text)
    return PATH_BARE.sub(lambda m: f"{FILE_MOVES.get(m.group(1), m.group(1))}.py", text)


# -- Python files ------------------------------------------------------------------------------


def identity(path: Path) -> tuple[str, str] | None:
    """(the package a module of ctrlz sits in before the move, and after), or None."""
    try:
        rel = path.relative_to(SRC).with_suffix("").as_posix()
    except ValueError:
        return None
    old = ["ctrlz", *rel.split("/")][:-1]  # a package's __init__ sits in the package too
    new = ["ctrlz", *FILE_MOVES.get(rel, rel).split("/")][:-1]
    return ".".join(old), ".".join(new)


def absolute(package: str, level: int, module: str | None) -> str:
    if not level:
        return module or ""
    base = package.split(".")
    base = base[:len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


FROM_SPEC = re.compile(r"from(\s+)([.\w]+)(\s+)import\b")


def rewrite_import(node: ast.ImportFrom, segment: str, where: tuple[str, str] | None,
                   modules: set[str], indent: str) -> str | None:
    """The new text of one ``from … import …`` statement, or None when it stays."""
    if node.level and where is None:
        return None  # a relative import of tests/ or bench/: not ours
    old_pkg, new_pkg = where or ("", "")
    base = absolute(old_pkg, node.level, node.module)
    if base != "ctrlz" and not base.startswith("ctrlz."):
        return None
    groups: dict[str, list[ast.alias]] = {}
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        frm = moved(sub).rpartition(".")[0] if sub in modules else moved(base)
        groups.setdefault(frm, []).append(alias)

    def spec(frm: str) -> str:
        return relative(new_pkg, frm) if node.level else frm

    if len(groups) == 1:
        (frm,) = groups
        match = FROM_SPEC.match(segment)
        assert match, segment
        new_spec = spec(frm)
        if new_spec == match.group(2):
            return None
        return segment[:match.start(2)] + new_spec + segment[match.end(2):]
    if "#" in segment:
        print(f"house_move: a comment inside a split import is dropped: {segment!r}",
              file=sys.stderr)
    lines = []
    for frm, aliases in groups.items():
        names = ", ".join(a.name if a.asname is None else f"{a.name} as {a.asname}"
                          for a in aliases)
        lines.append(f"from {spec(frm)} import {names}")
    return ("\n" + indent).join(lines)


XREF = re.compile(r"(:(?:mod|func|class|meth|data|attr|exc|obj):`~?)(\.+)([A-Za-z_][\w.]*)`")


def rewrite_python(text: str, where: tuple[str, str] | None, modules: set[str]) -> str:
    tree = ast.parse(text)
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))

    def offset(line: int, col: int) -> int:
        # ast columns count UTF-8 bytes
        line_text = text[starts[line - 1]:starts[line]]
        return starts[line - 1] + len(line_text.encode()[:col].decode())

    edits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            start = offset(node.lineno, node.col_offset)
            end = offset(node.end_lineno or node.lineno, node.end_col_offset or 0)
            line_start = starts[node.lineno - 1]
            indent = text[line_start:start]
            new = rewrite_import(node, text[start:end], where, modules, indent)
            if new is not None:
                edits.append((start, end, new))
    edits.sort()
    out, last = [], 0
    for start, end, new in edits:
        out.append(rewrite_names(text[last:start], modules))
        out.append(new)
        last = end
    out.append(rewrite_names(text[last:], modules))
    text = "".join(out)
    if where is not None:
        text = XREF.sub(lambda m: rewrite_xref(m, where), text)
        text = rewrite_exports(text, where[0])
    return rewrite_paths(text)


EXPORTS = re.compile(r"\n_EXPORTS = \{.*?\n\}", re.DOTALL)


def rewrite_exports(text: str, package: str) -> str:
    """A package's lazy ``_EXPORTS`` (name -> the submodule it loads, by a relative name that
    ``import_module`` is handed): the submodules that moved into a sub-package."""
    def value(match: re.Match[str]) -> str:
        new = moved(f"{package}.{match.group(2)}")
        return f'{match.group(1)}"{new.removeprefix(package + ".")}"'

    return EXPORTS.sub(lambda m: re.sub(r'(: |\], )"(\w+)"', value, m.group(0)), text)


def rewrite_xref(match: re.Match[str], where: tuple[str, str]) -> str:
    """A relative ``:mod:`.x``` in a docstring, aimed from the module's new place: relative
    when the target sits in the same package, else by its whole dotted name."""
    old_pkg, new_pkg = where
    level, rest = len(match.group(2)), match.group(3)
    target = absolute(old_pkg, level, rest)
    if moved(target) == target and new_pkg == old_pkg:
        return match.group(0)
    spec = relative(new_pkg, moved(target))
    if spec.startswith(".."):
        spec = moved(target)
    return f"{match.group(1)}{spec}`"


# -- lines made too long -----------------------------------------------------------------------


def wrap_prose(indent: str, stripped: str) -> list[str]:
    """One prose line as two: as many words as fit, then the rest under the same indent."""
    lead = indent + ("# " if stripped.startswith("#") else "")
    words = stripped.split(" ")
    first = indent + words.pop(0)
    while words and len(f"{first} {words[0]}") <= LINE_LENGTH:
        first = f"{first} {words.pop(0)}"
    lines = [first.rstrip() + "\n"]
    if words:
        lines.append(lead + " ".join(words).lstrip() + "\n")
    return lines


def code_cut(body: str) -> tuple[int, int] | None:
    """Where a long line of code may break (after the last ``, `` that keeps it short) and the
    column its rest starts at (under the first item of its bracket), or None. The file is
    parsed again afterwards: a break that is not inside brackets is refused there."""
    stack: list[int] = []
    quote = ""
    best = None
    for at, char in enumerate(body):
        if quote:
            if char == quote and body[at - 1] != "\\":
                quote = ""
        elif char in "\"'":
            quote = char
        elif char in "([{":
            stack.append(at)
        elif char in ")]}" and stack:
            stack.pop()
        elif char == "," and at + 1 <= LINE_LENGTH and body[at + 1:at + 2] == " ":
            # no bracket of its own: an item of a bracket opened on a line above
            best = (at + 1, stack[-1] + 1 if stack else len(body) - len(body.lstrip()))
        elif char == "#":
            break
    return best


def prose_lines(text: str) -> set[int]:
    """Numbers of the lines that are prose: whole-line comments and docstrings."""
    lines = {n for n, line in enumerate(text.splitlines(), 1) if line.lstrip().startswith("#")}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                lines.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return lines


def wrap_long_lines(path: Path, text: str, before: str) -> str:
    """Wrap the lines the longer names pushed past the line length: in a comment or docstring
    the words that overflow go on a new line of the same indent (and ``#``); a line of code
    breaks after a comma inside brackets. Any other long line is named, to be mended here."""
    old_lines = set(before.splitlines())
    prose = prose_lines(text)
    out = []
    for number, line in enumerate(text.splitlines(keepends=True), 1):
        body = line.rstrip("\n")
        if len(body) <= LINE_LENGTH or body in old_lines:
            out.append(line)
            continue
        stripped = body.lstrip()
        indent = body[:len(body) - len(stripped)]
        if number in prose:
            out.extend(wrap_prose(indent, stripped))
            continue
        cut = code_cut(body)
        if cut is None:
            print(f"house_move: {path.relative_to(ROOT)}:{number} is longer than {LINE_LENGTH}",
                  file=sys.stderr)
            out.append(line)
            continue
        at, column = cut
        out.append(body[:at].rstrip() + "\n")
        out.append(" " * column + body[at:].lstrip() + "\n")
    return "".join(out)


# -- which files -------------------------------------------------------------------------------

TEXT_SUFFIXES = {".py", ".md", ".c", ".h", ".js", ".toml", ".cfg", ".txt", ".sh", ".ini",
                 ".yml", ".yaml", ".json"}


def files_to_rewrite() -> list[Path]:
    listed = git("ls-files", "src", "tests", "bench", "scripts", "docs", "setup.py", "Makefile",
                 "pyproject.toml", "*.md", "src/ctrlz/door/ctrlz", "src/ctrlz/door/ctrlz-hook")
    paths = []
    for name in sorted(set(listed.split("\n")) - {""}):
        path = ROOT / name
        if "/vendor/" in name or name == "scripts/house_move.py" or not path.is_file():
            continue
        if path.suffix in TEXT_SUFFIXES or path.name in {"Makefile", "ctrlz", "ctrlz-hook"}:
            paths.append(path)
    return paths


# -- the architecture test ---------------------------------------------------------------------

FOLDER_TEST = '''

# -- folders -----------------------------------------------------------------------------------

#: At most this many modules (``__init__`` counted) at the top of any folder of the session,
#: engine and state layers (issue 43): past that a folder's list of files no longer explains
#: what it holds, and a sub-package named by the code's own words is due.
MOST_MODULES_IN_A_FOLDER = 15


def test_folders_stay_small() -> None:
    layers = [name for name, layer in LAYERS.items()
              if layer in ("session", "engine", "state") and (SRC / name).is_dir()]
    crowded = {}
    for layer in layers:
        for folder in [SRC / layer, *(p.parent for p in (SRC / layer).rglob("*/__init__.py"))]:
            count = len(list(folder.glob("*.py")))
            if count > MOST_MODULES_IN_A_FOLDER:
                crowded[folder.relative_to(SRC).as_posix()] = count
    assert not crowded, f"folders past {MOST_MODULES_IN_A_FOLDER} modules: {crowded}"
'''


#: what no rule above can see, by file: (old text, new text), replaced after the rules ran;
#: e.g. an import split over two string literals, whose names stand in the second (none today)
BY_HAND: dict[str, list[tuple[str, str]]] = {}


def by_hand(path: Path, text: str) -> str:
    for old, new in BY_HAND.get(path.relative_to(ROOT).as_posix(), []):
        if old not in text:
            print(f"house_move: {path.relative_to(ROOT)} no longer holds {old!r}; look there",
                  file=sys.stderr)
        text = text.replace(old, new)
    return text


def update_architecture_test(text: str) -> str:
    for name in GONE_FROM_TOP:
        text, count = re.subn(rf'\n    "{name}": "session",[^\n]*', "", text)
        if not count:
            print(f"house_move: LAYERS in tests/test_architecture.py has no {name!r} key",
                  file=sys.stderr)
    text = text.replace('rel != "locator.py"', 'rel != "session/locator.py"')
    if "def test_folders_stay_small" not in text:
        text = text.rstrip("\n") + "\n" + FOLDER_TEST
    return text


# -- the move ----------------------------------------------------------------------------------


def ruff() -> list[str] | None:
    for candidate in (ROOT / ".venv" / "bin" / "ruff", shutil.which("ruff")):
        if candidate and Path(candidate).exists():
            return [str(candidate)]
    return None


def main() -> None:
    check_tree()
    modules = old_modules()
    rewritten: dict[Path, tuple[str, str]] = {}  # new path -> (new text, old text)
    for path in files_to_rewrite():
        before = path.read_text()
        where = identity(path) if path.suffix == ".py" else None
        if path.suffix == ".py":
            try:
                after = rewrite_python(before, where, modules)
            except SyntaxError as exc:
                fail(f"{path.relative_to(ROOT)} does not parse: {exc}")
        else:
            after = rewrite_paths(rewrite_names(before, modules))
        rel = path.relative_to(SRC).with_suffix("").as_posix() if where else None
        new_path = SRC / f"{FILE_MOVES[rel]}.py" if rel in FILE_MOVES else path
        after = by_hand(path, after)
        if new_path == ROOT / "tests" / "test_architecture.py":
            after = update_architecture_test(after)
        rewritten[new_path] = (after, before)

    for pkg, (doc, _) in PACKAGES.items():
        (SRC / pkg).mkdir()
        (SRC / pkg / "__init__.py").write_text(f'"""{doc}"""\n')
    for old, new in FILE_MOVES.items():
        git("mv", f"src/ctrlz/{old}.py", f"src/ctrlz/{new}.py")

    changed = []
    for path, (after, before) in rewritten.items():
        if after != before:
            path.write_text(after)
            changed.append(path)

    tool = ruff()
    python = [p for p in changed if p.suffix == ".py"]
    if tool is None:
        print("house_move: no ruff found: run `ruff check --select I --fix` on the moved tree",
              file=sys.stderr)
    elif python:
        subprocess.run([*tool, "check", "--quiet", "--select", "I", "--fix",
                        *map(str, python)], cwd=ROOT, check=False)
    for path in python:
        after, before = path.read_text(), rewritten[path][1]
        wrapped = wrap_long_lines(path, after, before)
        try:
            ast.parse(wrapped)
        except SyntaxError:
            print(f"house_move: {path.relative_to(ROOT)}: its long lines are left long",
                  file=sys.stderr)
            wrapped = after
        if wrapped != after:
            path.write_text(wrapped)

    git("add", "--", *[str(SRC / pkg / "__init__.py") for pkg in PACKAGES])
    git("add", "-u")
    report()


def report() -> None:
    """Folders of the session, engine and state layers, with how many modules each holds."""
    tops = ["state", "engine", "session", "toolcalls"]
    for top in tops:
        for folder in sorted([SRC / top, *(p.parent for p in (SRC / top).rglob("*/__init__.py"))]):
            count = len(list(folder.glob("*.py")))
            mark = f"  <- more than {MOST_MODULES}" if count > MOST_MODULES else ""
            print(f"{folder.relative_to(ROOT)}: {count} modules{mark}")


if __name__ == "__main__":
    main()
