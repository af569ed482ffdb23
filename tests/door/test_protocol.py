"""The native door's wire protocol is defined once (:mod:`ctrlz.protocol`), and every
program that speaks it takes it from there: the C door through ``protocol.h``, which must be
what ``scripts/gen_door_header.py`` writes; the CLI and the daemon through their runners of
each form. A form one of them lacks fails here, not as a command that quietly takes the slow
path; and what falls back says why under ``$CTRLZ_DOOR_TRACE``.
"""

from __future__ import annotations

import itertools
import os
import re
import runpy
import subprocess
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctrlz import cli, protocol
from ctrlz.door import serve
from ctrlz.session import daemon_client
from ctrlz.workspace import Workspace
from tests.conftest import served_workspace
from tests.door.conftest import CTRLZ, DOOR, ctrlz, is_native, isolate, served, trace

REPO = DOOR.parents[2]


def test_the_c_header_is_written_from_the_protocol() -> None:
    render = runpy.run_path(str(REPO / "scripts" / "gen_door_header.py"),
                            run_name="gen_door_header")["render"]
    assert (DOOR / "protocol.h").read_text(encoding="ascii") == render(), \
        "protocol.h is stale: run scripts/gen_door_header.py, then make .venv/.installed"


def test_the_c_door_keeps_no_copy_of_the_protocol() -> None:
    """The C files name no form, option, socket or variable of the protocol themselves."""
    words = {protocol.SOCKET_NAME, protocol.OFF_VAR, protocol.TRACE_VAR, protocol.HOOK,
             protocol.OP, protocol.ENV_PREFIX}
    words |= {f.command for f in protocol.FORMS} | {o for f in protocol.FORMS for o in f.options}
    for path in sorted(DOOR.glob("*.c")):
        text = re.sub(r"/\*.*?\*/", "", path.read_text(), flags=re.S)  # code, not comments
        copies = sorted(w for w in words if f'"{w}"' in text or f'{w}\\"' in text)
        assert not copies, f"{path.name} spells {copies} itself: take them from protocol.h"


def examples(form: protocol.Form) -> Iterator[list[str]]:
    """Every command line of ``form``: its options in each number and order."""
    head = [form.command] + (["snap_x"] if form.operand is not None else [])
    for n in range(len(form.options) + 1):
        for options in itertools.permutations(form.options, n):
            yield head + list(options)


def test_every_form_has_a_runner_in_the_cli_and_in_the_daemon() -> None:
    commands = {f.command for f in protocol.FORMS}
    assert set(cli.DOOR_RUNS) == commands, "the CLI's click-free door (cli.DOOR_RUNS)"
    assert set(serve.COMMANDS) == commands, "the daemon's door (serve.COMMANDS)"
    for form in protocol.FORMS:
        for argv in examples(form):
            assert protocol.form_of(argv) is form
            assert cli._door(argv) is cli.DOOR_RUNS[form.command]


def test_every_form_is_one_the_cli_offers() -> None:
    """The click command of each form takes its options and its operand: the door serves
    what a user could type anyway, so that handing it over changes nothing but speed."""
    from ctrlz.cli.app import cli as group

    ctx = click.Context(group, info_name="ctrlz")
    for form in protocol.FORMS:
        command = group.get_command(ctx, form.command)
        assert command is not None, form
        flags = {o for p in command.params if isinstance(p, click.Option) for o in p.opts}
        assert set(form.options) <= flags, (form, flags)
        arguments = [p for p in command.params if isinstance(p, click.Argument)]
        takes_operand = bool(arguments) and arguments[0].required
        assert takes_operand == (form.operand is not None), form


words = st.sampled_from(["snapshot", "list", "rollback", "--json", "--JSON", "-m", "snap_x",
                         "", "-", "hook", "status", "--dry-run", "list2"])


@settings(max_examples=200, deadline=None)
@given(argv=st.lists(words, max_size=4))
def test_the_c_door_takes_the_command_lines_the_protocol_names(
        probe: Path, argv: list[str]) -> None:
    """The C door tries the daemon for exactly the command lines :func:`form_of` takes, and
    says so when it hands one to Python for not being a form."""
    env = {"CTRLZ_HOME": "/nonexistent/ctrlz", "CTRLZ_DOOR_TRACE": "1", "PATH": "/usr/bin:/bin"}
    run = subprocess.run([str(probe), *argv], env=env, capture_output=True, cwd="/")
    handed = b"ctrlz door: not a form the door serves" in run.stderr
    assert handed == (protocol.form_of(argv) is None), run.stderr


@settings(max_examples=30, deadline=None)
@given(args=st.lists(st.sampled_from(["claude", "PreToolUse", "-x", ""]), max_size=4))
def test_the_c_hook_takes_the_arguments_the_protocol_names(
        probe: Path, args: list[str]) -> None:
    hook = probe.parent / "ctrlz-hook"
    if not hook.exists():
        os.symlink(probe, hook)
    env = {"CTRLZ_HOME": "/nonexistent/ctrlz", "CTRLZ_DOOR_TRACE": "1", "PATH": "/usr/bin:/bin"}
    run = subprocess.run([str(hook), *args], env=env, capture_output=True, input=b"{}", cwd="/")
    refused = b"ctrlz door: the Python hook: not AGENT [EVENT]" in run.stderr
    assert refused == (not protocol.is_hook([protocol.HOOK, *args])), run.stderr


# -- with a daemon ----------------------------------------------------------------------------


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    """A workspace of one file, its daemon running."""
    isolate(tmp_path, monkeypatch)
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "a.txt").write_text("a\n")
    yield from served_workspace(tmp_path / "work")


def test_every_form_is_served_by_the_daemon(ws: Workspace) -> None:
    """Each command line of each form, run by the installed ``ctrlz``, is the daemon's: a form
    the C door or the daemon lacked would run in Python, and fail here."""
    if not is_native(CTRLZ):
        pytest.skip("ctrlz is not the native door here")
    base = ws.snapshots()[0].id
    for form in protocol.FORMS:
        for argv in examples(form):
            argv = [base if a == "snap_x" else a for a in argv]
            run = ctrlz(*argv, cwd=ws.root)
            assert run.returncode == 0, (argv, run.stderr)
            assert served(run), (argv, trace(run))


def test_what_the_python_door_does_itself_it_says_why(ws: Workspace) -> None:
    """The Python CLI's own door (no native door, or one that handed over) names the reason
    it did the work in its process instead of the daemon."""
    run = ctrlz("snapshot", cwd=ws.root, CTRLZ_DOOR="0", CTRLZ_MAX_FILE_SIZE="1000")
    assert run.returncode == 0, run.stderr
    assert any(line.startswith("ctrlz door: in this process: ") and "configuration" in line
               for line in trace(run)), trace(run)
    quiet = ctrlz("snapshot", cwd=ws.root, CTRLZ_DOOR="0", CTRLZ_DOOR_TRACE="0")
    assert quiet.returncode == 0 and b"ctrlz door" not in quiet.stderr, quiet.stderr


def test_a_door_the_daemon_cannot_read_is_declined_and_logged(ws: Workspace) -> None:
    """Another version, or a form this daemon does not serve: the door is told why (and says
    so under its trace), and the daemon's log says it too, since every such command is slower
    than it should be."""
    request = {"op": protocol.OP, "version": protocol.VERSION, "argv": ["list", "--json"],
               "cwd": str(ws.root), "tty": False, "tty_err": False, "env": dict(os.environ)}
    cases = [({"version": protocol.VERSION + 1}, "door version"),
             ({"argv": ["list", "--yaml"]}, "not a form the door serves (list --yaml)")]
    for change, why in cases:
        with pytest.raises(daemon_client.DaemonUnavailable, match=why.replace("(", r"\(")
                           .replace(")", r"\)")):
            daemon_client.request(ws.store_path, {**request, **change})
    log = (ws.store_path / daemon_client.LOG_NAME).read_text()
    assert "door version 2, this daemon speaks 1" in log
    assert "not a form the door serves (list --yaml)" in log
