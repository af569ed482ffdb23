"""``ctrlz run`` and the commands that read sessions back."""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import click

from . import render
from .context import State, pass_state

RUN_CONTEXT = {"ignore_unknown_options": True, "allow_interspersed_args": False}


@click.command("run", context_settings=RUN_CONTEXT)
@click.option("--label", "-m", metavar="L", help="A label for the session and its pre-run "
              "snapshot.")
@click.option("--no-trace", is_flag=True, help="Do not record the commands the session runs.")
@click.option("--verbose", "-v", is_flag=True, help="Say what ctrlz does, on stderr.")
@click.option("--sandbox", "sandbox_mode", is_flag=False, flag_value="", default=None,
              metavar="[=MODE]", help="Confine CMD: it may write only the workspace, the temp "
              "dirs, its own state and the package caches; secrets and ctrlz's store stay "
              "unreadable. MODE: auto (Landlock + seccomp, else bubblewrap), landlock, bwrap. "
              "Refused (exit 2) where no sandbox can be made. See docs/sandbox.md.")
@click.option("--allow-write", multiple=True, metavar="PATH", help="Also let CMD write PATH "
              "(repeatable; it is not snapshotted).")
@click.option("--deny-read", multiple=True, metavar="PATH", help="Also keep PATH unreadable "
              "(repeatable).")
@click.option("--net", metavar="on|off", default=None, help="off: no socket leaves the "
              "sandbox (default on).")
@click.option("--allow-host", multiple=True, metavar="HOST[:PORT]", help="Reach only these "
              "hosts, through ctrlz's proxy (repeatable). Under Landlock the TCP rule is by "
              "port only: a client that ignores the proxy settings may connect to any address "
              "on the proxy's port.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED, metavar="[--] CMD "
                "[ARG]...")
@pass_state
def run_cmd(state: State, label: str | None, no_trace: bool, verbose: bool,
            sandbox_mode: str | None, allow_write: tuple[str, ...], deny_read: tuple[str, ...],
            net: str | None, allow_host: tuple[str, ...], command: tuple[str, ...]) -> None:
    """Run an agent (or any command) under protection, and exit with its exit code.

    A pinned pre-run snapshot is taken first; while CMD runs, a file watcher records every
    change, a tracer records every process (strace; without it the session runs untraced and
    says so once), and snapshots are taken on a timer, after git commits, successful builds and
    idle periods. A post-run snapshot ends the session. The terminal, stdin, stdout, stderr and
    signals belong to CMD; ctrlz stays quiet unless CMD fails, and then prints the one command
    that rolls everything back.

    \b
    Examples:
      ctrlz run -- claude
      ctrlz run --label refactor -- codex exec "rename the module"
      ctrlz run --no-trace -- make test
      ctrlz run --sandbox -- claude
      ctrlz run --sandbox --net off -- make test
      ctrlz run --sandbox --allow-write ~/.gradle -- ./gradlew build

    Under --sandbox=landlock (what auto takes where it can) chmod and utimes outside the
    workspace are not stopped, and the --allow-host TCP rule is by port only; bwrap stops
    both. Every refusal is recorded: ctrlz session show.
    """
    from ..errors import UsageError
    from ..session.run.run import run_session
    from ..session.run.sandboxing import SandboxOptions

    argv = list(command)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise UsageError("ctrlz run needs a command: ctrlz run -- CMD [ARG...]")
    ws = state.workspace()

    def notify(message: str) -> None:
        click.echo(message, err=True)

    if verbose:
        notify(f"ctrlz: protecting {render.path_text(str(ws.root))}")
    sandbox = None
    if sandbox_mode is not None or allow_write or deny_read or net is not None or allow_host:
        sandbox = SandboxOptions(sandbox_mode, list(allow_write), list(deny_read), net,
                                 list(allow_host), runtime_dir())
        if sandbox_mode is None and not ws.config["sandbox_enabled"]:
            raise UsageError("--allow-write, --deny-read, --net and --allow-host shape a "
                             "sandbox: add --sandbox (or set [sandbox] enabled = true)")
    elif ws.config["sandbox_enabled"]:
        sandbox = SandboxOptions(runtime_dir=runtime_dir())
    result = run_session(ws, argv, label=label, trace=not no_trace, notify=notify,
                         sandbox=sandbox)
    if verbose:
        kinds = ", ".join(s.type for s in result.snapshots)
        notify(f"ctrlz: session {result.session_id}: snapshots {kinds}")
    code = result.exit_code
    if result.denials:
        notify(refused_line(result.denials, result.session_id, result.denials_dropped))
    if code != 0 and result.pre_run is not None:
        created, modified, deleted = result.changes
        how = f"exited with {code}" if code > 0 else f"was killed by signal {-code}"
        notify(f"ctrlz: {argv[0]} {how}; the session changed {created} created, "
               f"{modified} modified, {deleted} deleted")
        for line in result.changed_paths[:10]:
            notify(f"  {line}")
        if len(result.changed_paths) > 10:
            notify(f"  ... and {len(result.changed_paths) - 10} more (ctrlz events "
                   f"{result.session_id})")
        notify(f"ctrlz: roll it all back with: ctrlz rollback {result.pre_run.id}")
    state.close()
    sys.stdout.flush()
    if code < 0:  # killed by a signal: die the same way, like a shell would report it
        if -code not in (signal.SIGKILL, signal.SIGSTOP):  # those two have no handler
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    sys.exit(code)


def runtime_dir() -> str:
    """The service's runtime dir (its token, its socket), made now if missing: a sandbox can
    only hide what exists when it starts, and a service started later would put its token
    there, readable from inside (Landlock grants the rights of whatever tree a new path
    appears in)."""
    from ..errors import UsageError
    from ..service.runtime import ensure_run_dir, run_dir

    try:
        return str(ensure_run_dir())
    except (OSError, UsageError):
        return str(run_dir())


def refused_line(denials: list[dict[str, Any]], session_id: str, dropped: int = 0) -> str:
    """The run summary's line on a sandbox's refusals: ``the sandbox refused 3 writes outside
    the workspace (2 paths: ~/.npmrc, /etc/hosts)``, and the connections the same way.
    ``dropped``: refused writes past the cap (the observer's or the tracer's), counted but
    not kept."""
    home = os.path.expanduser("~")

    def short(path: str) -> str:
        if home != "/" and (path == home or path.startswith(home + "/")):
            path = "~" + path[len(home):]
        return render.path_text(path)

    parts = []
    for kind, noun in (("fs", "write"), ("net", "connection")):
        rows = [d for d in denials if d["kind"] == kind]
        extra = dropped if kind == "fs" else 0
        if not rows:
            continue
        paths = list(dict.fromkeys(short(d["path"]) for d in rows))
        listed = ", ".join(paths[:5]) + (f", ... {len(paths) - 5} more" if len(paths) > 5
                                         else "")
        where = " outside the workspace" if kind == "fs" else ""
        label = "path" if kind == "fs" else "host"
        count = len(rows) + extra
        kept = f"; {extra} more not kept" if extra else ""
        parts.append(f"{count} {noun}{'' if count == 1 else 's'}{where} "
                     f"({len(paths)} {label}{'' if len(paths) == 1 else 's'}: {listed}{kept})")
    return (f"ctrlz: the sandbox refused {' and '.join(parts)}; see ctrlz session show "
            f"{session_id}")


def exit_text(code: int | None) -> str:
    """A session's exit status as ``ctrlz trace`` shows a process's: a number, or the
    signal's name (SIGKILL) for a command killed by one."""
    from ..types import signal_name

    if code is None:
        return "-"
    return signal_name(-code) if code < 0 else str(code)


@click.command("sessions")
@render.json_option
@pass_state
def sessions_cmd(state: State, as_json: bool) -> None:
    """List the sessions of this workspace, newest first.

    \b
    Examples:
      ctrlz sessions
      ctrlz sessions --json
    """
    from ..types import clip

    rows = list(reversed(state.workspace().session_db.sessions()))
    if as_json:
        render.emit_json([r.to_json() for r in rows])
        return
    render.table(
        ["SESSION", "STARTED", "EXIT", "SNAPSHOTS", "COMMAND"],
        [[r.id, r.started[:19].replace("T", " "),
          "running" if r.ended is None else exit_text(r.exit_code), str(r.snapshot_count),
          clip(" ".join(r.command), 60)] for r in rows])
    render.note(f"{len(rows)} session{'' if len(rows) == 1 else 's'}")


@click.group("session")
def session_group() -> None:
    """Look at one session of `ctrlz run`.

    \b
    Examples:
      ctrlz session show            the newest session's timeline
      ctrlz session show sess_k2x --json
    """


@session_group.command("show")
@click.argument("session_id", required=False, metavar="[ID]")
@render.json_option
@pass_state
def session_show_cmd(state: State, session_id: str | None, as_json: bool) -> None:
    """A timeline of one session (default: the newest): snapshots, file events, commands,
    and what a sandboxed session's sandbox refused (writes outside, connections).

    \b
    Examples:
      ctrlz session show
      ctrlz session show sess_k2x --json
    """
    from ..session import records
    from ..types import clip

    ws = state.workspace()
    row = records.resolve_session(ws, session_id)
    if as_json:
        render.emit_json(records.shown(ws, row))
        return
    items = records.timeline(ws, row)
    render.out(f"session {row.id}: {' '.join(row.command)}")
    code = "running" if row.ended is None else f"exit {exit_text(row.exit_code)}"
    trace = "traced" if row.traced else f"untraced ({row.trace_note})"
    render.out(f"started {row.started}, {code}, {row.snapshot_count} snapshots, {trace}")
    for item in items:
        t = item.timestamp[11:23]
        d = item.data
        if item.kind == "snapshot":
            label = f' "{d["label"]}"' if d["label"] else ""
            render.out(f"{t}  snapshot  {d['snapshot']} {d['type']}{label}")
        elif item.kind == "file":
            render.out(f"{t}  {d['action']:<9} {render.path_text(d['path'])}")
        else:
            status = d["signal"] or ("running" if d["exit_code"] is None else d["exit_code"])
            render.out(f"{t}  exec      {clip(' '.join([d['command'], *d['args']]), 70)} "
                       f"[{status}]")
    refused = records.denials(ws, row)
    if refused:
        render.out(f"the sandbox refused {len(refused)}:")
    for d in refused:
        what = (f"{d['syscall']} {render.path_text(d['path'])}" if d["kind"] == "fs"
                else f"connect {d['path']}")
        who = f"{d['exe'] or '?'}[{d['pid']}] " if d["pid"] is not None else ""
        render.out(f"{d['timestamp'][11:23]}  denied    {who}{what} ({d['errno']})")


@click.command("trace")
@click.argument("session_id", required=False, metavar="[ID]")
@click.option("--grep", metavar="PATTERN", help="Only commands matching this regex.")
@click.option("--failed", is_flag=True, help="Only commands that failed or were killed.")
@render.json_option
@pass_state
def trace_cmd(state: State, session_id: str | None, grep: str | None, failed: bool,
              as_json: bool) -> None:
    """Every process a session started: pid, ppid, argv, cwd, exit code, duration.

    \b
    Examples:
      ctrlz trace
      ctrlz trace --grep '^git '
      ctrlz trace sess_k2x --failed --json
    """
    from ..session import records
    from ..types import clip

    ws = state.workspace()
    row = records.resolve_session(ws, session_id)
    events = records.trace(ws, row, grep, failed)
    if as_json:
        render.emit_json(events)
        return
    if not row.traced:
        render.note(f"session {row.id} was not traced: {row.trace_note}")
    render.table(
        ["TIME", "PID", "PPID", "EXIT", "DURATION", "COMMAND"],
        [[e["timestamp"][11:23], str(e["pid"]), str(e["ppid"]),
          e["signal"] or ("-" if e["exit_code"] is None else str(e["exit_code"])),
          "-" if e["duration"] is None else f"{e['duration']:.3f}s",
          clip(" ".join([e["command"], *e["args"]]), 70)] for e in events])


@click.command("events")
@click.argument("session_id", required=False, metavar="[ID]")
@click.option("--path", "path_glob", metavar="GLOB", help="Only paths matching GLOB.")
@render.json_option
@pass_state
def events_cmd(state: State, session_id: str | None, path_glob: str | None,
               as_json: bool) -> None:
    """The file events of a session: created, modified, deleted, restored.

    \b
    Examples:
      ctrlz events
      ctrlz events --path 'src/*'
      ctrlz events sess_k2x --json
    """
    from ..session import records

    ws = state.workspace()
    row = records.resolve_session(ws, session_id)
    events = records.file_events(ws, row, path_glob)
    if as_json:
        render.emit_json(events)
        return
    for e in events:
        render.out(f"{e['timestamp'][11:23]}  {e['action']:<9} {render.path_text(e['path'])}")
    render.note(f"{len(events)} file events")


COMMANDS = [run_cmd, sessions_cmd, session_group, trace_cmd, events_cmd]
