"""CLI tests run the real console script in a subprocess, against a store in tmp_path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

CTRLZ = str(Path(sys.executable).parent / "ctrlz")


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@pytest.fixture(autouse=True)
def cli_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """An isolated store home and config dir; no CTRLZ_* from the outside leaks in."""
    for name in list(os.environ):  # CTRLZ_PLATFORM=portable is the portable pass's own
        if name.startswith("CTRLZ_") and name != "CTRLZ_PLATFORM":
            monkeypatch.delenv(name)
    monkeypatch.setenv("CTRLZ_HOME", str(tmp_path / "home"))
    # a snapshot would start a background daemon per workspace; tests that want one ask
    monkeypatch.setenv("CTRLZ_DAEMON", "0")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("COLUMNS", "200")
    return dict(os.environ)


def run(*args: str, cwd: Path | str, env: dict[str, str] | None = None,
        ok: bool | None = True) -> Result:
    """Run ``ctrlz ARGS`` in ``cwd``. ``ok=True`` asserts success, ``False`` failure."""
    proc = subprocess.run([CTRLZ, *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=60)
    result = Result(proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    if ok is True:
        assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
    elif ok is False:
        assert proc.returncode != 0, (args, proc.stdout, proc.stderr)
        lines = [x for x in proc.stderr.splitlines() if x.strip()]
        assert lines and lines[-1].startswith(("ctrlz: error: ", "Error:", "Usage:")), proc.stderr
    return result


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """A protected workspace with a few files, folders and a symlink (no snapshot yet)."""
    root = tmp_path / "ws"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "README.md").write_text("# demo\n")
    (root / "src" / "app.py").write_text("print('hello')\n")
    (root / "src" / "pkg" / "mod.py").write_text("X = 1\n")
    (root / "docs" / "guide.txt").write_text("guide\n")
    (root / "logo.bin").write_bytes(b"\x89PNG\0\x01\x02")
    os.symlink("README.md", root / "link")
    run("init", cwd=root)
    return root
