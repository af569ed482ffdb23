"""The command group loads command modules on demand; what it says without loading them must
be what the commands say themselves."""

from __future__ import annotations

import subprocess
import sys
from importlib import import_module

import click
import pytest

from ctrlz.cli import app
from ctrlz.cli.app import COMMANDS, cli


def eager_group() -> click.Group:
    """The same group the ordinary way: every command module imported, every command added."""
    group = click.Group("ctrlz", params=cli.params, help=cli.help, epilog=cli.epilog,
                        context_settings=cli.context_settings)
    for module in sorted({m for m, _ in COMMANDS.values()}):
        for command in import_module(f"ctrlz.cli.{module}").COMMANDS:
            group.add_command(command)
    return group


def test_the_registry_names_every_command_of_every_module() -> None:
    eager = eager_group()
    assert sorted(eager.commands) == sorted(COMMANDS)
    ctx = click.Context(cli)
    for name, (module, short) in COMMANDS.items():
        command = cli.get_command(ctx, name)
        assert command is eager.commands[name]
        assert command.callback.__module__ == f"ctrlz.cli.{module}"
        assert short == (None if command.hidden else command.get_short_help_str(10**6)), name


@pytest.mark.parametrize("width", [60, 80, 100, 140])
def test_top_level_help_is_the_eager_groups(width: int) -> None:
    def render(group: click.Group) -> str:
        ctx = click.Context(group, info_name="ctrlz", terminal_width=width,
                            max_content_width=100)
        return group.get_help(ctx)

    assert render(cli) == render(eager_group())


def test_version_and_help_load_no_command_module() -> None:
    code = ("import sys\nfrom ctrlz.cli import main\n"
            "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith('ctrlz')), file=sys.stderr)")
    for args in (["--version"], ["--help"]):
        err = subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                             text=True).stderr
        loaded = eval(err.strip().splitlines()[-1])  # noqa: S307 - our own output
        assert loaded == ["ctrlz", "ctrlz.cli", "ctrlz.cli.app", "ctrlz.cli.context"], args
    assert app.LazyGroup  # the group class the docstring describes
