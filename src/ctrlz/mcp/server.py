"""The ``mcp`` SDK (v2) server: thin tools over :mod:`ctrlz.mcp.queries` and
:mod:`ctrlz.mcp.actions`, served over stdio.

Each call opens the workspace that contains the server's starting directory, does one thing
and closes it again, so a workspace initialised after the server started is picked up, and no
SQLite handle crosses the SDK's worker threads. Calls run one at a time.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Literal, TypedDict, TypeVar

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from ..errors import CtrlzError
from ..workspace import Workspace
from . import actions, queries
from .text import DEFAULT_MAX_LENGTH, Page, clean, paginate, to_json_text

log = logging.getLogger("ctrlz.mcp")
T = TypeVar("T")

INSTRUCTIONS = """\
ctrlz keeps snapshots (checkpoints) of this workspace outside it. Take one with
snapshots_create before risky edits; see what changed with snapshots_changes or
snapshots_diff; put one file back with snapshots_revert, or everything with snapshots_restore
(which first takes a safety snapshot, so it can be undone). A checkpoint is a snapshot id
(snap_...), a unique prefix of it, its name, or cp-N (N back from the newest: cp-0 is the
newest)."""

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                            open_world_hint=False)
CREATES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False,
                          open_world_hint=False)
DESTRUCTIVE_IDEMPOTENT = ToolAnnotations(read_only_hint=False, destructive_hint=True,
                                         idempotent_hint=True, open_world_hint=False)
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True,
                              idempotent_hint=False, open_world_hint=False)

Checkpoint = Annotated[str, Field(description="A snapshot id (snap_...), a unique id prefix, "
                                              "a snapshot name, or cp-N (N back from the "
                                              "newest: cp-0 is the newest).")]
StartIndex = Annotated[int, Field(ge=0, description="Character offset to start from "
                                                    "(pagination).")]
MaxLength = Annotated[int, Field(ge=1, le=1_000_000, description="Most characters to return.")]
GitChoice = Annotated[Literal["auto", "keep", "restore"], Field(
    description="What becomes of each .git in the workspace: keep leaves it as it is (files "
                "only; branches and commits stay), restore puts it back too (branches move; "
                "commits made since leave the repository until an undo), auto restores it "
                "unless that makes commits unreachable, and then refuses.")]
Format = Literal["text", "json"]


# -- output schemas ----------------------------------------------------------------------------


class PageFields(TypedDict):
    start_index: int
    end_index: int
    total_length: int
    next_start_index: int | None


class ListOut(PageFields):
    snapshots: list[dict[str, Any]]
    total: int
    auto_max: int
    manual_max: int
    manual_available: int


class ChangesOut(PageFields):
    changes: list[dict[str, Any]]
    total: int
    checkpoints: int


class DiffOut(PageFields):
    checkpoint: str
    cp: str
    name: str | None
    against: str
    path: str | None
    files: list[dict[str, Any]]
    diff: str


class CreateOut(TypedDict):
    checkpoint: str
    cp: str | None
    name: str
    hash: str
    available: int
    files_count: int


class RevertOut(TypedDict):
    reverted: bool
    path: str
    action: Literal["restored", "deleted", "unchanged"]
    checkpoint: str
    safety_snapshot: str | None
    undo: str | None


class DeleteOut(TypedDict):
    deleted: bool
    checkpoint: str
    name: str | None
    origin: str


class HistoryOut(TypedDict):
    path: str
    current_size: int | None
    exists_now: bool
    versions: list[dict[str, Any]]


class CompactOut(TypedDict):
    compacted: bool
    checkpoint: str
    name: str
    hash: str
    merged_count: int
    deleted_checkpoints: list[str]
    files_count: int


class RestoreOut(TypedDict):
    restored: bool
    dry_run: bool
    checkpoint: str
    counts: dict[str, int]
    actions: list[dict[str, Any]]
    actions_total: int
    safety_snapshot: str | None
    undo: str | None
    git: list[dict[str, Any]]


class RewindOut(TypedDict):
    rewound: bool
    session_id: str
    target: str
    dry_run: bool
    tool_calls: list[str]
    shell_snapshot: str | None
    safety_snapshot: str | None
    changed_paths: list[str]
    changed_total: int
    skipped: list[dict[str, str]]
    undo: str | None


class UndoOut(TypedDict):
    action: Literal["undo", "redo"]
    operation: dict[str, Any]
    checkpoint: str
    counts: dict[str, int]
    actions: list[dict[str, Any]]
    actions_total: int
    skipped: list[dict[str, str]]
    safety_snapshot: str | None
    next: str
    git: list[dict[str, Any]]


# -- plumbing ----------------------------------------------------------------------------------


class Server:
    """The workspace a server serves, and the one-call-at-a-time rule."""

    def __init__(self, start: Path) -> None:
        self.start = start
        self.lock = threading.Lock()

    @contextmanager
    def workspace(self) -> Iterator[Workspace]:
        with self.lock:
            try:
                ws = Workspace.open(self.start)
            except CtrlzError as exc:
                raise ToolError(str(exc)) from None
            try:
                yield ws
            finally:
                ws.close()

    def call(self, fn: Callable[[Workspace], T]) -> T:
        """Run ``fn`` on the workspace; an expected failure becomes an ``isError`` result with
        its one-line message."""
        with self.workspace() as ws:
            try:
                return fn(ws)
            except CtrlzError as exc:
                raise ToolError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                                ) from None


def _result(data: dict[str, Any], text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=clean(text))],
                          structured_content=data)


def _json_result(data: dict[str, Any]) -> CallToolResult:
    return _result(data, to_json_text(data))


def _paged(data: dict[str, Any], text: str, fmt: Format, start_index: int,
           max_length: int) -> CallToolResult:
    """``text`` format: the rendering, paginated by characters. ``json``: the whole data (never
    cut, so it stays parseable). Either way the structured output is the whole data."""
    if fmt == "json":
        body = to_json_text(data)
        page = Page(body, 0, len(body), len(body))
        return _result({**data, **page.to_json()}, body)
    page = paginate(text, start_index, max_length)
    return _result({**data, **page.to_json()}, page.render())


# -- the server --------------------------------------------------------------------------------


def build(start: str | os.PathLike[str] = ".") -> MCPServer:
    """An ``MCPServer`` serving the workspace that contains ``start``."""
    from importlib.metadata import version

    srv = Server(Path(start).expanduser().absolute())
    mcp = MCPServer("ctrlz", title="ctrlz snapshots", instructions=INSTRUCTIONS,
                    version=version("ctrlz"))

    @mcp.tool(annotations=CREATES)
    def snapshots_create(
        name: Annotated[str, Field(description="A name for the snapshot: 1-64 characters of "
                                               "A-Z, a-z, 0-9, _ and -.")],
    ) -> Annotated[CallToolResult, CreateOut]:
        """Take a manual snapshot (checkpoint) of the whole workspace now, named `name`.

        Manual snapshots are never evicted; when the manual pool is full this fails; free a
        slot with snapshots_delete or snapshots_compact."""
        return _json_result(srv.call(lambda ws: actions.create(ws, name)))

    @mcp.tool(annotations=READ_ONLY)
    def snapshots_list(start_index: StartIndex = 0,
                       max_length: MaxLength = DEFAULT_MAX_LENGTH,
                       format: Format = "text",
                       include_changes: bool = False) -> Annotated[CallToolResult, ListOut]:
        """List snapshots newest first, with counts of files created/edited/deleted since the
        snapshot before each (by content). include_changes adds the per-file list. Text output
        is paginated by characters: pass next_start_index as start_index to continue."""
        data = srv.call(lambda ws: queries.list_snapshots(ws, include_changes))
        return _paged(data, queries.render_list(data), format, start_index, max_length)

    @mcp.tool(annotations=READ_ONLY)
    def snapshots_changes(start_index: StartIndex = 0,
                          max_length: MaxLength = DEFAULT_MAX_LENGTH,
                          format: Format = "text") -> Annotated[CallToolResult, ChangesOut]:
        """Files that differ now from the snapshots (created, modified or deleted, by content).
        Each path is listed once, under the newest checkpoint it differs from: revert it from
        there. Text output is paginated by characters."""
        data = srv.call(queries.changed_files)
        return _paged(data, queries.render_changes(data), format, start_index, max_length)

    @mcp.tool(annotations=DESTRUCTIVE_IDEMPOTENT)
    def snapshots_revert(
        path: Annotated[str, Field(description="A file or folder, relative to the workspace "
                                               "root (or absolute inside it).")],
        checkpoint: Checkpoint | None = None,
    ) -> Annotated[CallToolResult, RevertOut]:
        """Put one file or folder back as it was in `checkpoint` (default: the newest snapshot
        that has it; a file no snapshot has is deleted). A safety snapshot is taken first;
        the result says how to undo."""
        return _json_result(srv.call(lambda ws: actions.revert(ws, path, checkpoint)))

    @mcp.tool(annotations=DESTRUCTIVE_IDEMPOTENT)
    def snapshots_delete(checkpoint: Checkpoint) -> Annotated[CallToolResult, DeleteOut]:
        """Delete one snapshot you took (snapshots_create, snapshots_compact) or an automatic
        one that no restore needs. The user's snapshots (manual, pre-run, tool, safety), pinned
        ones, and any that undo or a rewind of a recorded tool call needs are refused."""
        return _json_result(srv.call(lambda ws: actions.delete(ws, checkpoint)))

    @mcp.tool(annotations=READ_ONLY)
    def snapshots_history(
        path: Annotated[str, Field(description="A file or folder, relative to the workspace "
                                               "root.")],
    ) -> Annotated[CallToolResult, HistoryOut]:
        """Every snapshot of one path, newest first, each marked new / modified / unchanged /
        deleted / absent against the snapshot before it (by content)."""
        return _json_result(srv.call(lambda ws: queries.history(ws, path)))

    @mcp.tool(annotations=DESTRUCTIVE)
    def snapshots_compact(
        checkpoints: Annotated[list[str], Field(min_length=1, description="Snapshots to fold "
                                                                          "into one.")],
        name: Annotated[str | None, Field(description="Name of the result, 1-64 characters "
                                                      "of A-Z, a-z, 0-9, _ and - (default "
                                                      "compacted_<epoch>).")] = None,
    ) -> Annotated[CallToolResult, CompactOut]:
        """Fold several snapshots into one manual snapshot: the newest of them is kept (renamed)
        and the older ones are deleted. A snapshot is the full workspace state, so files
        deleted by the newest one stay deleted. Only snapshots snapshots_delete may delete can
        be folded, the kept one too."""
        return _json_result(srv.call(lambda ws: actions.compact(ws, checkpoints, name)))

    @mcp.tool(annotations=READ_ONLY)
    def snapshots_diff(path: Annotated[str | None, Field(description="Limit to this file or "
                                                                      "folder.")] = None,
                       checkpoint: Checkpoint | None = None,
                       start_index: StartIndex = 0,
                       max_length: MaxLength = DEFAULT_MAX_LENGTH,
                       ) -> Annotated[CallToolResult, DiffOut]:
        """A unified diff from `checkpoint` (default: the newest snapshot) to the working tree,
        paginated by characters."""
        data, text = srv.call(lambda ws: queries.diff(ws, path, checkpoint))
        page = paginate(text, start_index, max_length)
        return _result({**data, "diff": clean(page.text), **page.to_json()},
                       page.render())

    @mcp.tool(annotations=DESTRUCTIVE_IDEMPOTENT)
    def snapshots_restore(
        checkpoint: Checkpoint,
        paths: Annotated[list[str] | None, Field(description="Only these files or folders "
                                                             "(default: everything).")] = None,
        dry_run: Annotated[bool, Field(description="Only report what would change.")] = False,
        git: GitChoice = "auto",
    ) -> Annotated[CallToolResult, RestoreOut]:
        """Roll the workspace (or only `paths`) back to `checkpoint`, in place. A safety
        snapshot is taken first and the result says how to undo; only paths the snapshot
        covered are touched. `git` in the result names what happens to each git repository's
        branches and commits (the user's own commits may be among them: run with
        dry_run first)."""
        return _json_result(srv.call(
            lambda ws: actions.restore(ws, checkpoint, paths, dry_run, git)))

    @mcp.tool(annotations=DESTRUCTIVE)
    def snapshots_rewind(
        target: Annotated[str, Field(description="A tool_use_id of the session, or a turn "
                                                 "number (as a string, e.g. \"3\").")],
        session_id: Annotated[str | None, Field(description="The agent session (default: the "
                                                            "latest one).")] = None,
        dry_run: Annotated[bool, Field(description="Only report what would change.")] = False,
        force: Annotated[bool, Field(description="Also put back files changed after the tool "
                                                 "calls, by hand or by another agent session's "
                                                 "tool calls; by default they are left alone "
                                                 "and listed in skipped (another session's "
                                                 "with its session_id).")] = False,
    ) -> Annotated[CallToolResult, RewindOut]:
        """Put the workspace back to just before one tool call (or the first tool call of one
        turn) of an agent session, undoing that call and every one after it, shell commands
        included. A safety snapshot is taken first; snapshots_undo takes the rewind back.
        Destructive unless dry_run."""
        return _json_result(srv.call(
            lambda ws: actions.rewind(ws, target, session_id, dry_run, force)))

    @mcp.tool(annotations=DESTRUCTIVE)
    def snapshots_undo(git: GitChoice = "auto") -> Annotated[CallToolResult, UndoOut]:
        """Take back the newest restore, revert or rewind (from these tools or the ctrlz CLI)
        that is not undone yet: the workspace goes back to the state just before it, over the
        same paths. Each undo takes a safety snapshot of its own; snapshots_redo applies the
        operation again."""
        return _json_result(srv.call(lambda ws: actions.undo(ws, git)))

    @mcp.tool(annotations=DESTRUCTIVE)
    def snapshots_redo(git: GitChoice = "auto") -> Annotated[CallToolResult, UndoOut]:
        """Apply again the operation snapshots_undo (or `ctrlz undo`) took back most recently.
        Each redo takes a safety snapshot of its own."""
        return _json_result(srv.call(lambda ws: actions.redo(ws, git)))

    return mcp


def serve(start: str | os.PathLike[str] = ".", log_level: str = "WARNING") -> None:
    """Serve over stdio until the client goes away. Logs go to stderr; stdout is the
    protocol."""
    logging.basicConfig(level=log_level.upper(), format="ctrlz mcp: %(levelname)s %(message)s")
    from ..session.protected import keep_restores_in_process

    keep_restores_in_process()
    build(start).run()


__all__ = ["build", "serve"]
