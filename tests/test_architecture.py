"""Architecture rules as tests: the public API is exactly __all__, and imports point down."""

from __future__ import annotations

import ast
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


def imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            level = "." * node.level
            names.add(level + (node.module or ""))
    return names


def test_lower_layers_never_import_faces_or_ui() -> None:
    forbidden = ("click", "rich", "mcp", "ctrlz.cli", "..cli", "..workspace",
                 "..snapshot_manager", "...cli")
    for layer in ("state", "engine"):
        for path in (SRC / layer).glob("*.py"):
            bad = {i for i in imports(path) if i.startswith(forbidden)}
            assert not bad, f"{path.name} imports {bad}"


def test_state_never_imports_engine() -> None:
    for path in (SRC / "state").glob("*.py"):
        assert not {i for i in imports(path) if "engine" in i}, path.name


def test_lower_layers_do_not_read_the_environment() -> None:
    for layer in ("state", "engine"):
        for path in (SRC / layer).glob("*.py"):
            assert "os.environ" not in path.read_text(), path.name
