"""A ``restore --to DIR`` that fails removes the folders it made, and nothing else (issue 40,
section 6: it left behind the empty folder it had made, and its missing parents).

The failure is real: the console script runs under a file-size limit (``RLIMIT_FSIZE``, with
``SIGXFSZ`` ignored so the write fails with ``EFBIG``) smaller than the one file to extract.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
from pathlib import Path

from tests.cli.conftest import CTRLZ, run

LIMIT = 1 << 20  # above what opening the store writes (SQLite's index), below the file


def _small_files_only() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))


def _restore_to(ws: Path, dest: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([CTRLZ, "restore", "base", "--to", str(dest)], cwd=ws,
                          capture_output=True, text=True, timeout=60,
                          preexec_fn=_small_files_only)
    assert done.returncode != 0, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("ctrlz: error: "), done.stderr
    assert "file too large" in lines[0], lines[0]  # the extract's own write, not the store
    return done


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "big.bin").write_bytes(os.urandom(4 * LIMIT))
    run("init", cwd=ws)
    run("snapshot", "-m", "base", cwd=ws)
    return ws


def test_a_failed_restore_to_removes_the_folders_it_made(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "theirs.txt").write_text("not ours\n")
    _restore_to(ws, outside / "new" / "out")
    assert sorted(os.listdir(outside)) == ["theirs.txt"]  # neither out nor its parent new
    assert (outside / "theirs.txt").read_text() == "not ours\n"


def test_a_failed_restore_to_an_empty_folder_leaves_it_there_and_empty(tmp_path: Path
                                                                        ) -> None:
    ws = _workspace(tmp_path)
    dest = tmp_path / "empty"
    dest.mkdir()
    _restore_to(ws, dest)
    assert dest.is_dir() and os.listdir(dest) == []
    # and the failure is no obstacle: without the limit, the same restore goes through
    run("restore", "base", "--to", str(dest), cwd=ws)
    assert (dest / "big.bin").read_bytes() == (ws / "big.bin").read_bytes()
