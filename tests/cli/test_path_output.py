"""Paths in what the command line prints (issue 40, section 6).

* ``--json`` is JSON whatever the names: a name that is not UTF-8 goes out as ``\\udcXX``
  (as the service's API writes it), which ``json.loads`` and ``os.fsencode`` turn back into
  the exact bytes. It went out raw, and the output was not UTF-8, so not JSON.
* A path in a message is quoted as git and ``ls -b`` quote it when it holds a control
  character, so a name with a newline cannot forge a line of output: ``ctrlz revert`` printed
  the newline as it was.

Real console scripts, real files with such names.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.cli.conftest import CTRLZ, run

LATIN1 = b"caf\xe9.txt"
NEWLINE = "two\nlines.txt"


def _raw(*args: str | bytes, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([CTRLZ, *args], cwd=cwd, capture_output=True, timeout=60)


def _names(ws: Path, latin1: bool = True) -> None:
    """Both names at v1 in snapshot "base", then both at v2 (without the Latin-1 one, the
    plain text output is UTF-8: its stdout keeps such a name's bytes as they are)."""
    for version in ("v1", "v2"):
        if latin1:
            with open(os.path.join(os.fsencode(ws), LATIN1), "wb") as f:
                f.write(f"{version}\n".encode())
        (ws / NEWLINE).write_text(f"{version}\n")
        if version == "v1":
            run("snapshot", "-m", "base", cwd=ws)


def test_json_output_is_json_for_a_name_that_is_not_utf8(ws: Path) -> None:
    _names(ws)
    for args, key in ((["diff", "base", "--json"], "changes"),
                      (["changes", "--since", "base", "--json"], "changes"),
                      (["rollback", "base", "--dry-run", "--json"], "actions")):
        done = _raw(*args, cwd=ws)
        assert done.returncode == 0, done.stderr
        data = json.loads(done.stdout.decode("utf-8"))  # strict: raw 0xe9 fails here
        paths = {os.fsencode(item["path"]) for item in data[key]}
        assert {LATIN1, NEWLINE.encode()} <= paths, (args, paths)
        assert b'"caf\\udce9.txt"' in done.stdout
    history = _raw("history", LATIN1, "--json", cwd=ws)
    assert history.returncode == 0, history.stderr
    assert os.fsencode(json.loads(history.stdout.decode("utf-8"))["path"]) == LATIN1


def test_messages_quote_a_path_with_a_newline(ws: Path, tmp_path: Path) -> None:
    _names(ws, latin1=False)
    quoted = '"two\\nlines.txt"'
    revert = run("revert", NEWLINE, "--from", "base", cwd=ws)
    assert revert.out.splitlines()[0].startswith(f"Reverted {quoted} from snap_"), revert.out
    assert len(revert.out.splitlines()) == 3, revert.out  # summary, safety, undo: no more
    undo = run("undo", cwd=ws)
    assert undo.out.splitlines()[0].startswith("Undid the revert to snap_"), undo.out
    assert quoted in undo.out.splitlines()[0], undo.out
    dry = run("rollback", "base", "--dry-run", cwd=ws)
    assert f"  write    {quoted}" in dry.out.splitlines(), dry.out
    dest = tmp_path / "out\nput"
    restored = run("restore", "base", "--to", str(dest), cwd=ws)
    assert len(restored.out.splitlines()) == 1 and '"' in restored.out, restored.out
    refused = run("rollback", "base", "no\nsuch", cwd=ws, ok=False)
    [line] = [x for x in refused.err.splitlines() if x.strip()]
    assert line.startswith('ctrlz: error: "no\\nsuch": in neither'), line


def test_a_workspace_whose_folder_name_has_a_newline_is_shown_on_one_line(tmp_path: Path
                                                                          ) -> None:
    root = tmp_path / "my\nproject"
    root.mkdir()
    init = run("init", cwd=root)
    first = init.out.splitlines()[0]
    assert first.startswith('Protecting "') and first.endswith('my\\nproject"'), init.out
    status = run("status", cwd=root)
    assert status.out.splitlines()[0].endswith('my\\nproject"'), status.out
    nowhere = run("history", "no\nsuch", cwd=root)
    assert nowhere.err.splitlines() == ['"no\\nsuch" is in no snapshot'], nowhere.err
