"""Stateful model of restores: user edits, snapshots, rollbacks, reverts, undo/redo and agent tool
calls (lazy capture, deletes, shell calls, turns, ``fs_restore``, ``rewind``, turn rollback and
redo) interleaved at random on a real workspace (a fresh directory and store per example);
once more with the workspace daemon running, which then takes every snapshot and answers every
restore's capture (``DaemonRestoreMachine``).

The invariant that matters: **no byte the user ever wrote is made unreachable by ctrlz**. The
model keeps every ``(path, bytes)`` the user (never the agent) wrote. A user may destroy their
own bytes (overwrite a file nobody captured), but:

* every pair the user had on disk just before a ctrlz operation is, right after it, still on
  disk or in the store (a snapshot's tree, or a pre-image of the tool-call store);
* once a pair is in the store it stays there (the pools are unbounded here, so nothing drops).

And each restore is exact where it claims to be: its safety snapshot holds exactly the state
before it (every covered path, plus the ignored paths it names explicitly), a whole-workspace
rollback leaves every covered path equal to the target (kind, mode, bytes, mtime) and ignored
files alone, a path-limited restore changes nothing outside its paths, a tool-call restore puts
back the pre-images it reports and skips exactly the paths edited after the tool call (unless
forced), undo and redo restore the operation's own snapshots (after a redo, the undo restores
the redo's capture), an undo right after a restore or a redo gives back exactly the tree before
it, and no temp file or restore journal is ever left behind.

The bugs it found are pinned at the end of this module as small tests.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from ctrlz import Workspace
from ctrlz import toolcalls as tc
from ctrlz.engine.restore.apply import KEPT_IN_THE_WAY, KEPT_NOT_EMPTY
from ctrlz.engine.restore.plan import KEPT_UNCOVERED, LEFT_UNCAPTURED
from ctrlz.errors import RestoreIncomplete, UsageError
from ctrlz.session import daemon_client
from ctrlz.session.config import Config
from ctrlz.state.db.oplog import MAX_OPERATIONS
from ctrlz.state.store import behind
from ctrlz.state.trees import DIR, SYMLINK
from ctrlz.toolcalls.restore.rewinds import rewind
from ctrlz.toolcalls.store import ToolcallStore
from tests.conftest import make_tree, tree_state

FILES = ["a.txt", "b.bin", "src/c.py", "src/d.py", "docs/e.md", "docs/f.md"]
IGNORED = [".env", "build/out.log"]  # by the .gitignore below
DIRS = ["src", "docs", "build", "extra", "src/sub"]
NEW_DIRS = ["extra", "src/sub", "docs", "a.txt"]  # a.txt: a file becomes a directory
GITIGNORE = b".env\n*.log\n"
SESSION = "s1"
OLD_NS = 1_600_000_000 * 10**9  # old enough that no stat cache sees it as racily clean
MODES = [None, 0o600, 0o644, 0o755, 0o640]
MTIMES = [None, OLD_NS, OLD_NS + 1_234_567_891]

#: a RAM-backed directory when there is one: every restore fsyncs, and on a disk those waits
#: would dominate the run (the files are just as real there)
SCRATCH = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None

State = dict[str, tuple]

#: why the engine leaves a path alone (as opposed to a tool call's "edited after it")
PLAN_SKIPS = (KEPT_UNCOVERED, LEFT_UNCAPTURED, KEPT_NOT_EMPTY)


def kept_in_the_way(exc: RestoreIncomplete) -> Any:
    """A restore that could not put a file where a directory holding files it leaves alone
    stands (and said so): nothing else is left undone. Its result."""
    assert exc.result.conflicts and all(c.reason == KEPT_IN_THE_WAY
                                        for c in exc.result.conflicts), exc
    return exc.result


def ignored(rel: str) -> bool:
    return rel == ".env" or rel.endswith(".log")


def covered(rel: str, explicit: frozenset[str]) -> bool:
    return not ignored(rel) or rel in explicit


def under(rel: str, scope: list[str]) -> bool:
    return any(rel == p or rel.startswith(p + "/") for p in scope)


def ancestor(rel: str, scope: list[str]) -> bool:
    return any(p.startswith(rel + "/") for p in scope)


def content(entry: tuple | None) -> tuple | None:
    """A file's kind, mode and bytes, without its mtime (a tool-call restore that writes new
    bytes gives the file a new mtime)."""
    return entry[:3] if entry is not None and entry[0] == "f" else entry


def identity(entry: tuple | None) -> tuple | None:
    """What "changed after the tool call" compares: kind and bytes (never mode or mtime)."""
    return None if entry is None else (entry[0], entry[2]) if entry[0] == "f" else entry[:1]


@dataclass
class Op:
    """One entry of the model's undo stack."""

    kind: str
    scope: list[str] | None  # None: the whole workspace
    explicit: frozenset[str]  # the tool call's paths, and ignored files the restore created
    before_id: str  # the safety snapshot the restore took
    before: State  # the whole tree just before it
    step: int
    undone: bool = False
    after_id: str | None = None  # the safety snapshot the undo took
    after: State = field(default_factory=dict)
    undo_step: int = -1


@dataclass
class Call:
    """One agent tool call: what it found at each path and what it left there."""

    id: str
    rels: list[str]
    pre: dict[str, tuple | None]
    post: dict[str, tuple | None]
    turn: int = 1
    shell_snapshot: str | None = None  # a shell call: the workspace snapshot taken before it
    rolled_back: bool = False  # by a turn rollback: out of the timeline until a turn redo
    gone: bool = False  # forgotten: a rolled back call once its turn redo is cleared


class RestoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="ctrlz-stateful-", dir=SCRATCH))
        self.root = self.tmp / "ws"
        self.root.mkdir()
        (self.root / ".gitignore").write_bytes(GITIGNORE)
        self.counter = 0
        self.user_pairs: set[tuple[str, bytes]] = set()
        for rel in FILES + IGNORED:
            self._write_user(rel, b"initial")
            os.utime(self.p(rel), ns=(OLD_NS, OLD_NS))
        config = Config()
        for key in ("manual_max", "safety_max", "auto_max", "tool_max"):
            config.set(key, 100_000, "test")  # pools are tested elsewhere; nothing may drop
        config.set("max_count", 1_000_000, "test")
        config.set("daemon", False, "test")  # a shell call would start one otherwise
        self.ws = Workspace.init(self.root, home=self.tmp / "home", config=config)
        self.turn = tc.begin_turn(SESSION, workspace=self.ws)
        self.ops: list[Op] = []
        self.calls: list[Call] = []
        self.turn_redo: list[tuple[Op, list[Call]]] = []  # the session's turn redo stack
        self.manual: list[str] = []
        self.protected: set[tuple[str, bytes]] = set()  # user pairs the store holds
        self.verified: set[tuple[str, bytes]] = set()  # (store, oid) read back once
        self.tree_paths: dict[bytes, dict[str, bytes]] = {}
        self.steps = 0

    def teardown(self) -> None:
        self.ws.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- helpers ---------------------------------------------------------------------------

    def p(self, rel: str) -> Path:
        return self.root / rel

    def disk(self) -> State:
        return tree_state(self.root)

    def tag(self, who: bytes, tail: bytes) -> bytes:
        self.counter += 1
        return who + b"%05d:" % self.counter + tail

    def _write_user(self, rel: str, tail: bytes) -> None:
        path = self.p(rel)
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = self.tag(b"U", tail)
        path.write_bytes(data)
        self.user_pairs.add((rel, data))

    def user_pairs_on(self, state: State) -> set[tuple[str, bytes]]:
        return {(k, v[2]) for k, v in state.items()
                if v[0] == "f" and (k, v[2]) in self.user_pairs}

    def snapshot_state(self, snap_id: str) -> State:
        """A snapshot's tree in :func:`tree_state`'s shape."""
        snap = self.ws.repo.catalog.snapshot(snap_id)
        assert snap is not None, f"snapshot {snap_id} is gone"
        repo = self.ws.repo
        out: State = {}
        top = next(e for e in repo.tree(snap.root) if e.name == b"0")
        stack = [(b"", top.oid)]
        while stack:
            prefix, oid = stack.pop()
            for e in repo.tree(oid):
                rel = prefix + e.name
                key = os.fsdecode(rel)
                if e.kind == DIR:
                    out[key] = ("d", e.mode)
                    stack.append((rel + b"/", e.oid))
                elif e.kind == SYMLINK:
                    out[key] = ("l", repo.objects.read(e.oid))
                else:
                    out[key] = ("f", e.mode, repo.objects.read(e.oid), e.mtime_ns)
        return out

    def _paths_of(self, root_oid: bytes) -> dict[str, bytes]:
        """Every file of a snapshot's tree: path -> object id (memoised: trees are
        immutable)."""
        hit = self.tree_paths.get(root_oid)
        if hit is not None:
            return hit
        repo = self.ws.repo
        out: dict[str, bytes] = {}
        top = next((e for e in repo.tree(root_oid) if e.name == b"0"), None)
        stack = [(b"", top.oid)] if top is not None else []
        while stack:
            prefix, oid = stack.pop()
            for e in repo.tree(oid):
                if e.kind == DIR:
                    stack.append((prefix + e.name + b"/", e.oid))
                elif e.kind != SYMLINK:
                    out[os.fsdecode(prefix + e.name)] = e.oid
        self.tree_paths[root_oid] = out
        return out

    def stored_pairs(self) -> set[tuple[str, bytes]]:
        """The user's (path, bytes) pairs that the store holds now: in some snapshot's tree
        (every snapshot, safety and restore targets included) or as a tool-call pre-image;
        each body read back from its store once."""
        digest = self.ws.repo.objects.digest
        by_oid: dict[bytes, list[tuple[str, bytes]]] = {}
        for rel, data in self.user_pairs:
            by_oid.setdefault(digest(data), []).append((rel, data))
        found: set[tuple[str, bytes]] = set()
        ws_pairs: set[tuple[str, bytes]] = set()
        for snap in self.ws.snapshots():
            ws_pairs |= {(k, v) for k, v in self._paths_of(snap.root).items()}
        with ToolcallStore(self.ws.store_path) as tcs:
            known = tcs.catalog.all_oids()
            tc_pairs = {(os.fsdecode(bytes(path)), bytes(oid)) for path, oid in tcs.db.execute(
                "SELECT path, oid FROM tc_entries WHERE oid IS NOT NULL")}
            for oid, pairs in by_oid.items():
                for rel, data in pairs:
                    if (rel, oid) in ws_pairs:
                        if ("ws", oid) not in self.verified:
                            assert self.ws.repo.objects.read(oid) == data
                            self.verified.add(("ws", oid))
                        found.add((rel, data))
                    elif (rel, oid) in tc_pairs and oid in known:
                        if ("tc", oid) not in self.verified:
                            assert tcs.objects.read(oid) == data
                            self.verified.add(("tc", oid))
                        found.add((rel, data))
        return found

    def check_kept(self, pairs: set[tuple[str, bytes]], label: str) -> None:
        """What the user had on disk before a ctrlz operation is on disk or in the store."""
        now = self.disk()
        on_disk = {(k, v[2]) for k, v in now.items() if v[0] == "f"}
        lost = pairs - on_disk - self.stored_pairs()
        assert not lost, f"{label} made user bytes unreachable: {sorted(lost)}"

    def check_captured(self, snap_id: str | None, before: State,
                       explicit: frozenset[str] = frozenset()) -> None:
        """A snapshot holds exactly the covered state it was taken of."""
        assert snap_id is not None
        want = {k: v for k, v in before.items() if covered(k, explicit)}
        got = self.snapshot_state(snap_id)
        assert got == want, _diff(want, got)

    def check_applied(self, before: State, now: State, want: State, scope: list[str] | None,
                      explicit: frozenset[str], label: str, kept: set[str]) -> None:
        """``want`` at every covered path in ``scope``; ignored files kept (an absent one may
        be created from the target); nothing outside ``scope`` changed; a directory above
        ``scope`` that the target lacks goes once it is empty. ``kept``: what the restore
        reports it left (a directory that still holds an ignored file), left as it was."""
        self.check_kept_paths(before, kept, explicit, label)
        for k in sorted(set(before) | set(now) | set(want)):
            if k in kept:
                assert now.get(k) == before.get(k), (label, "skipped but changed", k)
                continue
            if scope is not None:
                if ancestor(k, scope):
                    if k not in want:
                        assert k not in now or any(e.startswith(k + "/") for e in now), (
                            label, "left an empty directory the target does not have", k)
                    elif want[k][0] == "d":
                        assert now.get(k, ("?",))[0] == "d", (label, "no parent", k)
                    continue
                if not under(k, scope):
                    assert now.get(k) == before.get(k), (label, "changed outside its paths", k)
                    continue
            if not covered(k, explicit):
                if k in before:
                    assert now[k] == before[k], (label, "touched an ignored file", k)
                else:
                    assert now.get(k) == want.get(k), (label, k)
                continue
            assert now.get(k) == want.get(k), (label, k, _diff(want, now))

    def check_kept_paths(self, before: State, kept: set[str], explicit: frozenset[str],
                         label: str) -> None:
        """A covered path is left only when it is a directory holding an ignored file; an
        ignored file the target has is left when one is there already."""
        for k in kept:
            assert (not covered(k, explicit) and k in before) or (
                before.get(k, ("?",))[0] == "d" and any(
                    e.startswith(k + "/") and not covered(e, explicit) for e in before)), (
                label, "left alone", k)

    def record(self, kind: str, scope: list[str] | None, explicit: frozenset[str],
               before_id: str | None, before: State) -> Op:
        """A restore's undo entry. An ignored file it created where there was none (from a
        snapshot a tool-call restore grafted it into) is named in it, so undo removes it."""
        assert before_id is not None
        made = {k for k in self.disk() if not covered(k, explicit) and k not in before}
        self.ops = [o for o in self.ops if not o.undone]
        op = Op(kind, scope, explicit | made, before_id, before, self.steps)
        newest = self.ws.oplog.next_undo()
        assert newest is not None and newest.before == before_id  # the engine's entry
        self.ops.append(op)
        del self.ops[:-MAX_OPERATIONS]
        return op

    def clear_turn_redo(self) -> None:
        """Any change but a turn redo: the turn redo stack goes, and with it the tool calls
        its rollbacks took out of the timeline."""
        for _op, rolled in self.turn_redo:
            for call in rolled:
                call.gone = True
        self.turn_redo = []

    def live_calls(self) -> list[Call]:
        """The session's timeline: what rewind and turn rollback choose from."""
        return [c for c in self.calls if not c.rolled_back and not c.gone]

    def new_call_id(self) -> str:
        return f"toolu_{len(self.calls)}"

    # -- user edits ------------------------------------------------------------------------

    @rule(rel=st.sampled_from(FILES + IGNORED), tail=st.binary(max_size=12))
    def user_write(self, rel: str, tail: bytes) -> None:
        self._write_user(rel, tail)

    @rule(rel=st.sampled_from(IGNORED), tail=st.binary(max_size=12))
    def user_write_ignored(self, rel: str, tail: bytes) -> None:
        self._write_user(rel, tail)

    @rule(rel=st.sampled_from(FILES + IGNORED), tail=st.binary(max_size=12))
    def user_rewrite_same_size_same_mtime(self, rel: str, tail: bytes) -> None:
        """The hardest edit for a stat cache: same inode, same size, same mtime."""
        path = self.p(rel)
        if not path.is_file() or path.is_symlink():
            return
        before = os.stat(path)
        old = path.read_bytes()
        if len(old) < 7:
            return
        new = (self.tag(b"U", tail) + b"#" * len(old))[:len(old)]
        assert new != old
        with open(path, "r+b") as f:
            f.write(new)
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        self.user_pairs.add((rel, new))

    @rule(rel=st.sampled_from(FILES + IGNORED), mode=st.sampled_from(MODES),
          mtime=st.sampled_from(MTIMES))
    def user_metadata_only(self, rel: str, mode: int | None, mtime: int | None) -> None:
        path = self.p(rel)
        if not path.is_file() or path.is_symlink():
            return
        if mode is not None:
            os.chmod(path, mode)
        if mtime is not None or mode is None:
            ns = mtime if mtime is not None else OLD_NS + 7
            os.utime(path, ns=(ns, ns))

    @rule(rel=st.sampled_from(FILES + IGNORED + DIRS))
    def user_delete(self, rel: str) -> None:
        path = self.p(rel)
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()

    @rule(rel=st.sampled_from(NEW_DIRS), tail=st.binary(max_size=8), with_log=st.booleans())
    def user_make_dir(self, rel: str, tail: bytes, with_log: bool) -> None:
        path = self.p(rel)
        if path.is_symlink() or path.is_file():
            path.unlink()
        path.mkdir(parents=True, exist_ok=True)
        self._write_user(f"{rel}/one", tail)
        self._write_user(f"{rel}/two", tail)
        if with_log:  # an ignored file inside: the directory cannot simply be removed
            self._write_user(f"{rel}/x.log", tail)

    @precondition(lambda self: self.calls)
    @rule(index=st.integers(0, 1000), which=st.integers(0, 1), tail=st.binary(max_size=8))
    def user_edits_what_the_agent_wrote(self, index: int, which: int, tail: bytes) -> None:
        call = self.calls[index % len(self.calls)]
        if call.rels:
            self._write_user(call.rels[which % len(call.rels)], tail)

    # -- snapshots and restores ------------------------------------------------------------

    @rule()
    def snapshot(self) -> None:
        before = self.disk()
        snap = self.ws.snapshot(label=f"manual {len(self.manual)}")
        self.check_captured(snap.id, before)
        self.manual.append(snap.id)

    @precondition(lambda self: self.manual)
    @rule(index=st.integers(0, 1000))
    def rollback_whole(self, index: int) -> None:
        snaps = self.ws.snapshots()  # any of them: manual, safety, tool-call targets
        self._rollback(snaps[index % len(snaps)].id, None)

    @precondition(lambda self: self.manual)
    @rule(index=st.integers(0, 1000), rel=st.sampled_from(FILES + IGNORED + DIRS))
    def rollback_one_path(self, index: int, rel: str) -> None:
        snaps = self.ws.snapshots()
        self._rollback(snaps[index % len(snaps)].id, rel)

    @precondition(lambda self: self.manual)
    @rule(rel=st.sampled_from(FILES + DIRS))
    def revert_one_path(self, rel: str) -> None:
        # the model's choice of source: the newest non-safety snapshot holding the path
        sources = [s for s in self.ws.snapshots() if s.type != "safety"]
        source = next((s for s in reversed(sources) if self.ws.entry_at(s.id, rel)),
                      sources[-1])
        self._rollback(source.id, rel, revert=True)

    def _rollback(self, target: str, rel: str | None, revert: bool = False) -> None:
        from ctrlz.errors import RestoreError, UsageError

        want = self.snapshot_state(target)
        before = self.disk()
        pairs = self.user_pairs_on(before)
        # a path in neither the snapshot nor the tree is refused before anything happens
        names_nothing = rel is not None and not os.path.lexists(self.p(rel)) and not any(
            k == rel or k.startswith(rel + "/") for k in want)
        try:
            try:
                if revert:
                    assert rel is not None
                    result = self.ws.revert(str(self.p(rel)))
                    assert result.target.id == target
                else:
                    result = self.ws.rollback(target,
                                              paths=[str(self.p(rel))] if rel else None)
            except RestoreIncomplete as exc:
                result = kept_in_the_way(exc)
        except UsageError as exc:
            assert names_nothing, exc
            assert self.disk() == before
            return
        except RestoreError as exc:  # a directory of the path is now a file or a symlink
            assert "the snapshot has a directory there" in str(exc), exc
            assert self.disk() == before
            return
        assert not names_nothing, rel
        scope = [rel] if rel else None
        assert result.safety is not None
        self.check_captured(result.safety.id, before)
        self.check_applied(before, self.disk(), want, scope, frozenset(), "rollback",
                           vpaths(result.skipped))
        self.check_kept(pairs, "rollback")
        self.record("revert" if revert else "rollback", scope, frozenset(), result.safety.id,
                    before)

    @rule()
    def undo(self) -> None:
        op = next((o for o in reversed(self.ops) if not o.undone), None)
        before = self.disk()
        if op is None:
            with pytest.raises(UsageError, match="nothing to undo"):
                self.ws.undo()
            assert self.disk() == before
            return
        try:
            done = self.ws.undo()
        except RestoreIncomplete as exc:  # a directory the user made, holding files the undo
            result = kept_in_the_way(exc)  # leaves alone, stands where a file goes back: the
            # undo is recorded all the same, and the directory reported and left as it is
            self._undone(op, before, result.safety.id if result.safety else None,
                         vpaths(result.skipped) | vpaths(result.conflicts))
            return
        assert done.operation.before == op.before_id
        self._undone(op, before, done.restore.safety.id if done.restore.safety else None,
                     vpaths(done.restore.skipped))

    def _undone(self, op: Op, before: State, safety: str | None, kept: set[str]) -> None:
        """Check an undo of ``op`` (which left ``kept`` alone)."""
        now = self.disk()
        self.check_captured(safety, before, op.explicit)
        self.check_applied(before, now, self.snapshot_state(op.before_id), op.scope,
                           op.explicit, f"undo of {op.kind}", kept)
        if op.step == self.steps - 1:  # right after the restore: exactly the tree before it
            assert now == op.before, (f"undo right after {op.kind}", _diff(op.before, now))
        self.check_kept(self.user_pairs_on(before), "undo")
        assert safety is not None
        op.undone, op.after_id, op.after, op.undo_step = True, safety, before, self.steps

    @rule()
    def redo(self) -> None:
        op = next((o for o in self.ops if o.undone), None)
        before = self.disk()
        if op is None:
            with pytest.raises(UsageError, match="nothing to redo"):
                self.ws.redo()
            assert self.disk() == before
            return
        pairs = self.user_pairs_on(before)
        try:
            done = self.ws.redo()
            assert done.operation.before == op.before_id
            restored, kept = done.restore, vpaths(done.restore.skipped)
        except RestoreIncomplete as exc:  # as in undo: a directory in the way, reported
            restored = kept_in_the_way(exc)
            kept = vpaths(restored.skipped) | vpaths(restored.conflicts)
        assert op.after_id is not None and restored.safety is not None
        now = self.disk()
        self.check_captured(restored.safety.id, before, op.explicit)
        self.check_applied(before, now, self.snapshot_state(op.after_id), op.scope,
                           op.explicit, f"redo of {op.kind}", kept)
        if op.undo_step == self.steps - 1:  # right after the undo: the tree before it
            assert now == op.after, (f"redo right after undoing {op.kind}",
                                     _diff(op.after, now))
        self.check_kept(pairs, "redo")
        # the next undo of it returns to the tree just before this redo (with whatever the
        # user changed after the undo), which the redo captured
        op.undone, op.before_id, op.before, op.step = False, restored.safety.id, before, \
            self.steps

    # -- agent tool calls ------------------------------------------------------------------

    @rule()
    def agent_begins_a_turn(self) -> None:
        self.turn = tc.begin_turn(SESSION, workspace=self.ws)
        self.clear_turn_redo()

    @rule(rels=st.lists(st.sampled_from(FILES + IGNORED), min_size=1, max_size=2, unique=True),
          tail=st.binary(max_size=8))
    def agent_tool_call(self, rels: list[str], tail: bytes) -> None:
        rels = [r for r in rels if not self.p(r).is_dir()]  # an agent's Write makes files
        if not rels:
            return
        before = self.disk()
        pairs = self.user_pairs_on(before)
        call_id = self.new_call_id()
        with tc.tool_call(SESSION, call_id, workspace=self.ws):
            for rel in rels:
                tc.write_file(self.p(rel), self.tag(b"A", tail))
        self.clear_turn_redo()  # a new capture
        after = self.disk()
        self.calls.append(Call(call_id, rels, {r: before.get(r) for r in rels},
                               {r: after.get(r) for r in rels}, turn=self.turn))
        self.check_kept(pairs, "a tool call")

    @rule(rel=st.sampled_from(FILES + IGNORED))
    def agent_deletes_a_file(self, rel: str) -> None:
        if not self.p(rel).is_file() or self.p(rel).is_symlink():
            return
        before = self.disk()
        pairs = self.user_pairs_on(before)
        call_id = self.new_call_id()
        with tc.tool_call(SESSION, call_id, workspace=self.ws):
            tc.delete_file(self.p(rel))
        self.clear_turn_redo()
        self.calls.append(Call(call_id, [rel], {rel: before.get(rel)}, {rel: None},
                               turn=self.turn))
        self.check_kept(pairs, "a tool call that deletes")

    @rule(rels=st.lists(st.sampled_from(FILES + IGNORED), max_size=2, unique=True),
          tail=st.binary(max_size=8))
    def agent_shell_call(self, rels: list[str], tail: bytes) -> None:
        """A Bash call: a ``tool`` snapshot of the workspace first, then the command writes
        files behind ctrlz's back."""
        rels = [r for r in rels if not self.p(r).is_dir()]
        before = self.disk()
        pairs = self.user_pairs_on(before)
        call_id = self.new_call_id()
        info = tc.shell_call(SESSION, call_id, "make out", workspace=self.ws)
        self.clear_turn_redo()
        self.check_captured(info["workspace_snapshot"], before)
        self.check_kept(pairs, "a shell call")
        # the command itself: an ignored file it overwrites is lost, by the agent (the
        # snapshot covers what the rules cover; no hook sees which paths a command touches)
        for rel in rels:
            self.p(rel).parent.mkdir(parents=True, exist_ok=True)
            self.p(rel).write_bytes(self.tag(b"A", tail))
        after = self.disk()
        self.calls.append(Call(call_id, rels, {r: before.get(r) for r in rels},
                               {r: after.get(r) for r in rels}, turn=self.turn,
                               shell_snapshot=info["workspace_snapshot"]))

    def _tool_restore(self, calls: list[Call], force: bool, run: Any, label: str,
                      only: list[str] | None = None, shell: Call | None = None,
                      beyond: list[Call] | None = None) -> Op | None:
        """A restore of the file tool calls ``calls`` (and, with ``shell``, of the whole
        workspace to the snapshot taken before that shell call, and of the ignored paths the
        file tool calls ``beyond`` it touched to their earliest pre-image). ``run`` returns
        (the paths it skipped as edited after the tool call; its safety snapshot; the paths
        the engine left alone). Returns the undo entry it recorded: none when it put back no
        path."""
        pre: dict[str, tuple | None] = {}
        post: dict[str, tuple | None] = {}
        passed: dict[str, set] = {}  # the states the calls themselves left the path in
        late: set[str] = set()  # ignored paths only a call after the shell call touched
        for call in calls + (beyond or []):
            for rel in call.rels:
                if only is not None and rel not in only:
                    continue
                if call not in calls:
                    if (rel in pre and rel not in late) or not ignored(rel):
                        continue  # the shell call's snapshot says what it held
                    late.add(rel)
                pre.setdefault(rel, call.pre[rel])  # the earliest pre-image wins
                post[rel] = call.post[rel]  # compared with what the last call left
                passed.setdefault(rel, set()).add(identity(call.pre[rel]))
        base = self.snapshot_state(shell.shell_snapshot) if shell is not None else {}
        before = self.disk()
        pairs = self.user_pairs_on(before)
        skip_expected = set()
        for rel in pre:
            now = before.get(rel)
            if now is not None and now[0] == "d":
                skip_expected.add(rel)  # a directory is there now: never removed
            elif not force:
                # compared with the state just before the shell call, which a rewind puts
                # back anyway; an ignored path is not in that snapshot, so it cannot tell
                then = base.get(rel) if shell is not None and rel not in late else now
                known = then is not None or shell is None or rel in late
                if known and identity(then) != identity(post[rel]) and (
                        identity(then) not in passed[rel]):
                    skip_expected.add(rel)  # edited after the tool call (not a state the
                    # calls went through, such as where an earlier rewind put it)
        try:
            skipped, safety, kept = run()
        except RestoreIncomplete as exc:  # a directory in the way: only undo is checked
            kept_in_the_way(exc)
            assert exc.result.safety is not None
            self.record(label, None if shell is not None else list(pre), frozenset(pre),
                        exc.result.safety.id, before)
            self.check_kept(pairs, label)
            self.undo()
            assert self.disk() == before, (f"undo right after {label}",
                                           _diff(before, self.disk()))
            return None
        assert skipped == skip_expected, (label, force, skipped, skip_expected)
        now = self.disk()
        rels = list(pre)
        explicit = frozenset(rels)
        self.check_kept_paths(before, kept, explicit, label)
        for k in sorted(set(before) | set(now) | set(base)):
            if ancestor(k, rels):
                continue
            if k in kept or under(k, list(skipped)):
                assert now.get(k) == before.get(k), (label, "skipped but changed", k)
            elif k in pre:
                assert content(now.get(k)) == content(pre[k]), (label, "not restored", k)
            elif shell is None:
                assert now.get(k) == before.get(k), (label, "changed outside its paths", k)
            elif ignored(k) and k in before:
                assert now[k] == before[k], (label, "touched an ignored file", k)
            elif ignored(k):
                assert k not in now, (label, "made an ignored file", k)
            else:  # the whole workspace back to the state just before the shell call
                assert now.get(k) == base.get(k), (label, "not rewound", k)
        self.check_captured(safety, before, explicit)
        self.check_kept(pairs, label)
        if not rels and shell is None:
            return None  # nothing put back: nothing to undo
        return self.record(label, rels if shell is None else None, explicit, safety, before)

    @precondition(lambda self: self.calls)
    @rule(index=st.integers(0, 1000), force=st.booleans(),
          only=st.none() | st.sampled_from(FILES + IGNORED))
    def agent_fs_restore(self, index: int, force: bool, only: str | None) -> None:
        calls = [c for c in self.calls if not c.gone]
        if not calls:
            return
        call = calls[index % len(calls)]
        if call.shell_snapshot is not None:
            before = self.disk()
            out = tc.fs_restore(SESSION, call.id, force=force, workspace=self.ws)
            assert out["restored_paths"] == [] and out["safety_snapshot"] is None
            assert "rewind" in out["skipped_paths_with_reasons"][0]["reason"]
            assert self.disk() == before
            return
        wanted = [only] if only is not None else None  # maybe none of the call's paths

        def run() -> tuple[set[str], str | None, set[str]]:
            out = tc.fs_restore(SESSION, call.id, [str(self.p(only))] if only else None,
                                force=force, workspace=self.ws)
            skipped = {s["path"] for s in out["skipped_paths_with_reasons"]}
            assert set(out["restored_paths"]) == (set(wanted or call.rels) & set(call.rels)) \
                - skipped
            return skipped, out["safety_snapshot"], set()

        self._tool_restore([call], force, run, "fs_restore", wanted)
        self.clear_turn_redo()

    @rule(index=st.integers(0, 1000), force=st.booleans(), by_turn=st.booleans())
    def agent_rewind(self, index: int, force: bool, by_turn: bool) -> None:
        live = self.live_calls()
        if not live:
            return
        call = live[index % len(live)]
        if by_turn:
            target = f"#{call.turn}"
            chosen = [c for c in live if c.turn >= call.turn]
        else:
            target = call.id
            chosen = live[live.index(call):]
        shell = next((c for c in chosen if c.shell_snapshot is not None), None)
        files = chosen[:chosen.index(shell)] if shell is not None else chosen
        beyond = ([c for c in chosen[chosen.index(shell) + 1:] if c.shell_snapshot is None]
                  if shell is not None else [])

        def run() -> tuple[set[str], str | None, set[str]]:
            done = rewind(self.ws, target, session_id=SESSION, force=force)
            assert done.tool_calls == [c.id for c in chosen]
            assert done.shell_snapshot == (shell.shell_snapshot if shell else None)
            skipped, kept = set(), set()
            for s in done.skipped:
                (kept if s["reason"] in PLAN_SKIPS else skipped).add(s["path"])
            return skipped, done.safety, kept

        self._tool_restore(files, force, run, "rewind", shell=shell, beyond=beyond)
        self.clear_turn_redo()

    @rule(index=st.integers(0, 1000), force=st.booleans())
    def agent_turn_rollback(self, index: int, force: bool) -> None:
        live = self.live_calls()
        if not live:
            with pytest.raises(UsageError, match="no tool calls"):
                tc.rollback(SESSION, self.turn + 1, force=force, workspace=self.ws)
            return
        turn = live[index % len(live)].turn
        chosen = [c for c in live if c.turn >= turn]
        files = [c for c in chosen if c.shell_snapshot is None]

        reported: list[set[str]] = []

        def run() -> tuple[set[str], str | None, set[str]]:
            out = tc.rollback(SESSION, turn, force=force, workspace=self.ws)
            assert out["fs_snapshot_ids"] == [c.id for c in chosen]
            skipped = {s["path"] for r in out["fs_restores"]
                       for s in r["skipped_paths_with_reasons"]}
            reported.append(skipped)
            return skipped, out["redo_fs_snapshot_ids"][0], set()

        op = self._tool_restore(files, force, run, "turn-rollback")
        self.clear_turn_redo()
        if not reported:  # it stopped at a directory in the way, and was undone
            return
        # a tool call whose pre-image may be the only copy of some bytes stays in the timeline:
        # one of its paths was left alone (edited since), or its pre-image is not what the
        # previous tool call left there (an edit by hand in between)
        keep, left = set(), {}
        for c in files:
            for k in c.rels:
                if k in reported[0] or identity(left.get(k, c.pre[k])) != identity(c.pre[k]):
                    keep.add(c.id)
                left[k] = c.post[k]
        rolled = [c for c in chosen if c.id not in keep]
        for c in rolled:
            c.rolled_back = True
        if op is not None:
            self.turn_redo.append((op, rolled))

    @rule()
    def agent_turn_redo(self) -> None:
        before = self.disk()
        if not self.turn_redo:
            with pytest.raises(UsageError, match="nothing to redo"):
                tc.redo(SESSION, workspace=self.ws)
            assert self.disk() == before
            return
        op, rolled = self.turn_redo[-1]
        newest = next((o for o in reversed(self.ops) if not o.undone), None)
        if newest is not op:
            with pytest.raises(UsageError, match="restored since"):
                tc.redo(SESSION, workspace=self.ws)
            self.clear_turn_redo()
            assert self.disk() == before
            return
        tc.redo(SESSION, workspace=self.ws)  # the undo of that rollback
        entry = next(o for o in self.ws.oplog.operations() if o.before == op.before_id)
        assert entry.undone
        kept = {k for k, v in before.items() if v[0] == "d" and any(
            e.startswith(k + "/") and not covered(e, op.explicit) for e in before)}
        self._undone(op, before, entry.after, kept & set(self.disk()))
        self.turn_redo.pop()
        for c in rolled:
            c.rolled_back = False

    # -- after every step ------------------------------------------------------------------

    @invariant()
    def nothing_lost_and_nothing_left_behind(self) -> None:
        self.steps += 1
        temps = [k for k in self.disk() if os.path.basename(k).startswith(".ctrlz-tmp-")]
        assert not temps, temps
        assert not (self.ws.store_path / "restore-journal").exists()
        stored = self.stored_pairs()
        gone = self.protected - stored
        assert not gone, f"user bytes left the store: {sorted(gone)}"
        self.protected |= stored


def vpaths(skipped: Any) -> set[str]:
    """Workspace-relative paths of the engine's ``Skipped`` entries."""
    return {os.fsdecode(k.path.partition(b"/")[2]) for k in skipped}


def _diff(want: State, got: State) -> list[tuple[str, Any, Any]]:
    return [(k, want.get(k), got.get(k)) for k in sorted(set(want) | set(got))
            if want.get(k) != got.get(k)]


# deterministic (derandomize, no example database): about 10 s here, the slow one 2 minutes
def _runs(examples: int, steps: int) -> settings:
    """Deterministic runs (derandomized, no example database) of ``examples`` programs of up
    to ``steps`` steps each."""
    return settings(max_examples=examples, stateful_step_count=steps, deadline=None,
                    derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


TestRestoreStateful = RestoreMachine.TestCase
TestRestoreStateful.settings = _runs(60, 30)


@pytest.mark.slow
class TestRestoreStatefulSlow(RestoreMachine.TestCase):
    settings = _runs(400, 50)


class BehindRestoreMachine(RestoreMachine):
    """The same model with every small object a snapshot stores compressed behind the walk
    (``state/store/behind.py``) in batches of two: a real snapshot hands over only past 256 new
    files, which a model of a few files never reaches. Batches then cross directories and
    snapshots' twins, and any object promised and never appended shows up as a lost byte."""

    def __init__(self) -> None:
        self._saved_behind = (behind.START_AFTER, behind.BATCH_OBJECTS)
        behind.START_AFTER, behind.BATCH_OBJECTS = 0, 2
        try:
            super().__init__()
        except BaseException:  # no teardown follows a failed start
            behind.START_AFTER, behind.BATCH_OBJECTS = self._saved_behind
            raise

    def teardown(self) -> None:
        try:
            super().teardown()
        finally:
            behind.START_AFTER, behind.BATCH_OBJECTS = self._saved_behind


TestBehindRestoreStateful = BehindRestoreMachine.TestCase
TestBehindRestoreStateful.settings = _runs(25, 30)


class DaemonRestoreMachine(RestoreMachine):
    """The same model with the workspace daemon running: every snapshot is the daemon's (from
    its watcher's dirty set) and every restore's capture asks it what changed, so a dirty set
    that misses an edit shows up as a user's byte lost or a safety snapshot that differs."""

    ENV = {"CTRLZ_MANUAL_MAX": "100000", "CTRLZ_SAFETY_MAX": "100000",
           "CTRLZ_AUTO_MAX": "100000", "CTRLZ_TOOL_MAX": "100000",
           "CTRLZ_MAX_COUNT": "1000000", "CTRLZ_DAEMON": "0"}

    def __init__(self) -> None:
        # the daemon loads its settings from the files and the environment, and serves only
        # callers whose settings equal its own: give both the machine's through the environment
        self._saved = {k: os.environ.get(k) for k in (*self.ENV, "CTRLZ_HOME")}
        os.environ.update(self.ENV)
        try:
            super().__init__()
            os.environ["CTRLZ_HOME"] = str(self.tmp / "home")  # the daemon opens it by root
            info = daemon_client.start(self.root, self.ws.store_path, wait=True, timeout=60)
            assert info.get("ready"), info
        except BaseException:  # no teardown follows a failed start: leave nothing behind
            self._restore_env()
            if getattr(self, "ws", None) is not None:
                daemon_client.stop(self.ws.store_path)
                super().teardown()
            raise

    def _restore_env(self) -> None:
        for k, v in self._saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    def teardown(self) -> None:
        try:
            info = daemon_client.status(self.ws.store_path)
            daemon_client.stop(self.ws.store_path)
            served = info.get("served") or {}
            if self.manual or self.ops:  # snapshots or restores ran: it really took part
                assert sum(served.values()) > 0, info
        finally:
            self._restore_env()
            super().teardown()


TestDaemonRestoreStateful = pytest.mark.skipif(
    not daemon_client.can_watch(), reason="no file watcher here (watchdog not installed), "
    "so no workspace daemon")(DaemonRestoreMachine.TestCase)
TestDaemonRestoreStateful.settings = _runs(25, 30)


@pytest.mark.slow
@pytest.mark.skipif(not daemon_client.can_watch(), reason="no file watcher here, so no daemon")
class TestDaemonRestoreStatefulSlow(DaemonRestoreMachine.TestCase):
    settings = _runs(150, 50)


# -- what the machine found, pinned as small examples --------------------------------------------

@pytest.mark.parametrize("how", ["rollback of one path", "tool-call restore"])
def test_undo_removes_the_parent_directories_a_path_restore_created(ws_dir: Path,
                                                                      how: str) -> None:
    make_tree(ws_dir, {".gitignore": "*.log\n", "build": {"out.log": "the user's log\n"},
                       "src": {"c.py": "v1\n"}})
    ws = Workspace.init(ws_dir)
    snap = ws.snapshot()
    with tc.tool_call("s1", "t1", workspace=ws):
        tc.write_file(ws_dir / "build" / "out.log", "the agent's log\n")
    shutil.rmtree(ws_dir / "src")
    shutil.rmtree(ws_dir / "build")
    before = tree_state(ws_dir)
    if how == "rollback of one path":
        ws.rollback(snap.id, paths=[str(ws_dir / "src" / "c.py")])  # creates src/
    else:
        tc.fs_restore("s1", "t1", force=True, workspace=ws)  # creates build/
    ws.undo()
    assert tree_state(ws_dir) == before  # no empty src/ (or build/) left behind


def test_undo_takes_back_an_ignored_file_a_rollback_created(ws_dir: Path) -> None:
    make_tree(ws_dir, {".gitignore": ".env\n", ".env": "SECRET=user\n", "app.py": "pass\n"})
    ws = Workspace.init(ws_dir)
    with tc.tool_call("s1", "t1", workspace=ws):
        tc.write_file(ws_dir / ".env", "SECRET=agent\n")
    safety = tc.fs_restore("s1", "t1", workspace=ws)["safety_snapshot"]  # holds .env
    (ws_dir / ".env").unlink()
    before = tree_state(ws_dir)
    ws.rollback(safety)  # writes the ignored .env (SECRET=agent) back
    ws.undo()
    assert tree_state(ws_dir) == before  # the .env the rollback wrote is gone again


def test_a_directory_holding_an_ignored_file_where_the_target_has_a_file(ws_dir: Path) -> None:
    make_tree(ws_dir, {".gitignore": "*.log\n", "a.txt": "a file\n"})
    ws = Workspace.init(ws_dir)
    snap = ws.snapshot()
    (ws_dir / "a.txt").unlink()
    make_tree(ws_dir / "a.txt", {"one": "tracked\n", "x.log": "ignored\n"})
    # once "a.txt changed while it ran", then a success that had not put the file back;
    # now incomplete, and why
    with pytest.raises(RestoreIncomplete, match="a.txt could not be put in place") as info:
        ws.rollback(snap.id)
    assert [k.path for k in info.value.result.skipped] == [b"0/a.txt"]  # left, and said why
    assert (ws_dir / "a.txt" / "x.log").read_text() == "ignored\n"


def test_a_turn_rollback_that_skips_a_path_keeps_its_pre_image(ws_dir: Path) -> None:
    make_tree(ws_dir, {".gitignore": ".env\n", ".env": "SECRET=original\n"})
    ws = Workspace.init(ws_dir)
    tc.begin_turn("s1", workspace=ws)
    with tc.tool_call("s1", "t1", workspace=ws):
        tc.write_file(ws_dir / ".env", "SECRET=agent\n")  # pre-image: SECRET=original
    (ws_dir / ".env").write_text("SECRET=edited by hand\n")
    out = tc.rollback("s1", 1, workspace=ws)  # skips .env: a later edit
    assert [s["path"] for s in out["fs_restores"][0]["skipped_paths_with_reasons"]] == [".env"]
    tc.begin_turn("s1", workspace=ws)  # the next prompt
    tc.fs_snapshot("s1", "t2", [ws_dir / "other"], workspace=ws)
    tc.drop_snapshot("s1", "t2", workspace=ws)  # any compaction of the tool-call store
    oid = ws.repo.objects.digest(b"SECRET=original\n")
    with ToolcallStore(ws.store_path) as store:
        kept = store.objects.has(oid) and any(
            bytes(row[0]) == oid for row in store.db.execute("SELECT oid FROM tc_entries"))
    kept = kept or any((e := ws.entry_at(s.id, ".env")) is not None and e.oid == oid
                       for s in ws.snapshots())
    assert kept  # SECRET=original is still a pre-image


def test_undo_of_a_tool_call_restore_of_no_path_changes_nothing(ws_dir: Path) -> None:
    make_tree(ws_dir, {"a.txt": "v1\n", "b.txt": "b1\n"})
    ws = Workspace.init(ws_dir)
    with tc.tool_call("s1", "t1", workspace=ws):
        tc.write_file(ws_dir / "b.txt", "the agent's\n")
    tc.fs_restore("s1", "t1", [ws_dir / "a.txt"], workspace=ws)  # not a path of t1: a no-op
    (ws_dir / "a.txt").write_text("v2, a later edit\n")
    (ws_dir / "new.txt").write_text("a new file\n")
    before = tree_state(ws_dir)
    with pytest.raises(UsageError, match="nothing to undo"):
        ws.undo()  # the no-op recorded nothing to take back
    assert tree_state(ws_dir) == before


def test_a_turn_rollback_keeps_a_hand_edit_made_between_two_tool_calls(ws_dir: Path) -> None:
    make_tree(ws_dir, {"a.txt": "v1\n"})
    ws = Workspace.init(ws_dir)
    tc.begin_turn("s1", workspace=ws)
    with tc.tool_call("s1", "t1", workspace=ws):
        tc.write_file(ws_dir / "a.txt", "agent 1\n")
    (ws_dir / "a.txt").write_text("v2 by hand\n")  # between the two tool calls
    with tc.tool_call("s1", "t2", workspace=ws):
        tc.write_file(ws_dir / "a.txt", "agent 2\n")  # pre-image: v2 by hand
    tc.rollback("s1", 1, workspace=ws)  # a.txt is v1 again; undo would give "agent 2"
    tc.begin_turn("s1", workspace=ws)  # the next prompt
    tc.fs_snapshot("s1", "t3", [ws_dir / "other"], workspace=ws)
    tc.drop_snapshot("s1", "t3", workspace=ws)  # any compaction of the tool-call store
    oid = ws.repo.objects.digest(b"v2 by hand\n")
    with ToolcallStore(ws.store_path) as store:
        kept = store.objects.has(oid) and any(
            bytes(row[0]) == oid for row in store.db.execute("SELECT oid FROM tc_entries"))
    kept = kept or any((e := ws.entry_at(s.id, "a.txt")) is not None and e.oid == oid
                       for s in ws.snapshots())
    assert kept  # fails: "v2 by hand" is in no snapshot and no pre-image any more


def test_a_turn_redo_never_takes_back_a_later_restore(ws_dir: Path) -> None:
    make_tree(ws_dir, {"a.txt": "v1\n"})
    ws = Workspace.init(ws_dir)
    snap = ws.snapshot()
    tc.begin_turn("s1", workspace=ws)
    with tc.tool_call("s1", "t1", workspace=ws):
        tc.write_file(ws_dir / "a.txt", "the agent's\n")
    tc.rollback("s1", 1, workspace=ws)  # undo entry n; the turn's redo marker names n
    ws.undo()  # entry n undone: a.txt is the agent's again
    (ws_dir / "a.txt").write_text("v2 by hand\n")
    ws.rollback(snap.id)  # drops the undone entry n and records a new one, as n again
    before = tree_state(ws_dir)
    with contextlib.suppress(UsageError):  # "the workspace was restored since": right
        tc.redo("s1", workspace=ws)
    assert tree_state(ws_dir) == before  # fails: the rollback is undone, a.txt is v2 again


def test_fs_restore_of_a_rolled_back_tool_call_reports_its_paths(ws_dir: Path) -> None:
    make_tree(ws_dir, {"a.txt": "v1\n"})
    ws = Workspace.init(ws_dir)
    tc.begin_turn("s1", workspace=ws)
    with tc.tool_call("s1", "t1", workspace=ws):
        tc.write_file(ws_dir / "a.txt", "the agent's\n")
    tc.rollback("s1", 1, workspace=ws)  # a.txt is v1; t1 is rolled back
    out = tc.fs_restore("s1", "t1", force=True, workspace=ws)
    assert out["restored_paths"] == ["a.txt"]  # fails: []
