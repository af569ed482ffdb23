"""``ctrlz mcp``: the MCP server over stdio (see ``ctrlz.mcp``)."""

from __future__ import annotations

COMMANDS: list = []
