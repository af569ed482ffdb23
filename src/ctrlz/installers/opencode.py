"""The OpenCode plugin ``ctrlz install opencode`` writes to ``.opencode/plugins/ctrlz.js``.

OpenCode has no command hooks: it loads JS plugins into its own process (Bun) and awaits their
``tool.execute.before`` before a tool runs. The plugin hands each event to ``ctrlz-hook
opencode`` as JSON (see :mod:`ctrlz.hooks.opencode`) and waits for it, so the pre-image is
taken before the tool writes. It never throws — a throwing before-hook is how OpenCode blocks a
tool, and ctrlz must never block one — and where ``ctrlz-hook`` is not on PATH it says so once.
A subagent runs in a child session (``parentID``); the plugin files its calls under the root
session, so a rewind of the conversation covers them. The file holds no machine-specific path,
so a team can commit it. Checked against ``@opencode-ai/plugin`` 1.18.33's ``Hooks`` type.
"""

PLUGIN = """\
// Added by `ctrlz install opencode`; `ctrlz uninstall opencode` removes it.
// Hands each tool call to ctrlz (`ctrlz-hook opencode`, from PATH) before it runs, so that
// `ctrlz rewind` can undo it, shell commands included. It never throws: ctrlz never blocks a tool.
import { spawnSync } from "node:child_process";

const parents = new Map();
let warned = false;

function root(id) {
  let seen = 0;
  while (parents.has(id) && seen++ < 64) id = parents.get(id);
  return id;
}

function hook(directory, event, fields) {
  try {
    const payload = JSON.stringify({ hook_event_name: event, cwd: directory, ...fields });
    const run = spawnSync("ctrlz-hook", ["opencode"], {
      input: payload, timeout: 30000, stdio: ["pipe", "ignore", "ignore"],
    });
    if (run.error && run.error.code === "ENOENT" && !warned) {
      warned = true;
      console.error("ctrlz: ctrlz-hook is not on PATH; this session is not protected");
    }
  } catch {
    // never fail the agent
  }
}

export const CtrlzPlugin = async ({ directory }) => ({
  event: async ({ event }) => {
    if (event?.type !== "session.created") return;
    const info = event.properties?.info ?? {};
    if (info.parentID) parents.set(info.id, info.parentID);
    else hook(directory, "session.created", { session_id: info.id });
  },
  "chat.message": async (input) => {
    if (!parents.has(input.sessionID)) {
      hook(directory, "chat.message", { session_id: input.sessionID,
                                        message_id: input.messageID });
    }
  },
  "tool.execute.before": async (input, output) => {
    hook(directory, "tool.execute.before", {
      session_id: root(input.sessionID), tool_use_id: input.callID, tool_name: input.tool,
      tool_input: output?.args ?? {},
    });
  },
  "tool.execute.after": async (input) => {
    hook(directory, "tool.execute.after", {
      session_id: root(input.sessionID), tool_use_id: input.callID, tool_name: input.tool,
      tool_input: input.args ?? {},
    });
  },
});
"""
