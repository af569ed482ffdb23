"""The ACP face of ctrlz: ``ctrlz acp -- AGENT [ARGS]``, a stdio proxy between an ACP client (an
editor such as Zed) and any ACP agent, which records what the agent changes and adds harn's
restore surface to the conversation (see ``docs/acp.md``).

Words, as ACP uses them: the *client* is the editor, which owns the files and terminals; the
*agent* asks it to write files (``fs/write_text_file``) and run commands (``terminal/create``)
and reports its *tool calls* (``session/update``) while it works on one *prompt turn*
(``session/prompt``, until its response). ctrlz captures a *pre-image* of each file before the
client writes it, keyed by the ACP ``toolCallId``, and a workspace snapshot before each command,
with the same tool-call layer the agent hooks use (:mod:`ctrlz.toolcalls`); a restore goes
through the one restore engine.

- :mod:`ctrlz.acp.proxy` -- the relay: the agent subprocess, both directions, the exit code;
- :mod:`ctrlz.acp.framing` -- newline-delimited JSON in and out;
- :mod:`ctrlz.acp.rpc` -- JSON-RPC message kinds, replies, and ctrlz errors as JSON-RPC errors;
- :mod:`ctrlz.acp.sessions` -- per session: workspace, tool calls, turns;
- :mod:`ctrlz.acp.capture` -- recording before the client acts, never failing the conversation;
- :mod:`ctrlz.acp.extensions` -- the capabilities and the ``session/restore_tool_call``,
  ``session/rollback`` and ``session/redo`` methods;
- :mod:`ctrlz.acp.turns` -- a turn rolled back (a rewind) and redone (its undo).

Only this package imports the ACP SDK (``agent-client-protocol``, import name ``acp``).
"""
