"""The observer of refused writes (``ctrlz-sandbox``'s, ``ctrlz/sandbox/observer.py``) for
real: real Landlock and bubblewrap, a real seccomp listener, as root and as uid 65534 where the
native launcher is built for the test user's interpreter. What it records is what
``ctrlz session show --json`` lists under ``"denials"``; the areas are
``test_run_sandbox``'s (owned by the test user, so a refusal is the sandbox's)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ctrlz import platform
from tests.sandbox.test_run_sandbox import Area, area, need  # noqa: F401

ERRNO = {"landlock": "EACCES", "bwrap": "EROFS"}

WRITES = r"""
echo in > in.txt
mkdir -p sub && echo deep > sub/deep.txt && rm sub/deep.txt
echo x 2>/dev/null > "$OUT/new.txt"
cat "$OUT/keep.txt" > /dev/null
echo to-stdout > /dev/stdout; echo to-stderr > /proc/self/fd/2
echo y 2>/dev/null >> "$OUT/missing-dir/f"
mkdir "$OUT/victim" 2>/dev/null
mv in.txt "$OUT/moved.txt" 2>/dev/null
cp sub/../in.txt kept.txt
python3 - <<'EOF'
import os
fd = os.open(os.environ["OUT"], os.O_RDONLY | os.O_DIRECTORY)
try:
    os.open("relative.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
except OSError:
    print("relative: refused")
try:
    os.rename("kept.txt", os.path.join(os.environ["OUT"], "renamed.txt"))
except OSError:
    print("rename: refused")
EOF
exit 0
"""


def run(area: Area, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:  # noqa: F811
    return subprocess.run(area.command(*args), cwd=area.ws, env=env, capture_output=True,
                          text=True, timeout=180)


def denials(area: Area) -> list[dict[str, object]]:  # noqa: F811
    show = area.ctrlz("session", "show", "--json")
    assert show.returncode == 0, show.stderr
    return [d for d in json.loads(show.stdout)["denials"] if d["kind"] == "fs"]


@pytest.mark.parametrize("mode", ["landlock", "bwrap"])
def test_writes_outside_are_refused_and_recorded_writes_inside_are_not(
        area: Area, mode: str, native: None) -> None:  # noqa: F811
    """A write outside is refused and recorded with its call, its real path and the
    mechanism's errno: a plain open, a mkdir, a dirfd-relative openat and a rename out (mv
    and os.rename). Writes inside, reads, and calls the kernel fails before the sandbox
    (a missing directory, an existing name) are not recorded, nor is reopening a pipe
    through ``/dev/stdout`` (which the observer must resolve as the process's, not its own)."""
    need(mode)
    env = {**area.env, "OUT": str(area.out)}
    proc = run(area, env, "run", f"--sandbox={mode}", "--", "sh", "-c", WRITES)
    assert proc.returncode == 0, proc.stderr
    assert "relative: refused" in proc.stdout and "rename: refused" in proc.stdout, proc.stderr
    if area.user is None:  # (the test's pipes are root's: uid 65534 may not reopen them)
        assert "to-stdout" in proc.stdout and "to-stderr" in proc.stderr
    assert (area.ws / "kept.txt").exists() and not (area.out / "new.txt").exists()
    found = denials(area)
    out = str(area.out)
    got = {(d["syscall"], d["path"]) for d in found}
    assert ("openat", f"{out}/new.txt") in got, found
    assert ("openat", f"{out}/relative.txt") in got, found
    assert any(s.startswith("rename") and p == f"{out}/moved.txt" for s, p in got), found
    assert any(s.startswith("rename") and p == f"{out}/renamed.txt" for s, p in got), found
    assert all(d["errno"] == ERRNO[mode] for d in found), found
    assert all(d["path"].startswith(out + "/") for d in found), found  # nothing inside
    assert f"{out}/missing-dir/f" not in {p for _, p in got}  # ENOENT comes first
    assert f"{out}/victim" not in {p for _, p in got}  # EEXIST comes first
    assert {d["exe"] for d in found} <= {"sh", "mv", "python3", "mkdir"}, found


def test_processes_left_behind_keep_writing_untraced(area: Area,  # noqa: F811
                                                     native: None) -> None:
    """The command exits while a child it left behind still writes: the observer's copy
    keeps answering that child (an unanswered trapped call would fail with ENOSYS), and
    ``ctrlz run --no-trace`` records refusals too (no tracer is needed for them)."""
    need("landlock")
    script = ('(sleep 1; echo late > late.txt; echo x > "$OUT/late.txt" 2>/dev/null; '
              'echo done > done.txt) >/dev/null 2>&1 & echo x > "$OUT/early.txt" 2>/dev/null; '
              "exit 3")
    env = {**area.env, "OUT": str(area.out)}
    proc = run(area, env, "run", "--no-trace", "--sandbox=landlock", "--", "sh", "-c", script)
    assert proc.returncode == 3, proc.stderr
    deadline = time.monotonic() + 30
    while not (area.ws / "done.txt").exists():
        assert time.monotonic() < deadline, "the background child never finished"
        time.sleep(0.1)
    assert (area.ws / "late.txt").read_text() == "late\n"
    assert not (area.out / "late.txt").exists()
    assert (f"{area.out}/early.txt", "EACCES") in {(d["path"], d["errno"])
                                                   for d in denials(area)}


def test_the_python_launcher_leaves_the_refusals_to_the_tracer(area: Area) -> None:  # noqa: F811
    """Without the native launcher (no compiler, ``CTRLZ_SANDBOX_NATIVE=0``) the refused
    writes are the tracer's to record, as before the observer."""
    need("landlock")
    env = {**area.env, "OUT": str(area.out), "CTRLZ_SANDBOX_NATIVE": "0"}
    proc = run(area, env, "run", "--sandbox=landlock", "--", "sh", "-c",
               'echo x > "$OUT/new.txt" 2>/dev/null; exit 0')
    assert proc.returncode == 0, proc.stderr
    assert (f"{area.out}/new.txt", "EACCES") in {(d["path"], d["errno"])
                                                 for d in denials(area)}
    events = json.loads(area.ctrlz("trace", "--json").stdout or "[]")
    assert events and "ctrlz.sandbox.launcher" in events[0]["args"], events[:1]


def test_the_notify_filter_traps_writes_only() -> None:
    """The filter's shape: every call it names exists here, opens are tested on flags."""
    from ctrlz.sandbox import observer

    code = observer.notify_filter("landlock")
    assert len(code) % 8 == 0 and len(code) // 8 < 100
    names = {name for name, _ in observer.calls("landlock")}
    assert {"openat", "unlinkat", "renameat2", "linkat", "mkdirat"} <= names
    assert "fchmodat" not in names  # Landlock lets it through: nothing to record
    assert "fchmodat" in {name for name, _ in observer.calls("bwrap")}
    assert Path(sys.executable).exists()


def test_the_python_launcher_serves_where_the_native_one_is_not(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the native launcher (setup.py's ``build_launcher`` said why: no compiler,
    ``CTRLZ_BUILD_NATIVE=0``), in portable mode or with ``CTRLZ_SANDBOX_NATIVE=0``,
    ``platform.native_launcher`` answers None and ``ctrlz run --sandbox`` starts the Python
    launcher; a compiler builds one that refuses a missing spec with one line and 126."""
    import runpy

    repo = Path(__file__).resolve().parents[2]
    build = runpy.run_path(str(repo / "setup.py"), run_name="setup")["build_launcher"]
    # (its refusals: tests/door/test_native.py, with the door's)
    monkeypatch.setenv("CTRLZ_SANDBOX_NATIVE", "0")
    assert platform.native_launcher() is None
    monkeypatch.delenv("CTRLZ_SANDBOX_NATIVE")
    monkeypatch.setenv("CTRLZ_PLATFORM", "portable")
    assert platform.native_launcher() is None
    monkeypatch.delenv("CTRLZ_PLATFORM")
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None or not sys.platform.startswith("linux"):
        return
    monkeypatch.setenv("CC", cc)
    assert build(str(tmp_path / "d")) is None
    run = subprocess.run([str(tmp_path / "d"), str(tmp_path / "no-spec"), "--", "true"],
                         capture_output=True, text=True)
    assert run.returncode == 126
    assert run.stderr.count("\n") == 1 and "nothing was run" in run.stderr
