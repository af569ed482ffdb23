"""The command group loads command modules on demand; what it says without loading them must
be what the commands say themselves."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from importlib import import_module
from pathlib import Path

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
        # the group's own settings (click caches the help option a first context makes)
        ctx = click.Context(group, info_name="ctrlz", terminal_width=width,
                            **cli.context_settings)
        return group.get_help(ctx)

    assert render(cli) == render(eager_group())


def _loaded(*args: str, columns: int = 80) -> tuple[str, list[str]]:
    """stdout of ``ctrlz ARGS`` run in process, and the modules it loaded (click's first)."""
    code = ("import sys\nfrom ctrlz.cli import main\n"
            "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith(('ctrlz', 'click'))),"
            " file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": str(columns)})
    return proc.stdout, eval(proc.stderr.strip().splitlines()[-1])  # noqa: S307 - ours


def test_version_and_help_load_neither_click_nor_a_command() -> None:
    from ctrlz import __version__

    out, loaded = _loaded("--version")
    assert out == f"ctrlz, version {__version__}\n" and loaded == ["ctrlz", "ctrlz.cli"]
    for columns in (80, 100, 160):
        out, loaded = _loaded("--help", columns=columns)
        assert loaded == ["ctrlz", "ctrlz.cli", "ctrlz.cli.help_text"]
        assert out == _click_help(columns), f"run scripts/gen_help_text.py ({columns} columns)"
    out, loaded = _loaded("--help", columns=90)  # a width not pre-rendered: click renders it
    assert "click" in loaded and out == _click_help(90)
    assert app.LazyGroup  # the group class the docstring describes


def _click_help(columns: int) -> str:
    """`ctrlz --help` as click itself renders it for a terminal of ``columns`` columns."""
    ctx = click.Context(cli, info_name="ctrlz", terminal_width=min(columns, 100) - 2,
                        **{k: v for k, v in cli.context_settings.items()
                           if k != "max_content_width"})
    return cli.get_help(ctx) + "\n"


def _click_path(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``ctrlz ARGS`` through click even where ``main`` would take its click-free door."""
    code = ("import sys\nfrom ctrlz.cli import _failed\nfrom ctrlz.cli.app import cli\n"
            "try:\n    cli.main(args=sys.argv[1:], prog_name='ctrlz', standalone_mode=False)\n"
            "except Exception as exc:\n    sys.exit(_failed(exc))\n")
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True,
                          text=True)


def test_list_runs_without_click_and_prints_what_the_click_command_prints(tmp_path: Path
                                                                          ) -> None:
    from ctrlz import Workspace

    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("a\n")
    (root / b"caf\xe9-latin1.txt".decode("utf-8", "surrogateescape")).write_text("x\n")
    ws = Workspace.init(root)
    ws.snapshot(label="first")
    (root / "a.txt").write_text("b\n")
    ws.snapshot(label="second", pinned=True)
    ws.close()
    for args in (["list"], ["list", "--json"]):
        code = ("import sys\nfrom ctrlz.cli import main\ntry:\n    main(sys.argv[1:])\n"
                "except SystemExit as e:\n    sys.stderr.write(f'exit {e.code}\\n')\n"
                "print(sorted(m for m in sys.modules if m.startswith(('click', 'rich'))),"
                " file=sys.stderr)")
        fast = subprocess.run([sys.executable, "-c", code, *args], cwd=root,
                              capture_output=True, text=True)
        assert fast.stderr.splitlines()[-2:] == ["exit 0", "[]"], fast.stderr
        slow = _click_path(args, root)
        assert slow.returncode == 0, slow.stderr
        assert fast.stdout == slow.stdout and "second" in fast.stdout


def test_list_outside_a_workspace_fails_the_same_way_on_both_doors(tmp_path: Path) -> None:
    ctrlz = str(Path(sys.executable).parent / "ctrlz")
    fast = subprocess.run([ctrlz, "list"], cwd=tmp_path, capture_output=True, text=True)
    slow = _click_path(["list"], tmp_path)
    assert fast.returncode == slow.returncode == 3
    assert fast.stderr == slow.stderr and fast.stderr.startswith("ctrlz: error: ")
    assert fast.stdout == slow.stdout == ""


def _fast_door(args: list[str], cwd: Path, modules: tuple[str, ...]
               ) -> subprocess.CompletedProcess[str]:
    """``ctrlz ARGS`` through ``main``; stderr ends with the exit status and the loaded
    modules among ``modules``."""
    code = ("import sys\nfrom ctrlz.cli import main\ntry:\n    main(sys.argv[1:])\n"
            "except SystemExit as e:\n    sys.stderr.write(f'exit {e.code}\\n')\n"
            f"print(sorted(m for m in sys.modules if m.startswith({modules!r})),"
            " file=sys.stderr)")
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True,
                          text=True)


def _through(door: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """A successful ``ctrlz ARGS`` through the fast door (which must load neither click nor
    rich; its trailer is taken off stderr) or through click."""
    if door == "fast":
        run = _fast_door(args, cwd, ("click", "rich"))
        assert run.stderr.splitlines()[-2:] == ["exit 0", "[]"], run.stderr
        run.stderr = "".join(run.stderr.splitlines(keepends=True)[:-2])
    else:
        run = _click_path(args, cwd)
        assert run.returncode == 0, run.stderr
    return run


def test_snapshot_runs_without_click_and_prints_what_the_click_command_prints(
        tmp_path: Path) -> None:
    from ctrlz import Workspace

    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("a\n")
    (root / "pipe").mkdir()
    os.mkfifo(root / "pipe" / "fifo")  # skipped, and said so on both doors
    with Workspace.init(root) as ws:
        ws.snapshot(label="base")
    outputs = {}
    for door in ("fast", "click"):
        (root / "a.txt").write_text(door.ljust(5, "!"))  # one file changed, same size
        for args in (["snapshot"], ["snapshot", "--json"]):
            outputs[door, len(args)] = _through(door, args, root)
    for n in (1, 2):  # the same shape: ids and times differ
        fast, slow = outputs["fast", n], outputs["click", n]
        assert fast.stderr == slow.stderr
        if n == 1:
            assert "skipped pipe/fifo" in fast.stderr
            assert re.sub(r"snap_\w+", "ID", fast.stdout) == \
                re.sub(r"snap_\w+", "ID", slow.stdout)
        else:
            assert json.loads(fast.stdout).keys() == json.loads(slow.stdout).keys()
    with Workspace.open(root) as ws:
        assert [s.type for s in ws.snapshots()] == ["manual"] * 5


def test_snapshot_outside_a_workspace_fails_the_same_way_on_both_doors(tmp_path: Path
                                                                       ) -> None:
    ctrlz = str(Path(sys.executable).parent / "ctrlz")
    fast = subprocess.run([ctrlz, "snapshot"], cwd=tmp_path, capture_output=True, text=True)
    slow = _click_path(["snapshot"], tmp_path)
    assert fast.returncode == slow.returncode == 3
    assert fast.stderr == slow.stderr and fast.stderr.startswith("ctrlz: error: ")


#: what a snapshot or a rollback never needs: each is milliseconds of every such process
#: (``json``: the standard library's, whose regexes ctrlz.jsontext spares; ``platform`` and
#: ``typing``: what the zstandard package's __init__ brings; ``concurrent``, ``logging`` and
#: ``threading``: a thread pool's)
HEAVY = ("click", "rich", "dataclasses", "typing", "socket", "threading", "zstandard",
         "concurrent", "json", "logging", "platform", "random")


def test_a_no_change_snapshot_and_a_rollback_load_nothing_heavy(tmp_path: Path) -> None:
    """A cold ``ctrlz snapshot`` of an unchanged tree loads none of ``HEAVY`` (no daemon
    runs, so no socket either); a cold ``ctrlz rollback`` of a few edits, through the same
    click-free door, none but zstandard's C backend (``zstandard.backend_c``, loaded without
    the package), which it needs to decompress the old content. Its fsyncs of several files
    run on threads of their own, not on a ``concurrent.futures`` pool."""
    from ctrlz import Workspace

    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("a = 1\n" * 50)
    (root / "src" / "b.py").write_text("b = 1\n" * 50)
    (root / ".gitignore").write_text("*.log\nbuild/\n")
    with Workspace.init(root) as ws:
        first = ws.snapshot()
    run = _fast_door(["snapshot"], root, HEAVY)
    assert run.stderr.splitlines()[-2:] == ["exit 0", "[]"], run.stderr
    (root / "src" / "a.py").write_text("a = 2\n")
    (root / "src" / "b.py").write_text("b = 2\n")
    (root / "src" / "c.py").write_text("c = 2\n")
    run = _fast_door(["rollback", first.id, "--json"], root, HEAVY)
    assert run.stderr.splitlines()[-2] == "exit 0", run.stderr
    loaded = eval(run.stderr.splitlines()[-1])  # noqa: S307  # a list of names we printed
    assert set(loaded) <= {"zstandard.backend_c"}, loaded
    assert (root / "src" / "a.py").read_text() == "a = 1\n" * 50
    assert (root / "src" / "b.py").read_text() == "b = 1\n" * 50
    assert not (root / "src" / "c.py").exists()


def test_rollback_runs_without_click_and_prints_what_the_click_command_prints(
        tmp_path: Path) -> None:
    """``ctrlz rollback SNAP [--json]`` takes the click-free door; paths or ``--dry-run``
    go through click; the output is the same either way, and so is an error."""
    from ctrlz import Workspace

    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("base\n")
    with Workspace.init(root) as ws:
        base = ws.snapshot(label="base")
    outputs = {}
    for door in ("fast", "click"):
        for args in (["rollback", "base"], ["rollback", "base", "--json"]):
            (root / "a.txt").write_text(f"{door} edit\n")
            outputs[door, len(args)] = _through(door, args, root)
            assert (root / "a.txt").read_text() == "base\n"
    fast, slow = outputs["fast", 2], outputs["click", 2]
    assert fast.stderr == slow.stderr
    assert re.sub(r"snap_\w+", "ID", fast.stdout) == re.sub(r"snap_\w+", "ID", slow.stdout)
    assert f"Rolled back to {base.id}" in fast.stdout and "Undo with: ctrlz undo" in fast.stdout
    fast_json, slow_json = (json.loads(outputs[d, 3].stdout) for d in ("fast", "click"))
    assert fast_json.keys() == slow_json.keys() and fast_json["type"] == "rollback"
    # an unknown snapshot: the same one-line error and exit status on both doors
    bad = _fast_door(["rollback", "nope"], root, ("click",))
    slow_bad = _click_path(["rollback", "nope"], root)
    assert bad.stderr.splitlines()[-2] == f"exit {slow_bad.returncode}" != "exit 0"
    assert "".join(bad.stderr.splitlines(keepends=True)[:-2]) == slow_bad.stderr
    # other forms go through click
    dry = _fast_door(["rollback", "base", "--dry-run"], root, ("click",))
    assert "click" in dry.stderr.splitlines()[-1]
