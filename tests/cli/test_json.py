"""Every --json output validates against its schema (tests/cli/schemas.py, docs/json.md)."""

from __future__ import annotations

from pathlib import Path

import jsonschema

from .conftest import run
from .schemas import SCHEMAS


def check(command: str, data: object) -> None:
    jsonschema.validate(data, SCHEMAS[command])


def test_every_json_output_matches_its_schema(ws: Path, tmp_path: Path) -> None:
    seen: set[str] = set()

    def j(command: str, *args: str) -> object:
        data = run(command, *args, "--json", cwd=ws).json()
        check(command, data)
        seen.add(command)
        return data

    j("init")
    j("snapshot", "-m", "base", "--pin")
    (ws / "README.md").write_text("changed\n")
    (ws / "docs" / "guide.txt").unlink()
    j("snapshot", "-m", "two")
    j("list")
    j("show", "base")
    j("pin", "two")
    j("unpin", "two")
    j("diff")
    j("diff", "base", "two")
    j("changes", "--since", "base")
    j("history", "README.md")
    j("history", "docs/guide.txt")
    j("status")
    j("config")
    j("rollback", "base", "--dry-run")
    j("rollback", "base")
    j("undo")
    j("redo")
    j("revert", "README.md", "--from", "two")
    j("restore", "base", "--to", str(tmp_path / "out"))
    j("prune", "--keep", "3", "--dry-run")
    j("prune", "--keep", "3")
    j("gc")
    j("verify")
    j("snapshot", "-m", "three")
    j("rm", "three")
    assert seen == set(SCHEMAS)


def test_json_keeps_messages_off_stdout(ws: Path) -> None:
    r = run("rm", "--json", "latest", cwd=ws, ok=False)
    assert r.out == ""
    run("snapshot", cwd=ws)
    r = run("rm", "latest", "--json", cwd=ws)
    assert r.json()["removed"] and r.err == ""


def test_json_is_declared_identically() -> None:
    import click

    from ctrlz.cli.app import cli

    ctx = click.Context(cli)
    for command in sorted(SCHEMAS):
        options = [p for p in cli.get_command(ctx, command).params if p.name == "as_json"]
        assert len(options) == 1, command
        assert options[0].opts == ["--json"] and options[0].is_flag
        assert options[0].help == "Print machine-readable JSON on stdout (messages go to stderr)."
