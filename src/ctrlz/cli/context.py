"""What every command shares: the :class:`State` it runs with and the decorator that passes it.

Command modules import this, never :mod:`ctrlz.cli.app`: the group imports the commands to
register them, so a command that imported the group back would close an import circle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from ..workspace import Workspace

#: click settings for the group and every command in it
CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class State:
    """What every command needs: the directory it runs in and a way to open the workspace."""

    def __init__(self) -> None:
        self._ws: Workspace | None = None

    def workspace(self) -> Workspace:
        """The protected workspace containing the current directory (errors clearly if none)."""
        if self._ws is None:
            from .listing import open_here

            self._ws = open_here()
        return self._ws

    def close(self) -> None:
        if self._ws is not None:
            self._ws.close()


pass_state = click.make_pass_decorator(State, ensure=True)
