"""The MCP face of ctrlz: Capsem's seven ``snapshots_*`` tools plus ``snapshots_diff`` and
``snapshots_restore``.

- :mod:`ctrlz.mcp.tools` holds the logic (change listing, compaction, pagination, result shapes)
  as plain functions on a :class:`~ctrlz.workspace.Workspace`; it does not import the SDK.
- :mod:`ctrlz.mcp.server` wires those functions into an ``mcp`` SDK v2 ``MCPServer`` (stdio).

See ``docs/mcp.md``.
"""
