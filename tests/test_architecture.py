"""Architecture rules as tests: the public API is exactly __all__, and imports point down."""

from __future__ import annotations

import ast
from pathlib import Path

import ctrlz

SRC = Path(ctrlz.__file__).parent


def test_all_is_sorted_and_complete() -> None:
    public = sorted(n for n in vars(ctrlz) if not n.startswith("_")
                    and not isinstance(getattr(ctrlz, n), type(ctrlz)))
    assert ctrlz.__all__ == sorted(ctrlz.__all__)
    assert set(public) == set(ctrlz.__all__)


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
