"""A stateful test that keeps the daemon honest: random tree operations, and after each one a
snapshot through a real daemon process that must equal a full scan of the same tree.

The operations are the ones that once blinded the watcher or that it must never miss: edits,
creations, deletions, renames of files and folders (over existing ones too), swaps
(``RENAME_EXCHANGE``), hard links within the tree and out of it (and writes through the outside
name), ``chmod``, ``touch -d``, and bursts of files; the slow variant also runs the daemon
with an inotify queue of 64 events, which every burst overflows.

Beyond equal roots, the daemon's own checks (``session/daemon/watch_audit.py``) must find nothing:
every change here reaches a watched folder or a file a scan knows has two links, so a sample
that finds a change no event reported means the watcher lost one.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from ctrlz.engine.dirs import RENAME_EXCHANGE, Unsupported, renameat2
from ctrlz.session import daemon_client
from ctrlz.workspace import Workspace

from ..engine.test_restore_stateful import _runs
from .test_daemon import full_root

AT_FDCWD = -100
MAX_QUEUED = Path("/proc/sys/fs/inotify/max_queued_events")
DIRS = ["d0", "d1", "d0/s0", "d1/s0", "d0/s0/t0"]
FILES = ["f0", "f1", *(f"{d}/{n}" for d in DIRS for n in ("f0", "f1"))]
PATHS = DIRS + FILES
# every pool large enough that no snapshot is dropped while the machine runs
ENV = {"CTRLZ_MANUAL_MAX": "100000", "CTRLZ_TOOL_MAX": "100000", "CTRLZ_AUTO_MAX": "100000",
       "CTRLZ_SAFETY_MAX": "100000", "CTRLZ_MAX_COUNT": "1000000"}


class DaemonWatchMachine(RuleBasedStateMachine):
    SMALL_QUEUE = False

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="ctrlz-watch-"))
        self.root = self.tmp / "work"
        self.outside = self.tmp / "outside"
        self.outside.mkdir()
        for d in DIRS:
            (self.root / d).mkdir(parents=True, exist_ok=True)
        for f in FILES[::2]:
            (self.root / f).write_text(f"seed {f}\n")
        # names outside the workspace for two of its files, made before the first scan
        self.links_out = [self.outside / "seed0", self.outside / "seed1"]
        os.link(self.root / FILES[0], self.links_out[0])
        os.link(self.root / FILES[4], self.links_out[1])
        self.late_links = 0
        self._saved = {k: os.environ.get(k) for k in ENV}
        os.environ.update(ENV)
        self.ws = Workspace.init(self.root)
        self.ws.snapshot(label="base")
        self.n = 0
        try:
            self._start_daemon()
        except BaseException:
            self.teardown()
            raise

    def _start_daemon(self) -> None:
        if not self.SMALL_QUEUE:
            info = daemon_client.start(self.root, self.ws.store_path, wait=True, timeout=60)
            assert info.get("ready"), info
            return
        # the limit is read when the daemon's inotify instance is made: lower it around the
        # start only, and take turns with other test runs (the setting is the machine's)
        with open("/tmp/ctrlz-test-max-queued-events.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            saved = MAX_QUEUED.read_text()
            MAX_QUEUED.write_text("64\n")
            try:
                info = daemon_client.start(self.root, self.ws.store_path, wait=True, timeout=60)
            finally:
                MAX_QUEUED.write_text(saved)
        assert info.get("ready"), info

    def teardown(self) -> None:
        try:
            if getattr(self, "ws", None) is not None:
                daemon_client.stop(self.ws.store_path)
                self.ws.close()
        finally:
            for k, v in self._saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            shutil.rmtree(self.tmp, ignore_errors=True)

    def _p(self, rel: str) -> Path:
        return self.root / rel

    # -- operations ---------------------------------------------------------------------------

    @rule(rel=st.sampled_from(FILES), size=st.integers(0, 3))
    def write(self, rel: str, size: int) -> None:
        self.n += 1
        try:
            self._p(rel).write_text(f"{self.n}\n" * size)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            pass

    @rule(rel=st.sampled_from(FILES))
    def same_size_same_mtime(self, rel: str) -> None:
        """An edit only the ctime and the inode's change betray (a tool that restores mtime)."""
        p = self._p(rel)
        try:
            s = p.lstat()
            if not p.is_file() or p.is_symlink() or s.st_size == 0:
                return
            data = bytearray(p.read_bytes())
            data[0] ^= 1
            p.write_bytes(bytes(data))
            os.utime(p, ns=(s.st_atime_ns, s.st_mtime_ns))
        except OSError:
            pass

    @rule(rel=st.sampled_from(DIRS))
    def mkdir(self, rel: str) -> None:
        try:
            self._p(rel).mkdir(parents=True)
        except OSError:
            pass

    @rule(rel=st.sampled_from(PATHS))
    def delete(self, rel: str) -> None:
        p = self._p(rel)
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            try:
                p.unlink()
            except OSError:
                pass

    @rule(src=st.sampled_from(PATHS), dst=st.sampled_from(PATHS))
    def rename_over(self, src: str, dst: str) -> None:
        """``os.replace``: over an existing file, or an empty folder, as ``mv -T`` does."""
        try:
            os.replace(self._p(src), self._p(dst))
        except OSError:
            pass

    @rule(a=st.sampled_from(PATHS), b=st.sampled_from(PATHS))
    def exchange(self, a: str, b: str) -> None:
        try:
            renameat2(AT_FDCWD, os.fsencode(self._p(a)), AT_FDCWD, os.fsencode(self._p(b)),
                      RENAME_EXCHANGE)
        except (OSError, Unsupported):
            pass

    @rule(src=st.sampled_from(FILES), dst=st.sampled_from(FILES))
    def link_in(self, src: str, dst: str) -> None:
        try:
            os.link(self._p(src), self._p(dst))
        except OSError:
            pass

    @rule(src=st.sampled_from(FILES))
    def link_out(self, src: str) -> None:
        """A name made outside the workspace raises no event in it: the file's ctime changes
        unseen, which the daemon's sample may find (and then counts as a miss)."""
        try:
            os.link(self._p(src), self.outside / f"late{self.late_links}")
            self.late_links += 1
        except OSError:
            pass

    @rule(which=st.integers(0, 1), size=st.integers(1, 3))
    def write_through_an_outside_link(self, which: int, size: int) -> None:
        """Through a name made before the first scan, which saw the file with two links.
        (A write through a link made later, from outside, is the documented gap: found by the
        sample or the idle audit, not at once.)"""
        self.n += 1
        with open(self.links_out[which], "r+") as f:  # the same inode, if a name still has it
            f.truncate(0)
            f.write(f"outside {self.n}\n" * size)

    @rule(rel=st.sampled_from(FILES), mode=st.sampled_from([0o644, 0o755, 0o600]))
    def chmod(self, rel: str, mode: int) -> None:
        try:
            os.chmod(self._p(rel), mode)
        except OSError:
            pass

    @rule(rel=st.sampled_from(PATHS), days=st.integers(1, 400))
    def touch_d(self, rel: str, days: int) -> None:
        try:
            os.utime(self._p(rel), (1_600_000_000 - days * 86400,) * 2)
        except OSError:
            pass

    @rule(rel=st.sampled_from(DIRS), count=st.integers(20, 200))
    def burst(self, rel: str, count: int) -> None:
        d = self._p(rel)
        if not d.is_dir() or d.is_symlink():
            return
        self.n += 1
        for i in range(count):
            (d / f"b{i}").write_text(f"{self.n}")
        for i in range(0, count, 3):
            (d / f"b{i}").unlink()

    # -- the property ---------------------------------------------------------------------------

    @invariant()
    def the_daemon_snapshot_equals_a_full_scan(self) -> None:
        kind = "tool" if self.n % 2 else "manual"
        reply = daemon_client.snapshot(self.ws.store_path, type=kind)
        snap = self.ws.resolve(reply["snapshot"]["id"])
        assert snap.root == full_root(self.ws), f"the daemon's {reply['scan']} snapshot differs"
        assert daemon_client.status(self.ws.store_path)["missed"] <= self.late_links, \
            "the daemon's checks found a change its watcher did not report"


TestDaemonWatch = DaemonWatchMachine.TestCase
TestDaemonWatch.settings = _runs(8, 20)


@pytest.mark.slow
class TestDaemonWatchSlow(DaemonWatchMachine.TestCase):
    settings = _runs(120, 40)


class SmallQueueMachine(DaemonWatchMachine):
    SMALL_QUEUE = True


needs_root = pytest.mark.skipif(os.geteuid() != 0,
                                reason="lowering fs.inotify.max_queued_events needs root")


@needs_root
class TestDaemonWatchOverflow(SmallQueueMachine.TestCase):
    settings = _runs(3, 15)


@pytest.mark.slow
@needs_root
class TestDaemonWatchOverflowSlow(SmallQueueMachine.TestCase):
    settings = _runs(40, 30)
