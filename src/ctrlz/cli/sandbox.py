"""``ctrlz sandbox check``: what this machine offers for ``ctrlz run --sandbox``."""

from __future__ import annotations

import sys

import click

from . import render


@click.group("sandbox")
def sandbox_group() -> None:
    """What `ctrlz run --sandbox` can use on this machine.

    \b
    Examples:
      ctrlz sandbox check
      ctrlz sandbox check --json
    """


@sandbox_group.command("check")
@render.json_option
def check_cmd(as_json: bool) -> None:
    """Say what this machine offers: the Landlock ABI, bwrap and user namespaces, seccomp,
    and which mechanism `--sandbox=auto` takes. Exits 0 when a sandbox can be made, else 2
    with the cause.

    \b
    Examples:
      ctrlz sandbox check
      ctrlz sandbox check --json
    """
    from ..sandbox.probe import support

    info = support()
    if as_json:
        render.emit_json(info.to_json())
    else:
        landlock = info.landlock_reason or f"ABI {info.landlock_abi}"
        bwrap = info.bwrap_reason or f"{info.bwrap} (user namespaces work)"
        click.echo(f"landlock: {landlock}")
        click.echo(f"bwrap:    {bwrap}")
        click.echo(f"seccomp:  {'yes' if info.seccomp else info.seccomp_reason}")
        click.echo(f"auto:     {info.auto or 'none: no sandbox can be made'}")
    if info.auto is None:
        if not as_json:
            click.echo(f"ctrlz: {info.reason}", err=True)
        sys.exit(2)


COMMANDS = [sandbox_group]
