"""The MCP face of ctrlz: Capsem's seven ``snapshots_*`` tools plus ``snapshots_diff``,
``snapshots_restore``, ``snapshots_rewind`` (to just before an agent's tool call or turn) and
``snapshots_undo`` / ``snapshots_redo`` (the CLI's undo stack).

- :mod:`ctrlz.mcp.queries` -- the read-only tools (list, changes, history, diff) and their
  text renderings, as plain functions on a :class:`~ctrlz.workspace.Workspace`;
- :mod:`ctrlz.mcp.actions` -- the tools that change things (create, delete, compact, revert,
  restore, rewind, undo, redo); the rules for what may be deleted and how snapshots fold into
  one are :mod:`ctrlz.session.policy`'s;
- :mod:`ctrlz.mcp.checkpoints` -- ``cp-N`` aliases, ages and pool sizes as agents see them;
- :mod:`ctrlz.mcp.text` -- pagination by characters and wire-safe text;
- :mod:`ctrlz.mcp.server` wires the tools into an ``mcp`` SDK v2 ``MCPServer`` (stdio). Only it
  imports the SDK.

Differences from Capsem, on purpose:

- Changes are found by content (object ids), never by size.
- A snapshot is the full state of the workspace, so compaction keeps the newest of the given
  snapshots (renamed) and drops the older ones: a file deleted by then stays deleted. Capsem
  merged the file sets and brought deleted files back.
- Pagination slices ``str`` (code points), never bytes.
- Paths are checked lexically against the workspace root: ``a..b.txt`` is a name, ``../x`` and
  ``/etc/passwd`` are refused.
- Snapshot names are 1-64 characters of ``[A-Za-z0-9_-]`` (Capsem's contract), checked by
  :func:`ctrlz.session.policy.check_name`; the CLI's ``-m`` labels stay free text.
- ``checkpoint`` values are stable snapshot ids; ``cp-N`` (N back from the newest: ``cp-0``
  is the newest) is accepted as input and reported as ``cp`` alongside.

See ``docs/mcp.md``.
"""
