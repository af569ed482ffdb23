"""Property test of the engine: random edit sequences, snapshots and restores interleaved.

After every restore the tree must equal the snapshot exactly (kinds, modes, bytes, link targets,
file mtimes), and the excluded files must never have been touched.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from ctrlz import Workspace
from tests.conftest import tree_state

NAMES = ["a", "b", "c", "d d", "e..f", "\udcff-raw"]  # a space, dots, a non-UTF-8 byte
PATHS = [n for n in NAMES] + [f"{x}/{y}" for x in NAMES[:3] for y in NAMES[:4]]
EXCLUDED = {"keep.log": b"ignored by .gitignore", "cache/blob": b"excluded by pattern"}
SKIP = ("keep.log", "cache")


class EngineMachine(RuleBasedStateMachine):
    @initialize()
    def setup(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="ctrlz-prop-"))
        self.root = self.tmp / "ws"
        self.root.mkdir()
        (self.root / ".gitignore").write_bytes(b"*.log\n")
        (self.root / "cache").mkdir()
        for rel, data in EXCLUDED.items():
            (self.root / rel).write_bytes(data)
        self.excluded_state = tree_state(self.root)
        from ctrlz.session.config import Config
        config = Config()
        config.set("exclude_patterns", ["cache"], "test")
        config.set("manual_max", 10_000, "test")  # pools are tested elsewhere
        config.set("safety_max", 10_000, "test")
        self.ws = Workspace.init(self.root, home=self.tmp / "home", config=config)
        self.snaps: list[tuple[str, dict]] = []

    def teardown(self) -> None:
        self.ws.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def p(self, rel: str) -> bytes:
        return os.fsencode(self.root) + b"/" + os.fsencode(rel)

    def state(self) -> dict:
        return tree_state(self.root, skip=SKIP)

    # -- edits -----------------------------------------------------------------------------

    @rule(rel=st.sampled_from(PATHS), data=st.binary(max_size=64))
    def write_file(self, rel: str, data: bytes) -> None:
        try:
            with open(self.p(rel), "wb") as f:
                f.write(data)
        except OSError:
            pass

    @rule(rel=st.sampled_from(PATHS))
    def edit_keeping_size_and_mtime(self, rel: str) -> None:
        path = self.p(rel)
        if not os.path.isfile(path) or os.path.islink(path):
            return
        st_ = os.stat(path)
        with open(path, "rb") as f:
            old = f.read()
        new = bytes((b + 1) % 256 for b in old)
        with open(path, "wb") as f:
            f.write(new)
        os.utime(path, ns=(st_.st_atime_ns, st_.st_mtime_ns))

    @rule(rel=st.sampled_from(PATHS))
    def delete(self, rel: str) -> None:
        path = self.p(rel)
        if os.path.islink(path) or os.path.isfile(path):
            os.unlink(path)
        elif os.path.isdir(path):
            shutil.rmtree(path)

    @rule(rel=st.sampled_from(PATHS), mode=st.sampled_from([0o600, 0o644, 0o755, 0o700, 0o444]))
    def chmod(self, rel: str, mode: int) -> None:
        path = self.p(rel)
        if os.path.exists(path) and not os.path.islink(path):
            os.chmod(path, mode if os.path.isfile(path) else mode | 0o700)

    @rule(rel=st.sampled_from(PATHS), dest=st.sampled_from(["a", "../outside", "/etc", "x/y"]))
    def symlink(self, rel: str, dest: str) -> None:
        try:
            os.symlink(dest, self.p(rel))
        except OSError:
            pass

    @rule(rel=st.sampled_from(NAMES))
    def mkdir(self, rel: str) -> None:
        try:
            os.mkdir(self.p(rel))
        except OSError:
            pass

    @rule(rel=st.sampled_from(NAMES))
    def rmdir(self, rel: str) -> None:
        try:
            os.rmdir(self.p(rel))
        except OSError:
            pass

    @rule(src=st.sampled_from(PATHS), dst=st.sampled_from(PATHS))
    def rename(self, src: str, dst: str) -> None:
        try:
            os.rename(self.p(src), self.p(dst))
        except OSError:
            pass

    @rule(rel=st.sampled_from(NAMES))
    def swap_file_and_dir(self, rel: str) -> None:
        path = self.p(rel)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
            with open(path, "wb") as f:
                f.write(b"was a dir")
        elif os.path.lexists(path):
            os.unlink(path)
            os.mkdir(path)
            with open(path + b"/inner", "wb") as f:
                f.write(b"was a file")

    # -- snapshots and restores -------------------------------------------------------------

    @rule()
    def snapshot(self) -> None:
        snap = self.ws.snapshot()
        self.snaps.append((snap.id, self.state()))

    @precondition(lambda self: self.snaps)
    @rule(index=st.integers(min_value=0, max_value=50))
    def restore(self, index: int) -> None:
        snap_id, expected = self.snaps[index % len(self.snaps)]
        before = self.state()
        result = self.ws.restore(snap_id)
        assert self.state() == expected, result.skipped
        assert result.safety is not None
        self.snaps.append((result.safety.id, before))

    @precondition(lambda self: self.snaps)
    @rule(index=st.integers(min_value=0, max_value=50), rel=st.sampled_from(PATHS))
    def restore_one_path(self, index: int, rel: str) -> None:
        from ctrlz.errors import RestoreError, UsageError

        snap_id, expected = self.snaps[index % len(self.snaps)]
        before = self.state()
        names_nothing = not os.path.lexists(self.p(rel)) and not any(
            k == rel or k.startswith(rel + "/") for k in expected)
        try:
            result = self.ws.restore(snap_id, paths=[os.fsdecode(self.p(rel))])
        except UsageError as exc:  # in neither the snapshot nor the tree: refused first
            assert names_nothing, exc
            assert self.state() == before
            return
        except RestoreError as exc:  # a parent that is a file or a symlink now: refused
            assert "the snapshot has a directory there" in str(exc), exc
            assert self.state() == before
            return
        assert not names_nothing, rel
        now = self.state()
        if result.skipped:
            return  # e.g. a path the safety snapshot left out: reported, not forced
        for key in set(expected) | set(now):
            if key == rel or key.startswith(rel + "/"):
                assert now.get(key) == expected.get(key), key

    @invariant()
    def excluded_files_untouched(self) -> None:
        if hasattr(self, "root"):
            for rel in SKIP:
                assert tree_state(self.root).get(rel) == self.excluded_state.get(rel)


TestEngine = EngineMachine.TestCase
TestEngine.settings = settings(max_examples=80, stateful_step_count=30, deadline=None,
                               suppress_health_check=[HealthCheck.too_slow])
