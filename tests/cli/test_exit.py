"""How a click-free command ends: ``ctrlz list``, ``snapshot``, ``rollback`` and the hook runner
leave with ``os._exit`` after flushing (``ctrlz.ending.leave``). What they printed must still
arrive whole, a reader that went away must still be a failure, and what they wrote must still
be there for the next process."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from .conftest import CTRLZ, run


def test_output_larger_than_a_pipe_arrives_whole(ws: Path) -> None:
    # ~80 snapshots: the JSON is far larger than the pipe's buffer and Python's, so the
    # final flush has to wait for the reader
    env = {"CTRLZ_MANUAL_MAX": "200"}
    for i in range(80):
        (ws / "counter.txt").write_text(f"{i}\n")
        run("snapshot", "-m", f"step {i} " + "x" * 1000, cwd=ws, env=env)
    listing = run("list", "--json", cwd=ws, env=env)
    assert len(listing.out) > 64 * 1024  # a Linux pipe holds 64 KiB
    assert len(listing.json()) == 80


def test_a_reader_that_went_away_is_exit_status_1_without_a_traceback(ws: Path) -> None:
    run("snapshot", cwd=ws)
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody will read what `ctrlz list` prints
    try:
        proc = subprocess.run([CTRLZ, "list", "--json"], cwd=ws, stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write_end)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr


def test_what_a_command_wrote_is_there_for_the_next_one(ws: Path) -> None:
    first = run("snapshot", "--json", cwd=ws).json()
    (ws / "README.md").write_text("changed\n")
    second = run("snapshot", "--json", cwd=ws).json()
    rolled = run("rollback", first["id"], "--json", cwd=ws).json()
    assert (ws / "README.md").read_text() == "# demo\n"
    ids = [s["id"] for s in run("list", "--json", cwd=ws).json()]
    assert {first["id"], second["id"], rolled["safety_snapshot"]} <= set(ids)
    assert json.loads(run("status", "--json", cwd=ws).out)["can_undo"] is True


def test_the_hook_runner_exits_0_whatever_becomes_of_its_output(ws: Path) -> None:
    hook = str(Path(CTRLZ).with_name("ctrlz-hook"))
    payload = json.dumps({"hook_event_name": "PreToolUse", "tool_name": "Edit",
                          "tool_input": {"file_path": str(ws / "README.md")},
                          "session_id": "s1", "cwd": str(ws)})
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        for argv in ([hook, "claude"], [CTRLZ, "hook", "claude"]):
            proc = subprocess.run(argv, cwd=ws, input=payload, stdout=write_end,
                                  stderr=subprocess.PIPE, text=True, timeout=60)
            assert proc.returncode == 0 and proc.stderr == "", (argv, proc.stderr)
    finally:
        os.close(write_end)
