"""The ctrlz command line: a thin face over :class:`ctrlz.Workspace`.

Each command parses its arguments, calls one library operation and renders the result (text for
people, ``--json`` for programs: data on stdout, messages on stderr). :func:`main` is the one
place where errors become exit codes: a :class:`ctrlz.CtrlzError` prints ``ctrlz: error: …`` on
one line and exits with the error's ``exit_code``, never with a traceback; so does click's
refusal of the arguments (exit 2), ending with the ``--help`` to read.

Exit codes: 0 ok, 1 other error, 2 usage (bad arguments, paths outside the workspace, config),
3 no workspace, 4 unknown or ambiguous snapshot, 5 a limit or pool cap, 6 store unreadable,
corrupt, full or locked, 7 restore failed, 8 remote or archive unusable, 70 internal error (a
bug), 130 interrupted.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    import click

__all__ = ["error_line", "exit_code_for", "main"]


def exit_code_for(exc: BaseException) -> tuple[int, str]:
    """The exit status and the one-line message for an error (the CLI's only mapping)."""
    import sqlite3

    from ..errors import CtrlzError, StoreError

    if isinstance(exc, CtrlzError):
        return exc.exit_code, str(exc)
    if isinstance(exc, sqlite3.DatabaseError):
        return StoreError.exit_code, f"the store's catalog is unreadable: {exc}"
    if isinstance(exc, OSError):
        if exc.filename is None and _cwd_gone():  # os.getcwd() failed, under a resolve()
            return 3, ("the current directory no longer exists (it was deleted or moved); "
                       "cd into the workspace again and rerun the command")
        where = f" ({exc.filename})" if exc.filename else ""
        return 1, f"{exc.strerror or exc}{where}"
    return 1, str(exc)


def _cwd_gone() -> bool:
    import os

    try:
        os.getcwd()
    except FileNotFoundError:
        return True
    return False


def main(argv: list[str] | None = None) -> None:
    program = argv is None  # this process is `ctrlz`, not a caller's import of it
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["hook"] and (len(args) < 2 or not args[1].startswith("-")):
        # agent hooks run on every tool call: skip click and the command modules entirely
        from ..ending import leave
        from ..hooks.runner import run

        leave(run(args[1] if len(args) > 1 else ""), program, closed_pipe=0)
    if args in (["--version"], ["--help"], ["-h"]) and _fast(args[0]):
        return
    door = _door(args)
    if door is not None:
        from ..ending import leave

        if program:
            _collector_off()
        leave(_guarded(lambda: door(args)), program)
    import click

    from .app import cli

    try:
        rv = cli.main(args=argv, prog_name="ctrlz", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        sys.exit(_refused(exc, args))
    except (click.exceptions.Abort, KeyboardInterrupt):
        print("ctrlz: interrupted", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(1)
    except Exception as exc:
        sys.exit(_failed(exc))
    sys.exit(rv if isinstance(rv, int) else 0)


def _refused(exc: click.ClickException, args: list[str]) -> int:
    """Print the one line a click error gets and return its exit status (2 for usage).

    click's own rendering is four lines (usage, "Try ... for help", a blank, "Error: ...");
    the project's rule is one line on stderr that says what to do, as every ctrlz error is.
    So click's message is kept word for word, and its hint becomes the tail of that line:
    the help of the command that refused the input (``ctrlz snapshot --help``, not the
    group's). Bare ``ctrlz`` (or a group with no subcommand) asks for help, not an error:
    click's help, as before."""
    import click

    no_args = getattr(click.exceptions, "NoArgsIsHelpError", ())  # click 8.2+
    if isinstance(exc, no_args):
        exc.show()
        return exc.exit_code
    message = " ".join(exc.format_message().split())
    if isinstance(exc, click.UsageError):
        command = exc.ctx.command_path if exc.ctx is not None else _command_path(args)
        hint = f"`{command} --help`"
        # "No such command 'x'." -> "...; see HINT"; "Did you mean 'y'?" -> "...? See HINT"
        message = (f"{message} See {hint}" if message.endswith(("?", "?)"))
                   else f"{message.removesuffix('.')}; see {hint}")
    print(f"ctrlz: error: {message}", file=sys.stderr)
    return exc.exit_code


def _command_path(args: list[str]) -> str:
    """The command ``args`` name (``ctrlz snapshot``), for the errors click raises without
    saying whose arguments they were ("Option '-m' requires an argument"): the arguments
    walked again as shell completion walks them, parsing only, nothing run."""
    try:
        from click.shell_completion import _resolve_context

        from .app import cli

        return _resolve_context(cli, {}, "ctrlz", list(args)).command_path
    except Exception:  # noqa: BLE001 - only a hint: the group's help will do
        return "ctrlz"


def error_line(exc: BaseException) -> tuple[int, str]:
    """The exit status and the one line an expected error gets (the native door's daemon
    prints a restore's failure with it too)."""
    code, message = exit_code_for(exc)
    return code, f"ctrlz: error: {' '.join(message.split())}"


def _failed(exc: Exception) -> int:
    """Print the one line an error gets and return its exit status (a bug included, unless
    ``CTRLZ_DEBUG`` asks for the traceback)."""
    if _expected(exc):
        code, line = error_line(exc)
        print(line, file=sys.stderr)
        return code
    import os

    if os.environ.get("CTRLZ_DEBUG"):
        raise exc
    print(f"ctrlz: internal error: {type(exc).__name__}: {exc}. This is a bug in ctrlz; "
          "rerun with CTRLZ_DEBUG=1 for the traceback and report it.", file=sys.stderr)
    return 70


def _guarded(run: Callable[[], None]) -> int:
    """A click-free command run with click's exit conventions (see :func:`main`)."""
    try:
        run()
    except KeyboardInterrupt:
        print("ctrlz: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1
    except Exception as exc:
        return _failed(exc)
    return 0


def _collector_off() -> None:
    """The cyclic collector of a click-free command's own process skips what the imports
    made: ~150 modules' ~100k objects, which each collection the allocations trigger would
    walk again (~3 ms of a ~0.1 s cold snapshot). ``gc.freeze``, not ``gc.disable``: a large
    rollback's own garbage is still collected, so its memory stays bounded whatever it
    builds; a snapshot pauses the collector anyway (:func:`ctrlz.engine.snapshot.gc_paused`)."""
    import gc

    gc.freeze()


def _door(args: list[str]) -> Callable[[list[str]], None] | None:
    """The click-free door of the most run commands, if ``args`` is one of their plain forms:
    the forms the native door hands to the daemon (:data:`ctrlz.protocol.FORMS`)."""
    if not args or args[0] not in DOOR_RUNS:  # every other command: not even the protocol
        return None
    from ..protocol import form_of

    form = form_of(args)
    return None if form is None else DOOR_RUNS[form.command]


def _list(args: list[str]) -> None:
    from .listing import run

    run(as_json=args[1:] == ["--json"])


def _snapshot(args: list[str]) -> None:
    from .taking import run

    run(as_json=args[1:] == ["--json"])


def _rollback(args: list[str]) -> None:
    from .rolling import run

    run(args[1], as_json=args[2:] == ["--json"])


#: what runs each form of :data:`ctrlz.protocol.FORMS` in this process
DOOR_RUNS: dict[str, Callable[[list[str]], None]] = {
    "list": _list, "snapshot": _snapshot, "rollback": _rollback}


def _fast(option: str) -> bool:
    """``ctrlz --version`` and ``ctrlz --help`` without loading click (half of a cold
    start): the version string, and the help click renders at the widths terminals usually
    give, 80 columns or 100 and more (pre-rendered: ``scripts/gen_help_text.py``, checked by
    ``tests/cli/test_lazy_commands.py``). Other widths fall through to click."""
    import os

    if option == "--version":
        from .. import __version__

        sys.stdout.write(f"ctrlz, version {__version__}\n")
        return True
    try:  # as shutil.get_terminal_size, which click uses, decides it
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 80
    from .help_text import HELP

    text = HELP.get(100 if columns >= 100 else columns)
    if text is None:
        return False
    sys.stdout.write(text)
    return True


def _expected(exc: BaseException) -> bool:
    """A ctrlz error, an OS error or an unreadable catalog: a one-line message and its exit
    code. Checked after the fact, so that ``ctrlz --version`` loads neither the error classes
    nor sqlite3."""
    from ..errors import CtrlzError

    sqlite3 = sys.modules.get("sqlite3")
    return isinstance(exc, CtrlzError | OSError) or (
        sqlite3 is not None and isinstance(exc, sqlite3.DatabaseError))
