"""Progress bars: drawn on a terminal's stderr for long work, never on a pipe, never on stdout.

The commands run under a real pseudo-terminal (stderr) with stdout on a pipe, as a person's
``ctrlz snapshot --json | jq`` would; ``CTRLZ_PROGRESS_DELAY=0`` draws from the first moment, so
the tests do not depend on how long the work takes.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
from pathlib import Path

from .conftest import CTRLZ, run


def run_on_terminal(*args: str, cwd: Path, env: dict[str, str] | None = None
                    ) -> tuple[int, str, str]:
    """``ctrlz ARGS`` with stderr on a pty and stdout on a pipe: (exit code, stdout, what
    the terminal received)."""
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen([CTRLZ, *args], cwd=cwd, stdout=subprocess.PIPE, stderr=slave,
                                stdin=subprocess.DEVNULL,
                                env={**os.environ, "CTRLZ_PROGRESS_DELAY": "0",
                                     "COLUMNS": "120", "TERM": "xterm", **(env or {})})
        os.close(slave)
        slave = -1
        chunks = []
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed its end
                break
            if not data:
                break
            chunks.append(data)
        out = proc.stdout.read().decode() if proc.stdout else ""
        code = proc.wait(timeout=60)
    finally:
        os.close(master)
        if slave >= 0:
            os.close(slave)
    return code, out, b"".join(chunks).decode(errors="replace")


def big_tree(root: Path) -> None:
    for d in range(4):
        (root / f"d{d}").mkdir()
        for f in range(50):
            (root / f"d{d}" / f"f{f}.txt").write_bytes(os.urandom(2048))
    (root / "large.bin").write_bytes(os.urandom(3 << 20))


def test_a_first_snapshot_draws_a_bar_on_a_terminal(ws: Path) -> None:
    big_tree(ws)
    code, out, terminal = run_on_terminal("snapshot", "--json", cwd=ws)
    assert code == 0, terminal
    assert json.loads(out)["id"].startswith("snap_")  # stdout: the JSON, nothing else
    assert "Snapshot" in terminal and "files" in terminal and "\x1b[" in terminal


def test_restore_verify_and_gc_draw_their_bars(ws: Path) -> None:
    big_tree(ws)
    snap = run("snapshot", "--json", cwd=ws).json()["id"]
    (ws / "large.bin").write_bytes(os.urandom(3 << 20))
    code, _, terminal = run_on_terminal("rollback", snap, cwd=ws)
    assert code == 0 and "Restore" in terminal, terminal
    code, _, terminal = run_on_terminal("verify", cwd=ws)
    assert code == 0 and "Verify" in terminal, terminal
    code, _, terminal = run_on_terminal("gc", cwd=ws)
    assert code == 0 and "Collect garbage" in terminal, terminal


def test_no_bar_on_a_pipe(ws: Path) -> None:
    big_tree(ws)
    r = run("snapshot", cwd=ws, env={"CTRLZ_PROGRESS_DELAY": "0"})
    assert "\x1b[" not in r.err and "Snapshot" not in r.err


def test_no_bar_when_the_work_is_quicker_than_the_delay(ws: Path) -> None:
    code, _, terminal = run_on_terminal("snapshot", cwd=ws,
                                        env={"CTRLZ_PROGRESS_DELAY": "30"})
    assert code == 0 and "Snapshot " not in terminal and "\x1b[" not in terminal, terminal
