"""``ctrlz service …`` (the per-user service: API, dashboard, watchers) and ``ctrlz ui``."""

from __future__ import annotations

from typing import Any

import click

from . import render


def _show(info: dict[str, Any]) -> None:
    if not info.get("running"):
        render.out("service: not running (start it with `ctrlz service start`)")
        return
    if info.get("starting"):
        render.out(f"service: starting (pid {info.get('pid')})")
        return
    gateway = info["gateway"]["url"] or "off"
    watchers = ", ".join(f"{n} {s}" for s, n in sorted(info["watchers"].items())) or "none"
    render.out(f"service: running, pid {info['pid']}, up {info['uptime_seconds']:.0f} s, "
               f"version {info['version']}")
    render.out(f"  socket:   {info['socket']}")
    render.out(f"  gateway:  {gateway}  (open the dashboard with `ctrlz ui --open`)")
    render.out(f"  watchers: {watchers}")


@click.group("service")
def service_group() -> None:
    """The ctrlz service: one per user, with the HTTP API, the web dashboard and a file
    watcher for every registered workspace.

    It is never required: the CLI, agent hooks and the MCP server work without it. Its API
    listens on a Unix socket only you can open (docs/api.md); the dashboard on 127.0.0.1
    behind a token (`ctrlz ui`). Runtime files live in $XDG_RUNTIME_DIR/ctrlz/ (else
    $CTRLZ_HOME/run/).

    \b
    Examples:
      ctrlz service start           start it in the background
      ctrlz ui --open               open the dashboard
      ctrlz service register .      watch this workspace
      ctrlz service install         keep it running with systemd (user unit)
    """


@service_group.command("run")
@click.option("--port", type=click.IntRange(0, 65535), default=None,
              help="Gateway port (default 19322 or $CTRLZ_GATEWAY_PORT, else the next free "
                   "one; 0: any free port).")
@click.option("--no-gateway", is_flag=True, help="Serve the socket only (no dashboard).")
def run_cmd(port: int | None, no_gateway: bool) -> None:
    """Run the service in the foreground until Ctrl+C or SIGTERM.

    Logs go to stderr. This is what the systemd unit runs.

    \b
    Examples:
      ctrlz service run
      ctrlz service run --port 8765
    """
    from ..service.server import run, setup_logging

    setup_logging()
    raise SystemExit(run(port, gateway=not no_gateway))


@service_group.command("start")
@click.option("--port", type=click.IntRange(0, 65535), default=None,
              help="Gateway port (see `ctrlz service run --help`).")
@click.option("--timeout", type=click.FloatRange(min=0), default=30.0, show_default=True,
              help="Seconds to wait until it answers.")
@render.json_option
def start_cmd(port: int | None, timeout: float, as_json: bool) -> None:
    """Start the service in the background (through systemd when its unit is installed) and
    wait until it answers. Does nothing if it already runs.

    \b
    Examples:
      ctrlz service start
      ctrlz service start --json
    """
    from ..service import client
    from ..service.manager import manager

    keeper = manager()  # systemd or launchd

    already = client.running()
    if keeper.installed() and not already and keeper.available()[0]:
        keeper.start()
        info = client.wait_ready(timeout)
    else:
        info = client.start(timeout, port)
    url = ((info or {}).get("gateway") or {}).get("url") or ""
    if already and port is not None and not url.endswith(f":{port}"):
        render.note(f"ctrlz: the service already runs ({url or 'no gateway'}); --port "
                    f"{port} applies when it starts: `ctrlz service stop` first")
    if as_json:
        render.emit_json(info)
        return
    _show(info)


@service_group.command("stop")
@render.json_option
def stop_cmd(as_json: bool) -> None:
    """Stop the service and its watchers (through systemd when it runs the unit).

    \b
    Examples:
      ctrlz service stop
    """
    from ..service import client
    from ..service.manager import manager

    keeper = manager()  # systemd or launchd

    if keeper.active():
        keeper.stop()
        was = True
    else:
        was = client.stop()
    if as_json:
        render.emit_json({"type": "service-stop", "stopped": was})
        return
    render.out("service stopped" if was else "service: not running")


@service_group.command("status")
@render.json_option
def status_cmd(as_json: bool) -> None:
    """Whether the service runs: pid, uptime, socket, gateway URL, watchers.

    \b
    Examples:
      ctrlz service status
      ctrlz service status --json
    """
    from ..service import client

    info = client.status()
    if as_json:
        render.emit_json(info)
        return
    _show(info)


@service_group.command("install")
@render.json_option
def install_cmd(as_json: bool) -> None:
    """Install and start a systemd user unit (ctrlz.service, Restart=always), or on macOS a
    launchd agent (~/Library/LaunchAgents/dev.ctrlz.service.plist, KeepAlive).

    Without either, nothing is written: it says so, prints how to run the service by
    hand, and exits 1.

    \b
    Examples:
      ctrlz service install
      systemctl --user status ctrlz.service
    """
    from ..errors import CtrlzError
    from ..service.manager import manager

    keeper = manager()  # systemd or launchd

    ok, reason = keeper.available()
    if not ok:
        if as_json:
            render.emit_json({"type": "service-install", "installed": False,
                              "reason": reason, "by_hand": keeper.manual_steps()})
        else:
            render.note("Run it by hand instead:")
            for step in keeper.manual_steps():
                render.note(f"  {step}")
        raise CtrlzError(f"cannot install the service: {reason}")
    path = keeper.install()
    if as_json:
        render.emit_json({"type": "service-install", "installed": True, "unit": str(path)})
        return
    render.out(f"installed and started {path}")
    render.note("Open the dashboard with: ctrlz ui --open")


@service_group.command("uninstall")
@render.json_option
def uninstall_cmd(as_json: bool) -> None:
    """Stop, disable and remove the systemd user unit or launchd agent (your stores are
    untouched).

    \b
    Examples:
      ctrlz service uninstall
    """
    from ..service.manager import manager

    keeper = manager()  # systemd or launchd

    was = keeper.uninstall()
    if as_json:
        render.emit_json({"type": "service-uninstall", "removed": was,
                          "unit": str(keeper.unit_path())})
        return
    render.out(f"removed {keeper.unit_path()}" if was else "no ctrlz unit was installed")


def _workspace_json(w: Any) -> None:
    render.emit_json(w.to_json())


@service_group.command("register")
@click.argument("directory", required=False, default=".", metavar="[DIR]",
                type=click.Path(file_okay=False, exists=True))
@render.json_option
def register_cmd(directory: str, as_json: bool) -> None:
    """Have the service watch a workspace (protecting it first, like `ctrlz init`).

    Works whether or not the service runs; a running service starts the watcher within a
    second.

    \b
    Examples:
      ctrlz service register
      ctrlz service register ~/code/app --json
    """
    import os

    from ..session.registry import register

    w = register(os.path.abspath(directory))
    if as_json:
        _workspace_json(w)
        return
    render.out(f"registered {render.path_text(str(w.root))} ({w.id})")


@service_group.command("unregister")
@click.argument("directory", required=False, default=".", metavar="[DIR|ID]")
@render.json_option
def unregister_cmd(directory: str, as_json: bool) -> None:
    """Stop watching a workspace; its store and snapshots stay.

    \b
    Examples:
      ctrlz service unregister
      ctrlz service unregister app-041e1f2d2ca83e6c
    """
    import os

    from ..session.registry import unregister

    ref = os.path.abspath(directory) if os.path.isdir(directory) else directory
    w = unregister(ref)
    if as_json:
        _workspace_json(w)
        return
    render.out(f"unregistered {render.path_text(str(w.root))} ({w.id}); its snapshots are kept")


@click.command("ui")
@click.option("--open", "open_", is_flag=True, help="Open it in the default web browser.")
@render.json_option
def ui_cmd(open_: bool, as_json: bool) -> None:
    """Print the dashboard's address with a one-time login (and with --open, open it).

    Starts the service first if it is not running. The address works once, for two
    minutes: opening it sets a login cookie (HttpOnly, SameSite=Strict) in that browser.

    \b
    Examples:
      ctrlz ui --open
      ctrlz ui --json
    """
    from ..service import client

    if not client.running():
        info = client.start()
        render.note(f"started the ctrlz service (pid {info['pid']}); stop it with "
                    "`ctrlz service stop`")
    login = client.request("POST", "/v1/ui/login")
    opened = False
    if open_:
        import webbrowser

        try:
            opened = webbrowser.open(login["url"])
        except webbrowser.Error:
            opened = False
        if not opened:
            render.note("no web browser could be opened here; open the address yourself")
    if as_json:
        render.emit_json({"type": "ui", "url": login["url"], "expires_in": login["expires_in"],
                          "opened": opened})
        return
    render.out(login["url"])


COMMANDS = [service_group, ui_cmd]
