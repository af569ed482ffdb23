"""Shared fixtures: an isolated CTRLZ_HOME, and trees described as data."""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ctrlz.workspace import Workspace


@dataclass(frozen=True)
class Link:
    target: str


def make_tree(root: Path, spec: dict) -> None:
    """Create ``spec`` under ``root``: str/bytes are files, dicts are directories,
    :class:`Link` is a symlink."""
    root.mkdir(parents=True, exist_ok=True)
    for name, value in spec.items():
        path = root / name
        if isinstance(value, dict):
            make_tree(path, value)
        elif isinstance(value, Link):
            os.symlink(value.target, path)
        else:
            path.write_bytes(value.encode() if isinstance(value, str) else value)


def tree_state(root: Path, skip: tuple[str, ...] = ()) -> dict[str, tuple]:
    """Everything a restore must reproduce: kind, mode, content or link target, file mtime."""
    out: dict[str, tuple] = {}
    base = os.fsencode(root)
    for dirpath, dirnames, filenames in os.walk(base):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            rel = os.fsdecode(os.path.relpath(full, base))
            if any(rel == s or rel.startswith(s + "/") for s in skip):
                continue
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("l", os.readlink(full))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("d", stat.S_IMODE(st.st_mode))
            elif stat.S_ISREG(st.st_mode):
                with open(full, "rb") as f:
                    out[rel] = ("f", stat.S_IMODE(st.st_mode), f.read(), st.st_mtime_ns)
            else:
                out[rel] = ("special",)
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
    return out


@pytest.fixture(scope="session")
def shared_cache_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache directory for the whole run: what goes there (parsed botocore models) is
    derived data, keyed by its sources, so tests may share it; the user's own stays untouched."""
    return tmp_path_factory.mktemp("xdg-cache")


@pytest.fixture(autouse=True)
def ctrlz_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared_cache_home: Path) -> Path:
    """Every test gets its own store home and config dir; real user state is never touched."""
    home = tmp_path / "ctrlz-home"
    monkeypatch.setenv("CTRLZ_HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(shared_cache_home))
    for key in list(os.environ):
        if key.startswith("CTRLZ_") and key != "CTRLZ_HOME":
            monkeypatch.delenv(key)
    # hooks would start a background daemon per workspace; tests that want one ask for it
    monkeypatch.setenv("CTRLZ_DAEMON", "0")
    return home


@pytest.fixture
def ws_dir(tmp_path: Path) -> Path:
    d = tmp_path / "ws"
    d.mkdir()
    return d


def is_root() -> bool:
    return os.geteuid() == 0


def mounted(where: Path, *args: str) -> Iterator[Path]:
    """``mount ARGS where``, for a fixture to ``yield from``: skipped, with the reason, where
    this machine refuses (not root, a filesystem the kernel lacks), and unmounted afterwards
    (lazily when something still holds it)."""
    if not is_root():
        pytest.skip("mounting a filesystem needs root")
    where.mkdir(exist_ok=True)
    proc = subprocess.run(["mount", *args, str(where)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount {' '.join(args)} here: {proc.stderr.strip()[:200]}")
    try:
        yield where
    finally:
        if subprocess.run(["umount", str(where)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(where)], capture_output=True)


def served_workspace(root: Path) -> Iterator[Workspace]:
    """The workspace at ``root`` (its files made by the caller) with a first snapshot,
    labelled "base", and its daemon running, for a fixture to ``yield from``; the daemon is
    stopped afterwards."""
    from ctrlz.session import daemon_client
    from ctrlz.workspace import Workspace

    workspace = Workspace.init(root)
    workspace.snapshot(label="base")
    info = daemon_client.start(workspace.root, workspace.store_path, timeout=60)
    assert info["ready"], info
    try:
        yield workspace
    finally:
        daemon_client.stop(workspace.store_path)
        workspace.close()
