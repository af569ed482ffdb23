"""`ctrlz daemon`: see, start and stop the workspace daemon that commands and agent hooks use."""

from __future__ import annotations

import time
from typing import Any

import click

from . import render
from .context import State, pass_state


def _show(info: dict[str, Any]) -> None:
    if not info["running"]:
        render.out("daemon: not running (the next `ctrlz snapshot` or agent hook starts it; "
                   "or `ctrlz daemon start`)")
    elif not info.get("ready"):
        render.out(f"daemon: starting{_pid(info)}: {_progress(info)}")
        render.out("  commands walk the tree themselves until it is ready; `ctrlz daemon "
                   "status` shows how far it got, `ctrlz daemon start --wait` waits for it")
    else:
        served = info.get("served") or {}
        age = render.ago(info["started_ns"], time.time_ns())
        render.out(f"daemon: running, pid {info['pid']}, started {age}")
        dirs = info["watched_dirs"]
        how = f" ({info['watcher']})" if info.get("watcher") else ""
        render.out(f"  watching {dirs:,} director{'y' if dirs == 1 else 'ies'}{how}; snapshots "
                   "served: "
                   f"{served.get('dirty', 0)} incremental, {served.get('full', 0)} full; "
                   f"changes handed to {served.get('handed', 0)} other snapshot(s); "
                   f"restores run: {served.get('restores', 0)}")
        if info.get("unwatched_count"):
            shown = ", ".join(render.path_text(p) for p in info["unwatched"][:5])
            more = info["unwatched_count"] - min(5, len(info["unwatched"]))
            render.out(f"  {info['unwatched_count']:,} folder(s) without a watch (no watches "
                       f"left: fs.inotify.max_user_watches or daemon_max_watches): {shown}"
                       f"{f' and {more:,} more' if more > 0 else ''}; each is listed with "
                       "everything under it at every snapshot")
        if info.get("missed"):
            render.out(f"  changes no event reported, found by its checks: {info['missed']} "
                       "(each made the next snapshot take it; the log names the paths)")
        render.out(f"  stops after {info['idle_seconds']} s without requests "
                   f"(idle for {info['idle_for_s']} s)")
    failure = info.get("last_failure")
    if failure:
        render.out(f"  last start failed: {failure.get('reason')}")
    render.out(f"  log: {info['log']}")


def _pid(info: dict[str, Any]) -> str:
    return f", pid {info['pid']}" if info.get("pid") else ""


def _progress(info: dict[str, Any]) -> str:
    """Where a starting daemon is: see ``ctrlz.session.daemon.daemon_startup``."""
    phase = info.get("phase") or "loading"
    done = info.get("progress") or {}
    if phase == "placing watches":
        dirs = done.get("watched_dirs", 0)
        return f"placing watches ({dirs:,} director{'y' if dirs == 1 else 'ies'} so far)"
    if phase.startswith("priming"):
        return f"{phase} ({done.get('primed_files', 0):,} files scanned so far)"
    return str(phase)


@click.group("daemon")
def daemon_group() -> None:
    """The workspace daemon: a file watcher that keeps snapshots and rollbacks incremental.

    It starts on its own unless the `daemon` setting is false: after a `ctrlz snapshot` or
    rollback that had to walk the whole tree, and from agent hooks (SessionStart, or the
    first shell tool call). It stops after `daemon_idle_seconds` without requests.

    \b
    Examples:
      ctrlz daemon status
      ctrlz daemon start
      ctrlz daemon start --wait
      ctrlz daemon stop
    """


@daemon_group.command("status")
@render.json_option
@pass_state
def status_cmd(state: State, as_json: bool) -> None:
    """Whether the daemon runs, what it watches and what it has served."""
    from ..session import daemon_client

    info = daemon_client.status(state.workspace().store_path)
    if as_json:
        render.emit_json(info)
        return
    _show(info)


@daemon_group.command("start")
@click.option("--wait", is_flag=True,
              help="Wait until it is ready (its watches placed, its stat cache primed), not "
                   "only until it answers: for scripts that want their next command served.")
@click.option("--timeout", type=click.FloatRange(min=0), default=120.0, show_default=True,
              help="Seconds to wait until it answers (with --wait: until it is ready).")
@render.json_option
@pass_state
def start_cmd(state: State, wait: bool, timeout: float, as_json: bool) -> None:
    """Start the daemon now (it is idempotent) and return once it answers.

    It then places its watches and primes its stat cache in the background (seconds on a
    big tree); commands meanwhile walk the tree themselves, never waiting for it. `ctrlz
    daemon status` shows how far it got; --wait waits until it is ready."""
    ws = state.workspace()
    from ..session import daemon_client

    info = daemon_client.start(ws.root, ws.store_path, wait=wait, timeout=timeout)
    if as_json:
        render.emit_json(info)
    elif not info.get("reason"):
        _show(info)
    if info.get("reason"):  # none can run here (no file watcher): say why, not "in time"
        raise click.ClickException(f"cannot start the daemon: {info['reason']}")
    if not info.get("running") or (wait and not info.get("ready")) or info.get("pid") is None:
        what = "get ready" if wait and info.get("running") else "answer"
        raise click.ClickException(f"the daemon did not {what} in time; see its log: "
                                   f"{info['log']}")


@daemon_group.command("stop")
@render.json_option
@pass_state
def stop_cmd(state: State, as_json: bool) -> None:
    """Stop the daemon (hooks fall back to in-process snapshots, and start it again)."""
    from ..session import daemon_client

    was = daemon_client.stop(state.workspace().store_path)
    if as_json:
        render.emit_json({"type": "daemon", "stopped": was})
        return
    render.out("daemon stopped" if was else "daemon: not running")


COMMANDS = [daemon_group]
