"""The undo stack (``state/db/oplog.py``) on a real catalog: push, undo, redo, the cap, and the
snapshot ids undo and redo still need."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ctrlz.state.db.catalog import Catalog
from ctrlz.state.db.oplog import MAX_OPERATIONS, OpLog


@pytest.fixture
def log(tmp_path: Path) -> Iterator[OpLog]:
    cat = Catalog(tmp_path / "catalog.db")
    yield OpLog(cat)
    cat.close()


def test_an_operation_is_recorded_with_its_paths_and_explicit_paths(log: OpLog) -> None:
    log.record("toolcall", "snap_t", [b"a/\xff"], "snap_s1", explicit=[b".env"],
               session_id="s1")
    (op,) = log.operations()
    assert (op.kind, op.target, op.paths, op.before, op.after, op.undone) == (
        "toolcall", "snap_t", (b"a/\xff",), "snap_s1", None, False)
    assert (op.explicit, op.status, op.session_id) == ((b".env",), "done", "s1")
    assert log.get(op.seq) == op and log.next_undo() == op and log.next_redo() is None
    assert op.to_json()["paths"] == ["a/\udcff"]  # as the file system encoding decodes it


def test_undo_then_redo_moves_the_cursor_and_keeps_what_each_captured(log: OpLog) -> None:
    log.record("rollback", "snap_t1", [], "snap_s1")
    log.record("rollback", "snap_t2", [], "snap_s2")
    newest = log.next_undo()
    assert newest is not None and newest.target == "snap_t2"
    log.mark_undone(newest.seq, after="snap_u2")
    assert log.next_undo().target == "snap_t1"  # type: ignore[union-attr]
    redo = log.next_redo()
    assert redo is not None and (redo.seq, redo.after, redo.undone) == (newest.seq, "snap_u2",
                                                                         True)
    log.mark_redone(redo.seq, before="snap_r2")
    again = log.get(redo.seq)
    assert again is not None and (again.undone, again.before) == (False, "snap_r2")
    assert log.next_redo() is None


def test_a_new_operation_forgets_the_redo_part(log: OpLog) -> None:
    log.record("rollback", "snap_t1", [], "snap_s1")
    log.record("rollback", "snap_t2", [], "snap_s2")
    op = log.next_undo()
    assert op is not None
    log.mark_undone(op.seq, after="snap_u2")
    log.record("revert", "snap_t3", [b"f"], "snap_s3")
    assert [o.target for o in log.operations()] == ["snap_t1", "snap_t3"]
    assert log.next_redo() is None


def test_an_undo_that_stopped_half_way_keeps_its_first_capture(log: OpLog) -> None:
    log.record("rollback", "snap_t1", [], "snap_s1")
    op = log.next_undo()
    assert op is not None
    log.note_undo_attempt(op.seq, "snap_first")
    log.note_undo_attempt(op.seq, "snap_second")  # a second try: the first capture stays
    assert "snap_first" in log.needed_next() and "snap_second" not in log.referenced()
    log.mark_undone(op.seq, after="snap_third")
    assert log.get(op.seq).after == "snap_first"  # type: ignore[union-attr]
    log.note_redo_attempt(op.seq, "snap_redo_first")
    log.mark_redone(op.seq, before="snap_redo_late")
    assert log.get(op.seq).before == "snap_redo_first"  # type: ignore[union-attr]


def test_referenced_is_the_whole_stack_and_needed_next_only_its_two_ends(log: OpLog) -> None:
    for i in range(3):
        log.record("rollback", f"snap_t{i}", [], f"snap_s{i}")
    newest = log.next_undo()
    assert newest is not None
    log.mark_undone(newest.seq, after="snap_u2")
    assert log.referenced() == {"snap_s0", "snap_s1", "snap_s2", "snap_u2"}
    # the next undo restores snap_s1; the next redo restores snap_u2, or its target
    assert log.needed_next() == {"snap_s1", "snap_u2", "snap_t2"}


def test_the_stack_keeps_the_newest_operations(log: OpLog) -> None:
    for i in range(MAX_OPERATIONS + 3):
        log.record("rollback", f"snap_t{i}", [], None)
    ops = log.operations()
    assert len(ops) == MAX_OPERATIONS
    assert ops[0].target == "snap_t3" and ops[-1].target == f"snap_t{MAX_OPERATIONS + 2}"
