"""The package installs where the native door cannot be built, and works there.

``CTRLZ_BUILD_NATIVE=0`` (or no C compiler, or not Linux: ``setup.py``'s ``no_door``) installs
``ctrlz`` and ``ctrlz-hook`` as Python scripts. These tests install this checkout into a
scratch virtual environment that way (pip builds the wheel in its own isolated environment,
as a user's pip would) and run the installed commands. The scratch environment borrows the
test environment's dependencies through a ``.pth`` line instead of downloading them again;
ctrlz itself comes from the scratch install (checked). Marked slow (a build is ~10 s); the
portable pass (``make test-portable``) runs them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def _install(tmp_path: Path, env: dict[str, str]) -> Path:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    python = venv / "bin" / "python"
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install",
                           "--quiet", "--no-deps", str(REPO)],
                          env={**os.environ, **env}, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 and "Could not find a version" in proc.stderr:
        pytest.skip("pip cannot fetch setuptools for the isolated build (no index here)")
    assert proc.returncode == 0, proc.stderr[-3000:]
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path("
                           "'purelib'))"], capture_output=True, text=True, check=True).stdout
    # the dependencies of the running tests, after the scratch install's own site-packages
    Path(site.strip(), "zz-test-deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return venv


@pytest.mark.parametrize("env", [{"CTRLZ_BUILD_NATIVE": "0"}, {"CC": "/nonexistent/cc"}],
                         ids=["CTRLZ_BUILD_NATIVE=0", "no-compiler"])
def test_installs_and_works_without_the_native_door(env: dict[str, str],
                                                    tmp_path: Path) -> None:
    venv = _install(tmp_path, env)
    for name in ("ctrlz", "ctrlz-hook"):
        head = (venv / "bin" / name).read_bytes().split(b"\n", 1)[0]
        assert head.startswith(b"#!") and head.endswith(b"/python"), (name, head)
    ctrlz = str(venv / "bin" / "ctrlz")
    run_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run_env.update(CTRLZ_HOME=str(tmp_path / "home"), CTRLZ_DAEMON="0")

    def run(*args: str, cwd: Path = tmp_path) -> str:
        proc = subprocess.run([ctrlz, *args], cwd=cwd, env=run_env, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
        return proc.stdout

    where = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import ctrlz; print(ctrlz.__file__)"], env=run_env,
                           capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(venv)), where  # the scratch install, not the checkout
    facts = {f["key"]: f["value"] for f in json.loads(run("doctor", "--json"))["facts"]}
    assert facts["door"] is None
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("one")
    run("init", cwd=ws)
    run("snapshot", "-m", "base", cwd=ws)
    (ws / "a.txt").write_text("two")
    run("rollback", "base", cwd=ws)
    assert (ws / "a.txt").read_text() == "one"
