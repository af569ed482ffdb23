"""docs/cli.md shows every command's real output; docs/json.md documents every schema."""

from __future__ import annotations

from pathlib import Path

from .schemas import SCHEMAS
from .test_errors import COMMANDS

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_cli_doc_shows_every_command() -> None:
    text = (DOCS / "cli.md").read_text()
    for command in COMMANDS:
        assert f"$ ctrlz {command}" in text or f" ctrlz {command}" in text, command
    assert "Traceback" not in text


def test_json_doc_covers_every_command() -> None:
    text = (DOCS / "json.md").read_text()
    for command in SCHEMAS:
        assert f"`ctrlz {command} --json`" in text, command
