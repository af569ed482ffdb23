"""Architecture rules as tests: the public API is exactly __all__, and imports point down.

The import rules read the source with ``ast`` (nothing is imported): every ``import`` and
``from … import`` in a module counts, at module level or inside a function, and so does
``import_module("…")`` with a constant name; imports under ``if TYPE_CHECKING:`` do not,
because they never run. ``from X import a`` is an import of the module ``X.a`` when there is
one, else of ``X``. A package's ``__init__`` is not counted as imported by its submodules:
Python runs it first, whatever the submodule imports.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import ctrlz

SRC = Path(ctrlz.__file__).parent


def test_all_is_sorted_and_complete() -> None:
    assert ctrlz.__all__ == sorted(ctrlz.__all__)
    assert set(ctrlz.__all__) == set(ctrlz._EXPORTS)
    for name in ctrlz.__all__:
        assert getattr(ctrlz, name).__module__.startswith("ctrlz."), name


def test_importing_ctrlz_is_cheap() -> None:
    """Hooks and `ctrlz --help` start a fresh interpreter each time; the package must not
    pull in the engine until it is used."""
    import subprocess
    import sys
    code = "import sys, ctrlz; print(sorted(m for m in sys.modules if m.startswith('ctrlz')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
    assert out.strip() == "['ctrlz']"


# -- reading imports ---------------------------------------------------------------------------


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def modules() -> dict[str, Path]:
    """Every module of ctrlz by dotted name (packages by their ``__init__``)."""
    return {module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _absolute(importer: str, level: int, module: str | None) -> str:
    """The absolute name of ``from <level dots><module> import …`` written in ``importer``."""
    if not level:
        return module or ""
    package = importer if modules()[importer].name == "__init__.py" else \
        importer.rpartition(".")[0]
    base = package.split(".")[:len(package.split(".")) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def _imports(name: str) -> Iterator[tuple[str, bool]]:
    """(absolute name imported, whether only under ``if TYPE_CHECKING:``) for each import
    in module ``name``, wherever it is written."""
    tree = ast.parse(modules()[name].read_text())
    todo: list[tuple[ast.AST, bool]] = [(tree, False)]
    while todo:
        node, type_only = todo.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            todo += [(n, True) for n in node.body] + [(n, type_only) for n in node.orelse]
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, type_only
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(name, node.level, node.module)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                yield (sub if sub in modules() else base), type_only
        elif isinstance(node, ast.Call) and _called(node.func) == "import_module" and node.args:
            target = _import_module_target(name, node)
            if target is not None:
                yield target, type_only
        todo += [(child, type_only) for child in ast.iter_child_nodes(node)]


def _called(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _import_module_target(importer: str, call: ast.Call) -> str | None:
    """``import_module("ctrlz.x")`` or ``import_module(".x", __package__)``; None when the
    name is computed (the lazy exports of a package ``__init__``)."""
    first = call.args[0]
    if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
        return None
    target: str = first.value
    if not target.startswith("."):
        return target
    level = len(target) - len(target.lstrip("."))
    return _absolute(importer, level, target[level:] or None)


@cache
def import_graph() -> dict[str, frozenset[str]]:
    """Module → the ctrlz modules it imports when it runs (TYPE_CHECKING imports left out)."""
    graph = {}
    for name in modules():
        graph[name] = frozenset(target for target, type_only in _imports(name)
                                if not type_only and target in modules() and target != name)
    return graph


def imports(path: Path) -> set[str]:
    """Every name a file imports, absolute, TYPE_CHECKING imports included."""
    return {target for target, _ in _imports(module_name(path))}


# -- no third-party UI or faces below the session, no environment ------------------------------


def _layer_files(*layers: str) -> list[Path]:
    return [p for layer in layers for p in sorted((SRC / layer).rglob("*.py"))]


def test_lower_layers_never_import_faces_or_ui() -> None:
    forbidden = ("click", "rich", "mcp", "ctrlz.cli", "ctrlz.mcp", "ctrlz.hooks",
                 "ctrlz.installers", "ctrlz.workspace", "ctrlz.snapshot_manager")
    for path in _layer_files("state", "engine"):
        bad = {i for i in imports(path) if i == "mcp" or i.startswith(forbidden)}
        assert not bad, f"{path.relative_to(SRC)} imports {bad}"


def test_state_never_imports_engine() -> None:
    for path in _layer_files("state"):
        bad = {i for i in imports(path) if i.startswith("ctrlz.engine")}
        assert not bad, f"{path.relative_to(SRC)} imports {bad}"


def test_one_of_each_thing() -> None:
    """One store locator, one path check, one place for the user's directories, one
    restore engine: the helpers they replaced are gone (the tool-call layer's own
    path-string restore, ``put_back``, above all)."""
    sources = {p: p.read_text() for p in SRC.rglob("*.py")}
    for path, text in sources.items():
        rel = path.relative_to(SRC).as_posix()
        if rel != "session/locator.py":
            assert "def _store_dir" not in text and '"workspaces"' not in text, rel
        if rel != "paths.py":
            assert "os.path.normpath" not in text, rel
        # one user_dir, one xdg_base; the door's protocol only names the variables a request
        # carries to the daemon, it computes no directory from them
        if rel not in ("platform.py", "protocol.py"):
            assert '"XDG_' not in text and "import platformdirs" not in text, rel
    assert "def put_back" not in sources[SRC / "toolcalls" / "images.py"]


def test_lower_layers_do_not_read_the_environment() -> None:
    for path in _layer_files("state", "engine"):
        assert "os.environ" not in path.read_text(), path.relative_to(SRC)


# -- no import circles -------------------------------------------------------------------------


def import_cycles() -> list[list[str]]:
    """One cycle (as a path a → b → … → a) per group of modules that import each other."""
    graph = import_graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:  # Tarjan's algorithm, iteratively
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return [_cycle_through(graph, group) for group in groups]


def _cycle_through(graph: dict[str, frozenset[str]], group: list[str]) -> list[str]:
    """The shortest import path from ``group[0]`` back to itself inside ``group``."""
    start, members = group[0], set(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        nxt = []
        for node in frontier:
            for child in sorted(graph[node] & members):
                if child == start:
                    return paths[node] + [start]
                if child not in paths:
                    paths[child] = paths[node] + [child]
                    nxt.append(child)
        frontier = nxt
    return group


def test_no_import_circles() -> None:
    """A circle means no module of it can be understood, tested or imported alone; and an
    import at the wrong moment finds a half-initialised module. Function-local imports
    count: they only postpone the circle to the first call."""
    cycles = import_cycles()
    assert not cycles, "import circles:\n" + "\n".join(" -> ".join(c) for c in cycles)


# -- programs started by name -----------------------------------------------------------------


def started_programs() -> Iterator[tuple[str, str]]:
    """(starter, module) for every ``[python, ..., "-m", X, ...]`` in ctrlz: a process
    boundary, which the import reader does not see. ``X`` is a constant name, or
    :data:`ctrlz.protocol.DAEMON_PROGRAM` (the daemon's program, a face the session
    starts: it may not import it, so it names it by that constant, defined beside it)."""
    from ctrlz import protocol

    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.List | ast.Tuple):
                continue
            for flag, target in zip(node.elts, node.elts[1:], strict=False):
                if not (isinstance(flag, ast.Constant) and flag.value == "-m"):
                    continue
                if isinstance(target, ast.Constant) and isinstance(target.value, str):
                    yield name, target.value
                elif (isinstance(target, ast.Name) and target.id == "DAEMON_PROGRAM") or (
                        isinstance(target, ast.Attribute) and target.attr == "DAEMON_PROGRAM"):
                    yield name, protocol.DAEMON_PROGRAM
                else:
                    raise AssertionError(f"{name} starts a program by {ast.unparse(target)}: "
                                         "name it by a constant this test reads")


def test_every_program_started_by_name_runs() -> None:
    """Each module ctrlz starts with ``python -m`` exists and runs as a program (a renamed
    or moved module fails here, not in a user's daemon log), and the daemon's is started by
    the one constant."""
    seen = set()
    for starter, program in started_programs():
        seen.add(program)
        main = f"{program}.__main__" if f"{program}.__main__" in modules() else program
        assert main in modules(), f"{starter} starts {program}, which is no module"
        if main == program:
            assert '__name__ == "__main__"' in modules()[main].read_text(), \
                f"{starter} starts {program}, which does not run as a program"
    from ctrlz import protocol

    assert protocol.DAEMON_PROGRAM in seen
    assert layer_of(protocol.DAEMON_PROGRAM) == "faces"


# -- layers ------------------------------------------------------------------------------------

#: Where each part of ctrlz sits (DESIGN.md, "Layers"). Keys are the first name below ``ctrlz``;
#: ``ctrlz`` itself is the package ``__init__`` (lazy exports of the public API: a face).
#:
#: ``config`` belongs to the session layer: it resolves the user's settings (TOML files and
#: ``CTRLZ_*`` variables) once, and the engine and state get the values passed down. ``reports``
#: too: it holds the results the session layer returns to faces (status, history, undo), built
#: from engine and state records. ``locator`` (where a workspace's store lives, from
#: ``$CTRLZ_HOME``) is resolved once, in the session layer. Only ``errors`` and ``types`` are
#: shared leaves, importable by anyone, importing nothing of ctrlz but each other.
LAYERS = {
    "cli": "faces",
    "mcp": "faces",
    "acp": "faces",
    "hooks": "faces",
    "door": "faces",  # the native door's request, answered in the daemon; the daemon's program
    "installers": "faces",
    "workspace": "faces",
    "snapshot_manager": "faces",
    "service": "faces",  # the per-user service: API, gateway, watcher supervision
    "web": "faces",  # the dashboard's static files
    "ending": "faces",  # how a short command or hook process ends (os._exit after flushing)
    "session": "session",
    "toolcalls": "session",
    "engine": "engine",
    "state": "state",
    "sources": "sources",
    "sandbox": "sandbox",  # confining an agent: Landlock, bwrap, seccomp, the proxy
    "errors": "shared",
    "types": "shared",
    "quoting": "shared",  # how a path is written in a message (light: the CLI's fast path)
    "paths": "shared",  # the one inside-the-workspace path check
    "jsontext": "shared",  # json's own C codec, without json's start-up
    "platform": "shared",  # what this machine offers (CTRLZ_PLATFORM=portable: the twins)
    # the door's wire protocol (forms, version, timeouts): the CLI, the door, the hooks and
    # the session's daemon client read the one definition
    "protocol": "shared",
}

#: What each layer may import. Faces may reach past the session to engine and state records
#: (diffs, tree entries) but never to a source: watchers and tracers are run by the session.
#: Sources feed the session and may use the state layer (exclusion rules), nothing above it.
#: The sandbox (Landlock, bwrap, seccomp, the proxy) knows nothing of workspaces or sessions:
#: it takes paths and callbacks, so faces (``ctrlz sandbox check``, the nono-py API), the
#: session (``ctrlz run --sandbox``) and the tracer may all use it.
MAY_IMPORT = {
    "faces": {"faces", "session", "engine", "state", "sandbox", "shared"},
    "session": {"session", "engine", "state", "sources", "sandbox", "shared"},
    "engine": {"engine", "state", "shared"},
    "state": {"state", "shared"},
    "sources": {"sources", "state", "sandbox", "shared"},
    "sandbox": {"sandbox", "shared"},
    "shared": {"shared"},
}

#: Known upward imports, being removed as this is written. The list may only shrink: delete an
#: entry as soon as its import is gone (test_layer_allowlist_is_not_stale says when); never add
#: one to make a new import pass.
ALLOWLIST: set[tuple[str, str]] = set()  # known exceptions; may only shrink


def layer_of(module: str) -> str:
    """The layer of the longest name in LAYERS that ``module`` is or is under."""
    if module == "ctrlz":
        return "faces"
    parts = module.split(".")[1:]
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in LAYERS:
            return LAYERS[".".join(parts[:end])]
    raise AssertionError(f"{module} is in no layer; add ctrlz.{parts[0]} to LAYERS")


def layer_violations() -> set[tuple[str, str]]:
    """(importer, imported) for every import that points up or sideways across layers."""
    return {(importer, target)
            for importer, targets in import_graph().items()
            for target in targets
            if layer_of(target) not in MAY_IMPORT[layer_of(importer)]}


def test_every_module_is_in_a_layer() -> None:
    for module in modules():
        layer_of(module)
    named = {m.partition(".")[2] for m in modules() if m != "ctrlz"}
    tops = {n.split(".")[0] for n in named} | named
    assert not set(LAYERS) - tops, f"LAYERS names parts that are gone: {set(LAYERS) - tops}"


def test_imports_point_down_the_layers() -> None:
    bad = sorted(layer_violations() - ALLOWLIST)
    assert not bad, "imports against the layers (see LAYERS and MAY_IMPORT):\n" + "\n".join(
        f"{a} ({layer_of(a)}) imports {b} ({layer_of(b)})" for a, b in bad)


def test_layer_allowlist_is_not_stale() -> None:
    stale = sorted(ALLOWLIST - layer_violations())
    if stale:
        print("ALLOWLIST entries no longer needed (delete them):")
        for pair in stale:
            print(f"    {pair!r},")
    assert not stale, f"delete these ALLOWLIST entries, their imports are gone: {stale}"


def test_the_import_reader_sees_what_python_sees() -> None:
    """The rules above are only as good as the reader: check it on modules whose imports are
    known (relative, function-local, TYPE_CHECKING-only, a package and its submodule)."""
    graph = import_graph()
    # cli/app.py names the command modules and loads one when its command runs (a computed
    # name, tests/cli/test_lazy_commands.py); they take cli/context.py, never the group
    assert "ctrlz.cli.context" in graph["ctrlz.cli.app"]
    assert "ctrlz.cli.app" not in graph["ctrlz.cli.snapshots"]
    # a function-local import (main() loads the group only when it runs)
    assert "ctrlz.cli.app" in graph["ctrlz.cli"]
    # `from . import render` is the submodule, not the package
    assert "ctrlz.cli.render" in graph["ctrlz.cli.snapshots"]
    # a TYPE_CHECKING-only import is not an edge (rewinds annotates with the session's
    # ProtectedWorkspace but never imports it at run time), but imports() still lists it
    assert "ctrlz.session.protected" not in graph["ctrlz.toolcalls.restore.rewinds"]
    assert "ctrlz.session.protected" in imports(modules()["ctrlz.toolcalls.restore.rewinds"])
    # the scanner's steps take the ScanContext, never the Scanner that imports them
    assert "ctrlz.state.scan.scanner" not in imports(modules()["ctrlz.state.scan.incremental"])
    # three dots from a subpackage module
    assert "ctrlz.errors" in graph["ctrlz.state.scan.walk"]


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
