"""The tests that switch user do not depend on where the checkout lives.

A clone in a 0700 directory (``mktemp -d``, a home of mode 0750) is out of every other user's
reach, and so is its ``.venv``: a test that ran the checkout's interpreter as uid 65534 failed
there with ``ModuleNotFoundError: No module named 'ctrlz'``. Every such test now goes through
the one ``other_user`` fixture (tests/conftest.py), which installs what the other user needs
where it can read it; ``.ci/run`` runs the suite from a fresh clone in a 0700 directory to
prove it.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

from tests.conftest import NOBODY, OtherUser

TESTS = Path(__file__).resolve().parent


def test_every_user_switch_goes_through_the_other_user_fixture() -> None:
    """A test that calls setpriv --reuid (or runuser, su, sudo -u) itself would run what the
    checkout holds as a user who may not reach the checkout."""
    switch = re.compile(r"""["'](?:--reuid|runuser|su|sudo)\b|os\.set(?:res)?uid\(""")
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        if path.name in ("conftest.py", "test_other_user.py") and path.parent == TESTS:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if switch.search(line):
                found.append(f"{path.relative_to(TESTS)}:{number}: {line.strip()}")
    assert found == [], "switch user through the other_user fixture (tests/conftest.py):\n" \
        + "\n".join(found)


def test_another_user_runs_ctrlz_from_a_place_it_can_read(other_user: OtherUser) -> None:
    """uid 65534 runs this checkout's ctrlz (the same source, byte for byte) from a directory
    every step of which it may pass, whatever the modes of the checkout's own directories."""
    probe = ("import ctrlz, ctrlz.cli, sys; print(ctrlz.__file__); print(sys.prefix); "
             "print(open(ctrlz.__file__, 'rb').read().hex())")
    proc = subprocess.run(other_user.python_command("-I", "-c", probe), cwd="/",
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    where, prefix, source = proc.stdout.split("\n")[:3]
    import ctrlz

    assert bytes.fromhex(source) == Path(ctrlz.__file__).read_bytes()
    assert Path(where).resolve() != Path(ctrlz.__file__).resolve()
    for directory in (Path(where).parent, *Path(where).parents):
        assert os.stat(directory).st_mode & stat.S_IXOTH, directory
    assert os.stat(prefix).st_mode & stat.S_IROTH
    # and the ctrlz CLI itself runs as that user, in a workspace of its own (tmp_path is
    # root's alone)
    base = Path(tempfile.mkdtemp(prefix="ctrlz-other-ws-"))
    try:
        ws = base / "ws"
        ws.mkdir()
        (ws / "a.txt").write_text("a\n")
        for path in (base, ws, ws / "a.txt"):
            os.chown(path, NOBODY, NOBODY)
        env = {"PATH": os.environ["PATH"], "HOME": str(base),
               "CTRLZ_HOME": str(base / "home"), "CTRLZ_DAEMON": "0"}
        for args in (["init"], ["snapshot", "--json"], ["status"]):
            run = subprocess.run(other_user.ctrlz_command(*args), cwd=ws, env=env,
                                 capture_output=True, text=True, timeout=120)
            assert run.returncode == 0, (args, run.stderr)
    finally:
        shutil.rmtree(base, ignore_errors=True)
