"""What the native door's tests share: the installed ``ctrlz``, running it with its trace on,
reading that trace, and the C program compiled again into a test's own directory."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
CTRLZ = str(BIN / "ctrlz")
DOOR = Path(__file__).resolve().parents[2] / "src" / "ctrlz" / "door"
CC = shutil.which(os.environ.get("CC") or "cc") or shutil.which("gcc")


def is_native(path: str | Path) -> bool:
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def isolate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``CTRLZ_*`` setting of the caller's, a store home and configuration in ``tmp_path``,
    and a UTF-8 locale (the door serves only UTF-8 output)."""
    for name in list(os.environ):
        if name.startswith("CTRLZ_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("CTRLZ_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("LANG", "C.UTF-8")


def ctrlz(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([CTRLZ, *args], cwd=cwd, capture_output=True,
                          env={**os.environ, "CTRLZ_DOOR_TRACE": "1", **env})


def trace(run: subprocess.CompletedProcess[bytes]) -> list[str]:
    return [line.decode(errors="replace") for line in run.stderr.splitlines()
            if line.startswith(b"ctrlz door: ")]


def served(run: subprocess.CompletedProcess[bytes]) -> bool:
    lines = trace(run)
    return any(line.startswith("ctrlz door: served by") for line in lines) and not any(
        line.startswith("ctrlz door: running") for line in lines)


def build(tmp_path: Path, python: str) -> Path:
    """The door compiled into ``tmp_path/bin/ctrlz`` with ``python`` as its interpreter."""
    out = tmp_path / "bin" / "ctrlz"
    out.parent.mkdir(parents=True, exist_ok=True)
    header = tmp_path / "door_python.h"
    header.write_text('#define CTRLZ_PYTHON "' + "".join(
        f"\\{b:03o}" for b in os.fsencode(python)) + '"\n')
    assert CC is not None
    subprocess.run([CC, "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-include",
                    str(header), "-o", str(out), *map(str, sorted(DOOR.glob("*.c")))],
                   check=True)
    return out


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The door with ``/bin/true`` for Python: it traces where it looked, then ends."""
    if CC is None:
        pytest.skip("no C compiler to build the native door with")
    return build(tmp_path_factory.mktemp("probe"), "/bin/true")
