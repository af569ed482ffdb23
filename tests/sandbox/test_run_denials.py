"""``ctrlz run --sandbox`` end to end, for what ctrlz keeps of it: the writes the sandbox
refused (rows, ``session show``, the run's summary line), and the capture-only rule from
inside (a rollback through the daemon refused, a snapshot served). Real Landlock, real
bubblewrap, real strace, as root and as uid 65534, in the areas of ``test_run_sandbox``
(owned by the test user, so a refusal is the sandbox's, never a file mode's)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess

import pytest

from tests.sandbox.test_run_sandbox import CTRLZ, Area, area, need  # noqa: F401

WRITES = r"""
echo in > in.txt
echo x 2>/dev/null > "$OUT/new.txt"
mkdir "$OUT/made" 2>/dev/null
rm -rf "$OUT/victim" 2>/dev/null
ln in.txt "$OUT/hard" 2>/dev/null
cat "$OUT/keep.txt" >/dev/null
ls /nonexistent 2>/dev/null
eval "$CTRLZ snapshot -m inside" >/dev/null 2>&1 && echo "snapshot: ok" || echo "snapshot: refused"
eval "$CTRLZ rollback base" >/dev/null 2>"$TMPDIR/rollback.err"; echo "rollback: $?"
head -n 1 "$TMPDIR/rollback.err"
exit 0
"""


@pytest.mark.parametrize("mode", ["landlock", "bwrap"])
def test_refused_writes_are_recorded_shown_and_summed_up(area: Area,  # noqa: F811
                                                         mode: str) -> None:
    need(mode)
    base = area.ctrlz("snapshot", "-m", "base")
    assert base.returncode == 0, base.stderr
    # the CLI as the sandboxed shell runs it (already the test user: no setpriv inside)
    python = area.user.python if area.user is not None else CTRLZ[0]
    inner = shlex.join([python, *CTRLZ[1:]])
    scratch = area.base / "scratch"
    scratch.mkdir()
    os.chown(scratch, area.uid, area.uid)
    env = {**area.env, "OUT": str(area.out), "CTRLZ": inner, "TMPDIR": str(scratch)}
    proc = subprocess.run(area.command("run", f"--sandbox={mode}", "--allow-write",
                                       str(scratch), "--", "sh", "-c", WRITES),
                          cwd=area.ws, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    errno = "EACCES" if mode == "landlock" else "EROFS"
    show = area.ctrlz("session", "show", "--json")
    assert show.returncode == 0, show.stderr
    data = json.loads(show.stdout)
    fs = {(d["path"], d["errno"]) for d in data["denials"] if d["kind"] == "fs"}
    out = str(area.out)
    for path in (f"{out}/new.txt", f"{out}/made", f"{out}/hard"):
        assert (path, errno) in fs, (path, data["denials"])
    assert any(p.startswith(f"{out}/victim") for p, _ in fs), data["denials"]
    assert all(d["path"].startswith(out) for d in data["denials"]
               if d["kind"] == "fs" and d["exe"] != "python"), data["denials"]
    # (no reads, no ENOENT; the CLI run inside, python, may meet refusals of its own: a
    # bytecode cache it may not write, the store when it works in-process)
    assert (area.out / "victim" / "v.txt").exists()
    count = sum(d["kind"] == "fs" for d in data["denials"])
    assert f"ctrlz: the sandbox refused {count} writes outside the workspace (" in proc.stderr
    assert f"see ctrlz session show {data['id']}" in proc.stderr
    text = area.ctrlz("session", "show").stdout
    assert f"the sandbox refused {count}:" in text and f"{out}/new.txt ({errno})" in text
    # capture-only from inside: the daemon takes the snapshot, and refuses the rollback
    assert "snapshot: ok" in proc.stdout, (proc.stdout, proc.stderr)
    assert "rollback: 2" in proc.stdout, (proc.stdout, proc.stderr)
    assert "sandboxed session" in proc.stdout, proc.stdout
    assert (area.ws / "in.txt").read_text() == "in\n"  # not rolled back
