"""The platform facts (``ctrlz.platform``), portable mode, and the restore's rename fallback.

Portable mode is checked in this process by setting ``CTRLZ_PLATFORM`` (the module reads it on
every call) and forgetting what ``engine/dirs.py`` loaded; the whole suite's portable pass
(``make test-portable``) sets it for the run instead.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import ctrlz
from ctrlz import platform
from ctrlz.engine import aside, dirs

SRC = Path(ctrlz.__file__).parent


@pytest.fixture
def portable(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv(platform.ENV, platform.PORTABLE)
    monkeypatch.setattr(dirs, "_libc_calls", None)
    yield
    dirs._libc_calls = None  # loaded again outside portable mode


def test_only_the_platform_module_reads_sys_platform() -> None:
    """Every caller asks ``ctrlz.platform``; a second place that reads ``sys.platform``
    would be a second, drifting answer."""
    found = [f"{p.relative_to(SRC)}:{n}" for p in sorted(SRC.rglob("*.py"))
             if p.name != "platform.py" or p.parent != SRC
             for n, line in enumerate(p.read_text().splitlines(), 1)
             if re.search(r"\bsys\.platform\b", line)]
    assert not found, "ask ctrlz.platform (system(), ...) instead: " + ", ".join(found)


def test_portable_mode_turns_every_fast_path_off(portable: None) -> None:
    facts = {f.key: f.value for f in platform.facts()}
    assert facts["system"].endswith("(portable mode)")
    for key in ("rename", "sync", "direct_io", "clone", "trace", "service"):
        assert facts[key] is None, key
    assert facts["watch"] == "watchdog:polling"  # the twin: no inotify under it
    assert platform.direct_io_flag() == 0
    assert not platform.can_ficlone()
    assert platform.rename_function() is None and platform.syncfs_function() is None
    assert "portable" in platform.no_tracer_reason()
    assert not dirs.has_syncfs()


@pytest.mark.skipif(platform.system() != "linux" or platform.portable(),
                    reason="the Linux fast paths (off in portable mode)")
def test_linux_offers_its_fast_paths() -> None:
    assert platform.rename_call() == "renameat2"
    assert platform.fs_sync() == "syncfs"
    assert platform.can_ficlone()
    assert platform.direct_io_flag() == os.O_DIRECT
    assert dirs.has_syncfs()


def test_every_fact_says_what_ctrlz_does_without_it() -> None:
    facts = platform.facts()
    assert len({f.key for f in facts}) == len(facts)
    for f in facts:
        assert f.what and f.without, f.key
        assert set(f.to_json()) == {"key", "what", "value", "without"}


def test_the_renames_are_unsupported_in_portable_mode(portable: None, tmp_path: Path) -> None:
    (tmp_path / "a").write_text("a")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(dirs.Unsupported):
            dirs.renameat2(fd, b"a", fd, b"b", dirs.RENAME_NOREPLACE)
        with pytest.raises(dirs.Unsupported):
            dirs.renameat2(fd, b"a", fd, b"b", dirs.RENAME_EXCHANGE)
    finally:
        os.close(fd)


def _two_versions(tmp_path: Path) -> tuple[int, os.stat_result]:
    (tmp_path / "f").write_bytes(b"theirs")
    (tmp_path / ".ctrlz-tmp-t-a1").write_bytes(b"ours")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    return fd, os.stat(".ctrlz-tmp-t-a1", dir_fd=fd)


def test_replace_by_rename_places_ours_and_drops_the_kept_link(tmp_path: Path) -> None:
    fd, ours = _two_versions(tmp_path)
    try:
        assert aside.replace_by_rename(fd, b".ctrlz-tmp-t-a1", b"f", ours, b".ctrlz-tmp-t-",
                                       lambda kept, st: False) is None
    finally:
        os.close(fd)
    assert (tmp_path / "f").read_bytes() == b"ours"
    assert sorted(os.listdir(tmp_path)) == ["f"]


def test_replace_by_rename_gives_a_written_inode_its_name_back(tmp_path: Path) -> None:
    """Someone wrote to the replaced file after the check: the kept link sees it, their
    version gets its name back and ours is gone."""
    fd, ours = _two_versions(tmp_path)

    def written(kept: bytes, st: os.stat_result) -> bool:
        with open(os.path.join(tmp_path, os.fsdecode(kept)), "ab") as f:
            f.write(b" and more")  # the same inode as the one at "f" a moment ago
        return True

    try:
        reason = aside.replace_by_rename(fd, b".ctrlz-tmp-t-a1", b"f", ours, b".ctrlz-tmp-t-",
                                         written)
    finally:
        os.close(fd)
    assert reason == aside.CHANGED
    assert (tmp_path / "f").read_bytes() == b"theirs and more"
    assert sorted(os.listdir(tmp_path)) == ["f"]


def test_a_portable_restore_puts_the_tree_back(tmp_path: Path) -> None:
    """A rollback over replaced, deleted and new files in a fresh interpreter in portable
    mode: no exchange, no syncfs, every file fsynced; the tree is back and nothing is left."""
    code = r"""
import os, sys
from pathlib import Path
from ctrlz import Workspace, platform
from ctrlz.engine import dirs
root = Path(sys.argv[1])
(root / "d").mkdir()
for i in range(40):
    (root / "d" / f"f{i}").write_text(f"v1 {i}")
with Workspace.init(root) as ws:
    ws.snapshot(label="base")
    for i in range(40):
        p = root / "d" / f"f{i}"
        p.unlink() if i % 3 == 0 else p.write_text(f"v2 {i}")
    (root / "new").write_text("new")
    ws.rollback("base")
    assert platform.rename_call() is None and not dirs.has_syncfs()
    assert sorted(os.listdir(root / "d")) == sorted(f"f{i}" for i in range(40))
    assert all((root / "d" / f"f{i}").read_text() == f"v1 {i}" for i in range(40))
    assert not (root / "new").exists()
    assert not [n for _, _, fs in os.walk(root) for n in fs if n.startswith(".ctrlz-tmp")]
print("ok")
"""
    root = tmp_path / "ws"
    root.mkdir()
    env = {**os.environ, platform.ENV: platform.PORTABLE}
    proc = subprocess.run([sys.executable, "-c", code, str(root)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr
