"""Agent integration commands: ``ctrlz hook``, ``ctrlz install``/``uninstall``, ``ctrlz rewind``."""

from __future__ import annotations

import click

from . import render
from .context import State, pass_state
from .rolling import left_alone

AGENTS = ("claude", "gemini", "codex", "cursor", "copilot", "opencode", "droid", "auggie")


@click.command("hook", context_settings={"ignore_unknown_options": True,
                                         "allow_extra_args": True})
@click.argument("agent", required=False, default="")
@click.argument("event", required=False, default="")
def hook_cmd(agent: str, event: str) -> int:
    """Handle one agent hook: the agent's hook JSON on stdin.

    AGENT is claude, gemini, codex, cursor, copilot, opencode, droid or auggie; EVENT is the
    event name for agents whose payload lacks it (Copilot CLI). Installed hooks run `ctrlz-hook
    AGENT`, the same code without the CLI's start-up cost. It always exits 0 and prints
    nothing, so it can never block or confuse the agent; errors go to hook-errors.jsonl and
    hooks.log in the store (`ctrlz status` shows the recent ones).

    \b
    Examples:
      echo '{"hook_event_name": "UserPromptSubmit", ...}' | ctrlz hook claude
    """
    from ..hooks.runner import run

    return run(agent, event=event)


def _scope_option(f):  # noqa: ANN001, ANN202
    f = click.option("--user", "scope", flag_value="user",
                     help="The agent's user settings (every project).")(f)
    return click.option("--project", "scope", flag_value="project", default=True,
                        help="This project's settings (default).")(f)


def _print_install(result, as_json: bool) -> None:  # noqa: ANN001
    if as_json:
        render.emit_json(result.to_json())
        return
    for f in result.files:
        if f.diff:
            render.out(f.diff.rstrip("\n"))
    for n in result.notes:
        render.note(n)
    changed = [f.path for f in result.files if f.diff]
    verb = {"install": "Would change" if result.dry_run else "Changed",
            "uninstall": "Would change" if result.dry_run else "Changed"}[result.action]
    render.note(f"{verb}: {', '.join(changed)}" if changed else "Nothing to change.")
    if result.dry_run:
        render.note("Nothing was written (dry run).")


@click.command("install")
@click.argument("agent", required=False, type=click.Choice(AGENTS))
@click.option("--detect", is_flag=True,
              help="Install into every agent found on this machine or in this project.")
@_scope_option
@click.option("--dry-run", is_flag=True, help="Show the diff; write nothing.")
@render.json_option
def install_cmd(agent: str | None, detect: bool, scope: str, dry_run: bool,
                as_json: bool) -> None:
    """Register ctrlz's hooks and MCP server with AGENT (merging, never clobbering).

    AGENT is claude, gemini, codex, cursor, copilot, opencode, droid or auggie. With --project
    (the default) the hooks go into the agent's local, uncommitted settings where it has them
    (Claude Code: .claude/settings.local.json), and the current directory is protected (`ctrlz
    init`) if it is not yet. Hooks run `ctrlz-hook` from PATH, never a path of this machine, so
    files a team commits stay portable. Shows the diff of every file it changes; installing
    twice changes nothing; `ctrlz uninstall AGENT` removes exactly what was added.

    \b
    Examples:
      ctrlz install claude
      ctrlz install --detect --dry-run
      ctrlz install gemini --user
    """
    from ..errors import UsageError
    from ..installers import detect as detect_agents
    from ..installers import install

    if (agent is None) == (not detect):
        raise UsageError("give an AGENT or --detect (see ctrlz install --help)")
    project = _project(scope, protect=not dry_run)
    if not detect:
        _print_install(install(agent, scope, dry_run=dry_run, project=project), as_json)
        return
    found = detect_agents(project)
    results = [install(name, scope, dry_run=dry_run, project=project) for name in found]
    if as_json:
        render.emit_json({"detected": found, "installs": [r.to_json() for r in results]})
        return
    if not found:
        render.note("No agent found on PATH or in this project; name one: ctrlz install AGENT")
    for name, result in zip(found, results, strict=True):
        render.note(f"{name}: found ({found[name]})")
        _print_install(result, False)


@click.command("uninstall")
@click.argument("agent", type=click.Choice(AGENTS))
@_scope_option
@click.option("--dry-run", is_flag=True, help="Show the diff; write nothing.")
@render.json_option
def uninstall_cmd(agent: str, scope: str, dry_run: bool, as_json: bool) -> None:
    """Remove exactly the hooks and MCP server `ctrlz install AGENT` added.

    Hooks and servers changed by hand since are left alone and listed. What an older ctrlz
    installed (into other files) is removed too.

    \b
    Examples:
      ctrlz uninstall claude
      ctrlz uninstall codex --user --dry-run
    """
    from ..installers import uninstall

    _print_install(uninstall(agent, scope, dry_run=dry_run, project=_project(scope)), as_json)


def _project(scope: str, protect: bool = False) -> str:
    """The project directory for --project: the protected workspace containing the current
    directory, or the current directory itself (protected first when ``protect``)."""
    if scope != "project":
        return "."
    from ..errors import WorkspaceError
    from ..toolcalls.store import find_workspace

    try:
        return str(find_workspace(".")[0])
    except WorkspaceError:
        if protect:
            import os

            from ..workspace import Workspace

            Workspace.init(".").close()
            render.note(f"Protecting {os.getcwd()} (ctrlz init).")
        return "."


@click.command("rewind")
@click.argument("target", required=False)
@click.option("--list", "list_", is_flag=True, help="List the session's turns and tool calls.")
@click.option("--session", "session_id", metavar="ID",
              help="The agent session (default: the latest one in this workspace).")
@click.option("--dry-run", is_flag=True, help="Show what would change; change nothing.")
@click.option("--force", is_flag=True,
              help="Also put back files changed after the tool calls, by hand or by "
                   "another agent session's tool calls (captured first).")
@click.option("--git", "git", type=click.Choice(["auto", "keep", "restore"]), default="auto",
              show_default=True,
              help="What becomes of .git when the rewind passes a shell call: keep (leave it "
                   "as it is), restore (put it back too), auto (restore unless that drops "
                   "commits, else refuse).")
@render.json_option
@pass_state
def rewind_cmd(state: State, target: str | None, list_: bool, session_id: str | None,
               dry_run: bool, force: bool, git: str, as_json: bool) -> None:
    """Put the workspace back to just before an agent's tool call or turn, Bash included.

    TARGET is a tool_use_id or a turn number (see --list). A safety snapshot is taken first,
    including every file the tool calls touched (ignored ones too); `ctrlz undo` takes the
    rewind back. A file whose content changed after the tool calls (an edit by hand) is left
    alone and listed, unless --force; so is a file a later tool call of another agent session
    changed (that session's work, named in the listing).

    \b
    Examples:
      ctrlz rewind --list             (every session, its agent, the latest's calls)
      ctrlz rewind toolu_01ABC --dry-run
      ctrlz rewind 3
    """
    import importlib

    from ..errors import UsageError

    rw = importlib.import_module("ctrlz.toolcalls.restore.rewinds")

    ws = state.workspace()
    if list_ or target is None:
        if target is not None:
            raise UsageError("give either --list or a TARGET")
        _print_timeline(rw.timeline(ws, session_id), rw.agent_sessions(ws), as_json)
        return
    result = rw.rewind(ws, target, session_id, dry_run=dry_run, force=force, git=git)
    if as_json:
        render.emit_json(result.to_json())
        return
    verb = "Would rewind" if dry_run else "Rewound"
    render.out(f"{verb} session {result.session_id} to just before {target} "
               f"({len(result.tool_calls)} tool call(s) undone"
               + (f", shell changes from {result.shell_snapshot}" if result.shell_snapshot
                  else "") + ")")
    for g in result.git:
        render.out(g["summary"])
    for p in result.changed_paths:
        render.out(f"  {render.path_text(p)}")
    for err, text in left_alone((k["path"], k["reason"]) for k in result.skipped):
        render.echo(text, err=err)
    if dry_run:
        render.note("Nothing was changed (dry run).")
    else:
        render.out(f"Safety snapshot: {result.safety}")
        render.out(f"Undo with: ctrlz undo  (or: ctrlz rollback {result.safety})")


def _print_timeline(items: list[dict], sessions: list[dict], as_json: bool) -> None:
    if as_json:
        render.emit_json({"tool_calls": items, "sessions": sessions})
        return
    if len(sessions) > 1:
        render.table(["session", "agent", "turns", "last activity"],
                     [[s["session_id"], s["agent"] or "-", str(s["turns"]),
                       s["last_activity"]] for s in sessions])
    if not items:
        render.note("No tool calls recorded in this session.")
        return
    render.out(f"Session {items[0]['session_id']} ({items[0]['agent'] or 'unknown agent'})")
    rows = []
    for i in items:
        what = i["command"] if i["kind"] == "bash" else ", ".join(i["captured_paths"])
        rows.append([str(i["turn"]), i["taken_at"], i["agent"] or "-", i["tool"] or "-",
                     what or "-", i["tool_use_id"]])
    render.table(["turn", "time", "agent", "tool", "paths / command", "tool_use_id"], rows)


COMMANDS: list = [hook_cmd, install_cmd, uninstall_cmd, rewind_cmd]
