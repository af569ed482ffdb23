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
from ctrlz.engine import dirs
from ctrlz.engine.restore import aside

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


# -- the user's directories ---------------------------------------------------------------------

KINDS = ("data", "config", "cache", "state")
XDG_VARS = ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME",
            "XDG_RUNTIME_DIR")
#: what a user's environment may hold: absolute, relative (invalid, the XDG spec says:
#: ignored), blank, padded, with a trailing slash, with a space inside
ODD = ["/x/data", "relative/dir", "", "   ", " /padded", "/trailing/", "/with space/x ", "~/x",
       "."]


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in XDG_VARS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.skipif(platform.system() != "linux", reason="off Linux, user_dir is platformdirs")
@pytest.mark.parametrize("value", [None, *ODD])
@pytest.mark.parametrize("home", [None, "/home/someone", "/home/someone/", "relative", ""])
def test_user_dirs_are_platformdirs_own(value: str | None, home: str | None,
                                        clean_env: pytest.MonkeyPatch) -> None:
    """ctrlz computes the XDG directories itself (platformdirs costs every command
    milliseconds to import); for every kind and every odd value they must be exactly
    platformdirs' answers, with this process's environment or another one's (the door's)."""
    import platformdirs

    if home is None:
        clean_env.delenv("HOME", raising=False)
    else:
        clean_env.setenv("HOME", home)
    for kind in KINDS:
        var = f"XDG_{kind.upper()}_HOME"
        if value is not None:
            clean_env.setenv(var, value)
        expected = getattr(platformdirs, f"user_{kind}_dir")("ctrlz")
        assert platform.user_dir(kind) == expected, (kind, value, home)
        assert platform.user_dir(kind, dict(os.environ)) == expected, (kind, value, home)
        assert os.path.join(str(platform.xdg_base(kind)), "ctrlz") == expected


def test_the_runtime_dir_is_the_login_managers_else_the_fallback(
        tmp_path: Path, clean_env: pytest.MonkeyPatch) -> None:
    """``$XDG_RUNTIME_DIR/ctrlz`` where the variable names a directory (what platformdirs
    says for a private one); otherwise none (the service keeps its files with the stores),
    never a guess."""
    import platformdirs

    private = tmp_path / "run"
    private.mkdir(mode=0o700)
    clean_env.setenv("XDG_RUNTIME_DIR", str(private))
    assert platform.user_dir("runtime") == str(private / "ctrlz")
    assert platform.user_dir("runtime") == platformdirs.user_runtime_dir("ctrlz")
    for value in [None, "relative", "", "   ", str(tmp_path / "missing"), " " + str(private)]:
        if value is None:
            clean_env.delenv("XDG_RUNTIME_DIR")
        else:
            clean_env.setenv("XDG_RUNTIME_DIR", value)
        with pytest.raises(LookupError, match="no runtime directory"):
            platform.user_dir("runtime")


@pytest.mark.skipif(platform.system() != "linux", reason="systemd units are Linux only")
@pytest.mark.parametrize("value", [None, *ODD])
def test_every_module_asks_user_dir(value: str | None, tmp_path: Path,
                                    clean_env: pytest.MonkeyPatch) -> None:
    """The service's unit, its run directory, the remotes' model cache and OpenCode's
    configuration follow the same rule as the stores (relative values ignored)."""
    import platformdirs

    from ctrlz.installers.specs import opencode
    from ctrlz.service import runtime, systemd
    from ctrlz.session.remotes.remotes import _model_cache

    for name in XDG_VARS[:4]:
        if value is not None:
            clean_env.setenv(name, value)
    clean_env.setenv("CTRLZ_HOME", str(tmp_path / "home"))
    assert systemd.unit_path() == Path(platformdirs.user_config_dir("systemd"), "user",
                                       "ctrlz.service")
    assert _model_cache() == os.path.join(platformdirs.user_cache_dir("ctrlz"), "botocore")
    assert runtime.run_dir() == tmp_path / "home" / "run"
    home = Path(os.path.expanduser("~"))
    plugin = opencode("user", tmp_path, home)[0].path
    assert plugin.parent.parent == Path(platformdirs.user_config_dir("opencode"))
