"""The native door (``src/ctrlz/door/*.c``, :mod:`ctrlz.door.serve`): ``ctrlz snapshot
[--json]`` served by the workspace daemon without Python prints exactly what the Python CLI
prints, and every case it must not serve goes to the Python CLI, which handles it as before.

The installed ``ctrlz`` is the door wherever a C compiler was at hand (CI has one). Tests of
the C program's own corners (the locator on odd names, an interpreter that is gone) compile
it again into ``tmp_path`` with another interpreter path, so that handing over runs
``/bin/true`` or nothing instead of ctrlz.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctrlz.session import daemon_client
from ctrlz.session.locator import store_dir
from ctrlz.workspace import Workspace
from tests.conftest import served_workspace, tree_state
from tests.door.conftest import (
    BIN,
    CC,
    CTRLZ,
    DOOR,
    build,
    ctrlz,
    is_native,
    isolate,
    served,
    trace,
)


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    """A workspace with files ctrlz leaves out (too large, one with a newline in its name,
    one whose name is not UTF-8), a first snapshot, and its daemon running."""
    isolate(tmp_path, monkeypatch)
    root = tmp_path / "work"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("a = 1\n")
    (root / ".ctrlz.toml").write_text("max_file_size = 100\n")
    (root / "big.bin").write_bytes(b"x" * 500)
    (root / "line\nbreak.bin").write_bytes(b"y" * 500)
    with open(os.path.join(os.fsencode(root), b"caf\xe9.bin"), "wb") as f:
        f.write(b"z" * 500)
    yield from served_workspace(root)


def errors(run: subprocess.CompletedProcess[bytes]) -> bytes:
    """stderr without the door's trace."""
    return b"".join(line + b"\n" for line in run.stderr.splitlines()
                    if not line.startswith(b"ctrlz door: "))


def output(run: subprocess.CompletedProcess[bytes]) -> tuple[bytes, bytes]:
    """A snapshot's stdout and stderr without the door's trace, with the snapshot's own id
    and number (and, in JSON, its time and parent) made alike."""
    err = errors(run)
    out = run.stdout
    if out.startswith(b"{"):
        data = loads(out)
        snap_id = data["id"].encode()
        for key in ("id", "number", "created_ns", "created_at", "parent"):
            data.pop(key, None)
        out = json.dumps(data).encode()
    else:
        snap_id = out.split()[0] if out else b"snap_X"
    return out.replace(snap_id, b"snap_X"), err.replace(snap_id, b"snap_X")


def loads(out: bytes) -> dict:
    """A ``--json`` output: a path's undecodable bytes are as they were on disk."""
    return json.loads(out.decode("utf-8", "surrogateescape"))


def test_ctrlz_is_the_native_door_where_it_can_be_built() -> None:
    if CC is None or not sys.platform.startswith("linux"):
        assert not is_native(CTRLZ)
        pytest.skip("no C compiler here: ctrlz is the Python CLI's script")
    assert is_native(CTRLZ), "a C compiler is here, yet ctrlz is not the native door"


@pytest.mark.parametrize("form", [["snapshot"], ["snapshot", "--json"]])
def test_the_door_prints_byte_for_byte_what_the_python_cli_prints(
        ws: Workspace, form: list[str]) -> None:
    """Skipped paths among them: quoted when a newline is in the name, undecodable bytes as
    they were on stdout and escaped on stderr (the CLI's own rendering, done in the daemon)."""
    if not is_native(CTRLZ):
        pytest.skip("ctrlz is not the native door here")
    door = ctrlz(*form, cwd=ws.root / "src")
    python = ctrlz(*form, cwd=ws.root / "src", CTRLZ_DOOR="0")
    assert door.returncode == python.returncode == 0, (door.stderr, python.stderr)
    assert served(door), trace(door)
    assert not served(python)
    assert output(door) == output(python)
    if form == ["snapshot"]:
        assert b'skipped "line\\nbreak.bin": larger than max_file_size' in door.stderr
        assert b"skipped caf\\udce9.bin" in door.stderr
    else:
        skipped = {s["path"] for s in loads(door.stdout)["skipped"]}
        assert skipped == {"big.bin", "line\nbreak.bin", "caf\udce9.bin"}
    assert [s.type for s in ws.snapshots()][-2:] == ["manual", "manual"]


@pytest.mark.parametrize("form", [["list"], ["list", "--json"]])
def test_the_door_lists_byte_for_byte_what_the_python_cli_lists(
        ws: Workspace, form: list[str]) -> None:
    """The table (its CREATED column made alike: a second may pass between the two runs)
    and the JSON records, a snapshot with a non-ASCII label among them."""
    if not is_native(CTRLZ):
        pytest.skip("ctrlz is not the native door here")
    import re

    ws.snapshot(label="caf\u00e9 \u00e9t\u00e9")
    door = ctrlz(*form, cwd=ws.root / "src")
    python = ctrlz(*form, cwd=ws.root / "src", CTRLZ_DOOR="0")
    assert door.returncode == python.returncode == 0, (door.stderr, python.stderr)
    assert served(door), trace(door)

    def alike(out: bytes) -> bytes:
        return re.sub(rb"  (just now|\d+[smhd] ago)$", b"  X", out, flags=re.M)

    assert alike(door.stdout) == alike(python.stdout)
    assert "café été".encode() in door.stdout
    assert output(door)[1] == output(python)[1] == b""


def test_a_listing_for_a_terminal_is_the_python_clis(ws: Workspace) -> None:
    """rich draws the table to the terminal's width, so the door hands it over; the JSON
    form is the same on a terminal and is served."""
    if not is_native(CTRLZ):
        pytest.skip("ctrlz is not the native door here")
    import pty

    for form, expect_served in ((["list"], False), (["list", "--json"], True)):
        leader, follower = pty.openpty()
        try:
            run = subprocess.run([CTRLZ, *form], cwd=ws.root, stdout=follower,
                                 stderr=subprocess.PIPE,
                                 env={**os.environ, "CTRLZ_DOOR_TRACE": "1"})
        finally:
            os.close(follower)
            os.close(leader)
        assert run.returncode == 0, run.stderr
        assert served(run) == expect_served, trace(run)
        if not expect_served:
            assert "the table goes to a terminal" in "".join(trace(run))


@pytest.mark.parametrize(("env", "why"), [
    ({"CTRLZ_DOOR": "0"}, "off: $CTRLZ_DOOR is 0"),
    ({"LANG": "de_DE.ISO-8859-1", "LC_ALL": ""}, "the output would not be UTF-8"),
    ({"PYTHONIOENCODING": "utf-8"}, "the output would not be UTF-8"),
    ({"CTRLZ_MAX_FILE_SIZE": "1000"}, "the caller's configuration differs"),
    ({"CTRLZ_PROGRESS_DELAY": "2"}, "$CTRLZ_PROGRESS_DELAY is set"),
])
def test_what_the_door_must_not_serve_the_python_cli_does(
        ws: Workspace, env: dict[str, str], why: str) -> None:
    if not is_native(CTRLZ):
        pytest.skip("ctrlz is not the native door here")
    run = ctrlz("snapshot", "--json", cwd=ws.root, **env)
    assert run.returncode == 0, run.stderr
    assert not served(run) and any(why in line for line in trace(run)), trace(run)
    snap = ws.resolve(loads(run.stdout)["id"])
    skipped = {os.fsdecode(s.path).split("/", 1)[1] for s in snap.skipped}
    assert ("big.bin" in skipped) == ("CTRLZ_MAX_FILE_SIZE" not in env)


def test_a_starting_daemon_is_not_asked_for_a_snapshot(ws: Workspace) -> None:
    """While the daemon's ``daemon.starting`` marker is in the store it declines all but
    hooks, so the door hands a snapshot to Python without connecting (as the Python client
    does); once the marker is gone the daemon serves it again."""
    if not is_native(CTRLZ):
        pytest.skip("ctrlz is not the native door here")
    from ctrlz.protocol import STARTING_NAME

    marker = ws.store_path / STARTING_NAME
    marker.touch()
    try:
        run = ctrlz("snapshot", "--json", cwd=ws.root)
        assert run.returncode == 0, run.stderr
        assert not served(run), trace(run)
        assert any("the daemon is starting" in line for line in trace(run)), trace(run)
    finally:
        marker.unlink()
    run = ctrlz("snapshot", "--json", cwd=ws.root)
    assert run.returncode == 0 and served(run), trace(run)


def test_the_python_cli_reports_what_the_door_declines(ws: Workspace, tmp_path: Path) -> None:
    """A bad value, a broken file, no workspace: the same one-line errors and statuses as
    without the door."""
    if not is_native(CTRLZ):
        pytest.skip("ctrlz is not the native door here")
    cases = [({"CTRLZ_PROGRESS_DELAY": "soon"}, ws.root, 2),
             ({}, tmp_path, 3)]
    for env, cwd, code in cases:
        door = ctrlz("snapshot", cwd=cwd, **env)
        python = ctrlz("snapshot", cwd=cwd, CTRLZ_DOOR="0", **env)
        assert door.returncode == python.returncode == code, door.stderr
        assert output(door)[1] == output(python)[1] and output(door)[1].startswith(
            b"ctrlz: error: ")
    (ws.root / ".ctrlz.toml").write_text("max_bytes = [\n")
    run = ctrlz("snapshot", cwd=ws.root)
    assert run.returncode == 2 and b"is not valid TOML" in run.stderr


def test_a_daemon_killed_before_it_answers_hands_the_snapshot_to_python(
        ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGKILL in the daemon's snapshot, before the catalog commits: the door gets no
    answer, and the Python CLI takes the snapshot itself (and starts a new daemon)."""
    if not is_native(CTRLZ):
        pytest.skip("ctrlz is not the native door here")
    daemon_client.stop(ws.store_path)
    monkeypatch.setenv("CTRLZ_TEST_FAILPOINTS", "before-commit")
    assert daemon_client.start(ws.root, ws.store_path, wait=True, timeout=60)["ready"]
    monkeypatch.delenv("CTRLZ_TEST_FAILPOINTS")
    (ws.root / "src" / "a.py").write_text("a = 2\n")
    run = ctrlz("snapshot", "--json", cwd=ws.root, CTRLZ_DAEMON="1")
    assert run.returncode == 0, run.stderr
    assert "ctrlz door: handing over: the daemon closed the connection (empty message)" \
        in trace(run)
    assert loads(run.stdout)["changes"]["modified"] == 1
    assert [s.label for s in ws.snapshots()] == ["base", None]
    assert daemon_client.wait_ready(ws.store_path, 60) is not None  # the fixture stops it


def test_ctrl_c_while_the_daemon_works_ends_the_door_as_it_ends_the_cli(
        ws: Workspace) -> None:
    """A daemon that holds the request (here a socket that never answers): SIGINT ends the
    door with the CLI's line and status, 130."""
    if not is_native(CTRLZ):
        pytest.skip("ctrlz is not the native door here")
    import socket

    daemon_client.stop(ws.store_path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with daemon_client.socket_address(ws.store_path) as address:
        listener.bind(address)
    listener.listen(1)
    try:
        proc = subprocess.Popen([CTRLZ, "snapshot"], cwd=ws.root, stderr=subprocess.PIPE,
                                env={**os.environ, "CTRLZ_DOOR_TRACE": "0"})
        conn, _ = listener.accept()
        assert conn.recv(65536).startswith(b'{"op": "door"')  # the request is in
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        conn.close()
    finally:
        listener.close()
        (ws.store_path / daemon_client.SOCKET_NAME).unlink()
    assert proc.returncode == 130 and err == b"ctrlz: interrupted\n"


# -- the C program alone, built here ---------------------------------------------------------


names = st.lists(st.binary(min_size=1, max_size=60).map(
    lambda b: b.replace(b"/", b"_").replace(b"\0", b"_")).filter(
    lambda b: b not in (b".", b"..")), min_size=1, max_size=4)


@settings(max_examples=150, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture])
@given(names=names, depth=st.integers(min_value=0, max_value=3))
def test_the_door_finds_the_store_the_one_locator_finds(
        probe: Path, tmp_path: Path, names: list[bytes], depth: int) -> None:
    """Names of any bytes (not UTF-8, spaces, newlines, longer than the 40-character slug):
    from a directory under a workspace, the C program looks for the daemon in the store
    :func:`ctrlz.session.locator.store_dir` names (SHA-256 of the real path, its slug), and finds
    none outside one."""
    base = os.path.join(os.fsencode(tmp_path), os.urandom(6).hex().encode())
    home = os.path.join(base, b"home")
    here = os.path.join(base, b"tree", *names)
    os.makedirs(here)
    os.makedirs(home)
    env = {"CTRLZ_HOME": os.fsdecode(home), "CTRLZ_DOOR_TRACE": "1", "PATH": "/usr/bin:/bin"}
    run = subprocess.run([str(probe), "snapshot"], cwd=here, env=env, capture_output=True)
    assert b"is not in a workspace under" in run.stderr, run.stderr
    root = os.path.join(base, b"tree", *names[:len(names) - min(depth, len(names) - 1)])
    store = os.fsencode(store_dir(os.fsdecode(root), os.fsdecode(home)))
    os.makedirs(store)
    open(os.path.join(store, b"catalog.db"), "wb").close()
    run = subprocess.run([str(probe), "snapshot"], cwd=here, env=env, capture_output=True)
    expected = b"ctrlz door: no daemon: " + store + b"/daemon.sock is not there"
    assert expected in run.stderr.splitlines(), run.stderr


def test_an_interpreter_that_is_gone_is_one_line_and_a_status(tmp_path: Path) -> None:
    if CC is None:
        pytest.skip("no C compiler to build the native door with")
    door = build(tmp_path, str(tmp_path / "gone" / "python"))
    run = subprocess.run([str(door), "list"], capture_output=True, text=True)
    assert run.returncode == 1 and run.stdout == ""
    assert run.stderr == (f"ctrlz: error: the Python interpreter ctrlz was installed with "
                          f"({tmp_path}/gone/python) is gone; reinstall ctrlz (pip install "
                          "ctrlz)\n")


def test_an_interpreter_beside_the_program_is_used_when_the_built_in_one_is_gone(
        tmp_path: Path) -> None:
    """A venv moved, or a wheel built elsewhere: the python beside ``ctrlz`` runs it."""
    if CC is None:
        pytest.skip("no C compiler to build the native door with")
    door = build(tmp_path, str(tmp_path / "gone" / "python"))
    beside = door.parent / "python3"
    beside.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    beside.chmod(0o755)
    run = subprocess.run([str(door), "--version"], capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.startswith("ctrlz, version"), run.stderr


def test_in_a_venv_its_own_python_runs_ctrlz_before_the_built_in_one(tmp_path: Path) -> None:
    """A wheel built for one venv and reused from pip's cache in another names the first
    venv's interpreter, which may still be there with another ctrlz in it: in a venv (a
    ``pyvenv.cfg`` above the program) the venv's own python comes first."""
    if CC is None:
        pytest.skip("no C compiler to build the native door with")
    other = tmp_path / "other" / "python"
    other.parent.mkdir()
    other.write_text("#!/bin/sh\necho 'the other venv ran' >&2\nexit 7\n")
    other.chmod(0o755)
    door = build(tmp_path, str(other))
    beside = door.parent / "python3"
    beside.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    beside.chmod(0o755)
    run = subprocess.run([str(door), "--version"], capture_output=True, text=True)
    assert run.returncode == 7, "outside a venv, the interpreter it was built with runs"
    (tmp_path / "pyvenv.cfg").write_text("home = /usr/bin\n")
    run = subprocess.run([str(door), "--version"], capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.startswith("ctrlz, version"), run.stderr


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the door is for Linux")
def test_a_wheel_that_carries_the_door_is_tagged_for_this_platform(tmp_path: Path) -> None:
    """Never ``py3-none-any`` with a native program inside: an index would hand it to every
    machine. Without the door (``CTRLZ_BUILD_NATIVE=0``) the wheel is pure."""
    if CC is None:
        pytest.skip("no C compiler to build the native door with")
    repo = DOOR.parents[2]
    src = tmp_path / "src"  # a copy: a build leaves build/ and *.egg-info behind
    shutil.copytree(repo, src, ignore=shutil.ignore_patterns(
        ".*", "bench", "build", "*.egg-info", "__pycache__"))
    for native, want in (("1", "-py3-none-linux_"), ("0", "-py3-none-any.whl")):
        out = tmp_path / f"wheels-{native}"
        run = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out),
             str(src)], capture_output=True, text=True,
            env={**os.environ, "CTRLZ_BUILD_NATIVE": native, "CC": CC})
        if run.returncode != 0 and "setuptools" in run.stderr and "find" in run.stderr:
            pytest.skip("no package index to fetch the build's setuptools from")
        assert run.returncode == 0, run.stderr[-2000:]
        (wheel,) = out.glob("*.whl")
        assert want in wheel.name, wheel.name


def test_without_a_compiler_ctrlz_is_the_python_clis_script(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The build says why there is no native door (no compiler, ``CTRLZ_BUILD_NATIVE=0``,
    a compiler that fails) and then installs the Python script, which runs the CLI; with a
    compiler it builds the door, whatever bytes the interpreter's path holds."""
    import runpy

    repo = DOOR.parents[2]
    setup = runpy.run_path(str(repo / "setup.py"), run_name="setup")
    build_door = setup["build_door"]
    for name in ("build_door", "build_launcher"):  # the sandbox's launcher says why the same
        build = setup[name]
        monkeypatch.setenv("CTRLZ_BUILD_NATIVE", "0")
        assert build(str(tmp_path / "a")) == "CTRLZ_BUILD_NATIVE=0"
        monkeypatch.delenv("CTRLZ_BUILD_NATIVE")
        monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
        assert build(str(tmp_path / "b")).startswith("no C compiler")
        monkeypatch.setenv("CC", "false")
        assert "failed" in build(str(tmp_path / "c"))
        monkeypatch.delenv("CC")
        assert not any((tmp_path / n).exists() for n in "abc")
    launcher = DOOR / "ctrlz"
    assert launcher.read_text().startswith("#!python\n")  # pip writes the interpreter in
    run = subprocess.run([sys.executable, str(launcher), "--version"], capture_output=True,
                         text=True)
    assert run.returncode == 0 and run.stdout.startswith("ctrlz, version"), run.stderr
    hook_launcher = DOOR / "ctrlz-hook"  # the hook's: garbage in, nothing out, exit 0
    assert hook_launcher.read_text().startswith("#!python\n")
    home = tmp_path / "home"
    run = subprocess.run([sys.executable, str(hook_launcher), "claude"], input="not json",
                         capture_output=True, text=True,
                         env={**os.environ, "CTRLZ_HOME": str(home)})
    assert (run.returncode, run.stdout, run.stderr) == (0, "", "")
    assert "stdin is not JSON" in (home / "hook-errors.jsonl").read_text()
    if CC is None or not sys.platform.startswith("linux"):
        return
    monkeypatch.setenv("CC", CC)
    odd = os.fsdecode(b"/no/such/py\"th\\on\xe9")
    assert build_door(str(tmp_path / "d"), python=odd) is None
    assert is_native(tmp_path / "d")
    run = subprocess.run([str(tmp_path / "d"), "list"], capture_output=True)
    assert run.stderr.startswith(b"ctrlz: error: the Python interpreter ctrlz was installed "
                                 b"with (/no/such/py\"th\\on\xe9) is gone")


# -- rollbacks: at most once ------------------------------------------------------------------


def _edit(ws: Workspace, n: int) -> None:
    (ws.root / "src" / "a.py").write_text(f"edit {n}\n")
    (ws.root / "src" / "new.py").write_text(f"new {n}\n")


def _alike(data: bytes, target: str) -> bytes:
    """A rollback's output with the snapshot it took (and its times) made alike."""
    import re

    data = re.sub(rb"snap_[a-z0-9]{8}", lambda m: m[0] if m[0] == target.encode()
                  else b"snap_X", data)
    return re.sub(rb'"(created_at|created_ns|number)": [^,\n]+', rb'"\1": X', data)


@pytest.mark.parametrize("json_form", [False, True])
def test_a_rollback_prints_byte_for_byte_what_the_python_cli_prints(
        ws: Workspace, json_form: bool) -> None:
    if not is_native(CTRLZ):
        pytest.skip("ctrlz is not the native door here")
    base = ws.resolve("base").id
    form = ["rollback", base, *(["--json"] if json_form else [])]
    runs = []
    for n, env in enumerate(({}, {"CTRLZ_DOOR": "0"})):
        _edit(ws, n)
        runs.append(run := ctrlz(*form, cwd=ws.root / "src", **env))
        assert run.returncode == 0, run.stderr
        assert (ws.root / "src" / "a.py").read_text() == "a = 1\n"
        assert not (ws.root / "src" / "new.py").exists()
    door, python = runs
    assert served(door) and not served(python), trace(door)
    assert _alike(door.stdout, base) == _alike(python.stdout, base)
    assert errors(door) == errors(python)
    undo = ctrlz("undo", cwd=ws.root)  # the rollback the Python CLI ran
    assert undo.returncode == 0 and (ws.root / "src" / "a.py").read_text() == "edit 1\n"


def test_a_rollback_whose_daemon_dies_is_never_run_twice(
        ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGKILL in the daemon as the rollback puts its first file in place: the door says
    what the Python CLI says (exit 7), hands nothing to Python, and the next command's
    recovery plus ``ctrlz undo`` bring the edits back."""
    if not is_native(CTRLZ):
        pytest.skip("ctrlz is not the native door here")
    lines = []
    for door in (True, False):
        _edit(ws, 1)
        edited = tree_state(ws.root)
        daemon_client.stop(ws.store_path)
        monkeypatch.setenv("CTRLZ_TEST_FAILPOINTS", "restore-place")
        assert daemon_client.start(ws.root, ws.store_path, wait=True, timeout=60)["ready"]
        monkeypatch.delenv("CTRLZ_TEST_FAILPOINTS")
        run = ctrlz("rollback", "base", cwd=ws.root, **({} if door else {"CTRLZ_DOOR": "0"}))
        assert run.returncode == 7, run.stderr
        if door:  # stopped there: nothing handed to Python, which could run it again
            assert not any(t.startswith("ctrlz door: running") for t in trace(run)), trace(run)
        lines.append(errors(run))
        while daemon_client.running(ws.store_path):
            time.sleep(0.02)
        status = ctrlz("status", cwd=ws.root, CTRLZ_DAEMON="0")  # recovers the journal
        assert status.returncode == 0, status.stderr
        undo = ctrlz("undo", cwd=ws.root, CTRLZ_DAEMON="0")
        assert undo.returncode == 0, undo.stderr
        now = tree_state(ws.root)
        assert {p: v[:3] for p, v in now.items()} == {p: v[:3] for p, v in edited.items()}
        assert daemon_client.start(ws.root, ws.store_path, wait=True, timeout=60)["ready"]
    assert lines[0] == lines[1] and lines[0].startswith(
        b"ctrlz: error: the workspace daemon stopped during the rollback without answering "
        b"(empty message); it may have been applied in part."), lines


def test_a_rollback_at_a_terminal_is_the_python_clis(ws: Workspace) -> None:
    """Its progress bar goes to the terminal, so the Python CLI runs it in-process."""
    if not is_native(CTRLZ):
        pytest.skip("ctrlz is not the native door here")
    import pty

    _edit(ws, 1)
    restores = daemon_client.status(ws.store_path)["served"]["restores"]
    leader, follower = pty.openpty()
    try:
        run = subprocess.run([CTRLZ, "rollback", "base"], cwd=ws.root, stdout=subprocess.PIPE,
                             stderr=follower, env={**os.environ, "CTRLZ_DOOR_TRACE": "1"})
    finally:
        os.close(follower)
        os.close(leader)
    assert run.returncode == 0 and run.stdout.startswith(b"Rolled back to ")
    assert daemon_client.status(ws.store_path)["served"]["restores"] == restores
    assert (ws.root / "src" / "a.py").read_text() == "a = 1\n"


def test_a_rollback_that_failed_in_the_daemon_is_the_clis_error_line() -> None:
    """A restore the daemon ran and that failed is its answer: the CLI's one line and exit
    status, never a decline that would run it again (the daemon is a stand-in here: the
    line is the door's to render)."""
    from ctrlz.door import serve
    from ctrlz.errors import RestoreIncomplete

    class Failing:
        ws = None

        def restore(self, message: dict) -> dict:
            assert message["rollback"]["ref"] == "base"
            raise RestoreIncomplete("2 paths changed during the restore")

    status, lines = serve._rollback(Failing(), {}, False, {"argv": ["rollback", "base"],
                                                           "tty_err": False})
    assert (status, lines) == (7, [(True, "ctrlz: error: 2 paths changed during the "
                                          "restore")])


# -- ctrlz-hook: the agents' hooks ---------------------------------------------------------

HOOK = str(BIN / "ctrlz-hook")


def hook(payload: dict | bytes, cwd: Path, agent: str = "claude",
         **env: str) -> subprocess.CompletedProcess[bytes]:
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    run = subprocess.run([HOOK, agent], input=data, cwd=cwd, capture_output=True,
                         env={**os.environ, "CTRLZ_DOOR_TRACE": "1", **env})
    assert run.returncode == 0 and run.stdout == b"" and errors(run) == b"", run.stderr
    return run


def claude(ws: Workspace, session: str, event: str, **fields: object) -> dict:
    return {"session_id": session, "cwd": str(ws.root), "transcript_path": "/dev/null",
            "hook_event_name": event, **fields}


def calls(ws: Workspace, session: str) -> list[dict]:
    """A session's tool-call snapshots, without what differs between two alike sessions."""
    from ctrlz.toolcalls.api import list_snapshots

    keep = ("kind", "tool", "command", "captured_paths", "byte_count", "open", "turn")
    return [{k: s[k] for k in keep} | {"whole": s["workspace_snapshot"] is not None}
            for s in list_snapshots(session, workspace=ws)]


def hook_errors(ws: Workspace, home: Path) -> list[str]:
    found = list((ws.store_path / "toolcalls").glob("hook-errors.jsonl")) + list(
        home.glob("hook-errors.jsonl"))
    return [json.loads(line)["error"] for f in found for line in f.read_text().splitlines()]


def test_the_hooks_are_served_by_the_daemon_and_do_what_the_python_hook_does(
        ws: Workspace) -> None:
    """A session as Claude Code runs it (start, a prompt, an Edit, a Bash, their Post
    events): through the daemon, without Python, the same records as the Python hook's."""
    if not is_native(HOOK):
        pytest.skip("ctrlz-hook is not the native door here")
    recorded = {}
    for door in (True, False):
        env = {} if door else {"CTRLZ_DOOR": "0"}
        session = f"s-{door}"
        target = ws.root / "src" / "a.py"
        target.write_text("a = 1\n")
        runs = [hook(claude(ws, session, "SessionStart", source="startup"), ws.root, **env),
                hook(claude(ws, session, "UserPromptSubmit", prompt="go"), ws.root, **env)]
        edit = {"file_path": str(target), "old_string": "a", "new_string": "b"}
        runs.append(hook(claude(ws, session, "PreToolUse", tool_name="Edit",
                                tool_use_id=f"toolu_e{door}", tool_input=edit), ws.root, **env))
        target.write_text("b = 1\n")
        runs.append(hook(claude(ws, session, "PostToolUse", tool_name="Edit",
                                tool_use_id=f"toolu_e{door}", tool_input=edit), ws.root, **env))
        runs.append(hook(claude(ws, session, "PreToolUse", tool_name="Bash",
                                tool_use_id=f"toolu_b{door}",
                                tool_input={"command": "rm -rf src"}), ws.root, **env))
        assert all(served(run) == door for run in runs), [trace(r) for r in runs]
        recorded[door] = calls(ws, session)
    assert recorded[True] == recorded[False]
    assert [c["kind"] for c in recorded[True]] == ["files", "bash"], recorded
    assert hook_errors(ws, ws.root.parent / "home") == []


def test_an_event_named_on_the_command_line_reaches_the_daemon(ws: Workspace) -> None:
    """Copilot CLI's own hooks name the event as ``ctrlz-hook copilot EVENT`` (its payload
    has none): served, with the same records as the Python hook's."""
    if not is_native(HOOK):
        pytest.skip("ctrlz-hook is not the native door here")
    recorded = {}
    for door in (True, False):
        env = {"CTRLZ_DOOR_TRACE": "1", **({} if door else {"CTRLZ_DOOR": "0"})}
        session, stamp = f"c-{door}", 1_790_000_000_000 + door
        (ws.root / "src" / "a.py").write_text("a = 1\n")
        pre = {"sessionId": session, "timestamp": stamp, "cwd": str(ws.root),
               "toolName": "edit", "toolArgs": json.dumps({"path": "src/a.py"})}
        run = subprocess.run([HOOK, "copilot", "preToolUse"], input=json.dumps(pre).encode(),
                             cwd=ws.root, capture_output=True, env={**os.environ, **env})
        assert run.returncode == 0 and run.stdout == b"" and errors(run) == b"", run.stderr
        assert served(run) == door, trace(run)
        recorded[door] = calls(ws, session)
    assert recorded[True] == recorded[False] and len(recorded[True]) == 1, recorded
    assert recorded[True][0]["captured_paths"] == ["src/a.py"]


@pytest.mark.parametrize("payload", [
    b"not json", b'{"cwd": "caf\xe9"}', b"[1, 2]", "elsewhere",
], ids=["garbage", "not-utf8", "not-an-object", "another-directory"])
def test_a_payload_the_daemon_declines_is_the_python_hooks_to_record(
        ws: Workspace, tmp_path: Path, payload: bytes | str) -> None:
    """What the hook's own process records (a payload it cannot read, a directory in no
    workspace) is declined by the daemon and recorded by the Python hook, where and as it
    records it without the door."""
    if not is_native(HOOK):
        pytest.skip("ctrlz-hook is not the native door here")
    if payload == "elsewhere":
        (tmp_path / "elsewhere").mkdir()
        payload = json.dumps(claude(ws, "s", "PreToolUse", tool_name="Edit",
                                    tool_use_id="toolu_x", cwd=str(tmp_path / "elsewhere"),
                                    tool_input={"file_path": "f"})).encode()
    home = ws.root.parent / "home"
    seen = []
    for door in (True, False):
        run = hook(payload, ws.root, **({} if door else {"CTRLZ_DOOR": "0"}))
        assert not served(run)
        if door:
            assert any(t.startswith("ctrlz door: handing over: the native door declines")
                       for t in trace(run)), trace(run)
        seen.append(hook_errors(ws, home))
    assert len(seen[0]) == 1 and seen[1] == seen[0] * 2, seen


@pytest.mark.parametrize(("failpoint", "tool", "tool_input"), [
    ("before-commit", "Bash", {"command": "make clean"}),
    ("before-index-commit", "Write", {"file_path": "src/a.py", "content": "x"}),
])
def test_a_daemon_killed_during_a_hook_leaves_its_work_to_the_python_hook(
        ws: Workspace, monkeypatch: pytest.MonkeyPatch, failpoint: str, tool: str,
        tool_input: dict) -> None:
    """SIGKILL in the daemon as it takes a shell call's snapshot or stores a file's
    pre-image: the door gets no answer and runs the Python hook on the same payload, which
    does the work once, whole (a hook's work is never lost; done again, it is the same)."""
    if not is_native(HOOK):
        pytest.skip("ctrlz-hook is not the native door here")
    (ws.root / "src" / "a.py").write_text("a = 3\n")
    daemon_client.stop(ws.store_path)
    monkeypatch.setenv("CTRLZ_TEST_FAILPOINTS", failpoint)
    assert daemon_client.start(ws.root, ws.store_path, wait=True, timeout=60)["ready"]
    monkeypatch.delenv("CTRLZ_TEST_FAILPOINTS")
    run = hook(claude(ws, "s-kill", "PreToolUse", tool_name=tool, tool_use_id="toolu_k",
                      tool_input=tool_input), ws.root)
    lines = trace(run)
    assert any("the daemon closed the connection" in t for t in lines), lines
    assert any(t.startswith("ctrlz door: running") for t in lines), lines
    recorded = calls(ws, "s-kill")
    assert len(recorded) == 1, recorded
    assert hook_errors(ws, ws.root.parent / "home") == []
    if tool == "Bash":
        assert recorded[0]["whole"] and ws.snapshots()[-1].type == "tool"
        # the Python hook started a daemon again, as after any in-process snapshot
        assert daemon_client.wait_ready(ws.store_path, 60) is not None  # the fixture stops it
    else:
        assert recorded[0]["captured_paths"] == ["src/a.py"]


def test_a_file_hook_is_answered_while_the_daemon_is_busy(
        ws: Workspace, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A snapshot held inside the daemon (at ``before-commit``): an Edit's hook is answered
    meanwhile, by the daemon, on its connection's thread; a Bash call's hook, which needs a
    snapshot of the daemon's own, is answered after it. Both are recorded once."""
    if not is_native(HOOK):
        pytest.skip("ctrlz-hook is not the native door here")
    go = tmp_path / "go"
    daemon_client.stop(ws.store_path)
    monkeypatch.setenv("CTRLZ_TEST_FAILPOINTS", f"before-commit@{go}")
    assert daemon_client.start(ws.root, ws.store_path, wait=True, timeout=60)["ready"]
    monkeypatch.delenv("CTRLZ_TEST_FAILPOINTS")
    (ws.root / "src" / "a.py").write_text("a = 5\n")
    env = {**os.environ, "CTRLZ_DOOR_TRACE": "1"}
    held = subprocess.Popen([CTRLZ, "snapshot", "-m", "held"], cwd=ws.root, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    bash = None
    try:
        while not Path(f"{go}.held").exists():  # the daemon is inside that snapshot now
            assert held.poll() is None, held.communicate()
            time.sleep(0.01)
        bash = subprocess.Popen([HOOK, "claude"], cwd=ws.root, env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        bash.stdin.write(json.dumps(claude(ws, "s-busy", "PreToolUse", tool_name="Bash",
                                           tool_use_id="toolu_b",
                                           tool_input={"command": "make"})).encode())
        bash.stdin.close()
        edit = {"file_path": str(ws.root / "src" / "a.py"), "old_string": "5",
                "new_string": "6"}
        run = hook(claude(ws, "s-busy", "PreToolUse", tool_name="Edit",
                          tool_use_id="toolu_e", tool_input=edit), ws.root)
        assert served(run), trace(run)
        assert held.poll() is None  # the snapshot is still held: the hook did not wait
    finally:
        go.touch()
    out, err = held.communicate(timeout=120)
    assert held.returncode == 0, err
    assert bash is not None
    assert bash.wait(timeout=120) == 0
    bash_run = subprocess.CompletedProcess(bash.args, 0, bash.stdout.read(),
                                           bash.stderr.read())
    bash.stdout.close()
    bash.stderr.close()
    assert served(bash_run) and errors(bash_run) == b"", bash_run.stderr
    recorded = calls(ws, "s-busy")
    assert [(c["kind"], c["captured_paths"]) for c in recorded] == [
        ("files", ["src/a.py"]), ("bash", [])], recorded
    assert [s.label for s in ws.snapshots()][-2:] == ["held", "before Bash toolu_b: make"]
    assert hook_errors(ws, ws.root.parent / "home") == []


@pytest.mark.parametrize("door", [True, False], ids=["native-door", "python-hook"])
def test_a_hook_the_daemon_answers_too_late_is_done_by_the_hook_and_dropped_by_the_daemon(
        ws: Workspace, door: bool) -> None:
    """A daemon that takes a Bash call's hook and then stalls (here SIGSTOP) was waited for
    300 s, while an agent kills a hook after 30 s and runs the tool anyway; woken later, the
    daemon recorded the snapshot it took then, after `rm -rf src`, as the state before the
    call, and `ctrlz rewind` put nothing back. Now the hook gives up on the daemon in time
    and takes the snapshot itself, and the daemon drops the request it comes to too late."""
    if door and not is_native(HOOK):
        pytest.skip("ctrlz-hook is not the native door here")
    status = ctrlz("daemon", "status", "--json", cwd=ws.root)
    pid = json.loads(status.stdout)["pid"]
    bash = claude(ws, "s-late", "PreToolUse", tool_name="Bash", tool_use_id="toolu_rm",
                  tool_input={"command": "rm -rf src"})
    os.kill(pid, signal.SIGSTOP)
    try:
        run = subprocess.run([HOOK, "claude"], input=json.dumps(bash).encode(), cwd=ws.root,
                             capture_output=True, timeout=29,  # the agent's limit is 30 s
                             env={**os.environ, "CTRLZ_DOOR_TRACE": "1",
                                  **({} if door else {"CTRLZ_DOOR": "0"})})
        assert run.returncode == 0 and errors(run) == b"", run.stderr
        assert not served(run)
        shutil.rmtree(ws.root / "src")  # the agent runs the tool
    finally:
        os.kill(pid, signal.SIGCONT)
    log = ws.store_path / "daemon.log"
    for _ in range(600):  # the woken daemon reads the request it was sent
        if "dropped a hook" in (log.read_text() if log.exists() else ""):
            break
        time.sleep(0.1)
    assert "dropped a hook" in log.read_text()
    assert [c["kind"] for c in calls(ws, "s-late")] == ["bash"]
    rewound = ctrlz("rewind", "toolu_rm", "--session", "s-late", cwd=ws.root)
    assert rewound.returncode == 0, rewound.stderr
    assert (ws.root / "src" / "a.py").read_text() == "a = 1\n"
    assert hook_errors(ws, ws.root.parent / "home") == []


def test_a_hook_whose_interpreter_is_gone_never_fails_the_agent(tmp_path: Path) -> None:
    """The Python hook cannot run: a one-line warning on stderr, exit 0 (a non-zero hook
    would fail, or under Copilot CLI deny, the agent's tool call)."""
    if CC is None:
        pytest.skip("no C compiler to build the native door with")
    door = build(tmp_path, str(tmp_path / "gone" / "python"))
    hook_door = door.with_name("ctrlz-hook")
    door.rename(hook_door)
    run = subprocess.run([str(hook_door), "claude"], input=b"{}", capture_output=True,
                         text=False, env={"PATH": "/usr/bin:/bin", "CTRLZ_DOOR": "0"})
    assert run.returncode == 0 and run.stdout == b""
    assert run.stderr.decode() == (
        f"ctrlz: error: the Python interpreter ctrlz was installed with ({tmp_path}/gone/"
        "python) is gone; reinstall ctrlz (pip install ctrlz); this session is not "
        "protected\n")
