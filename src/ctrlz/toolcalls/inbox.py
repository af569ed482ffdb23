"""A file tool's capture, left in the inbox by a hook that runs in its own process.

:func:`capture_later` has :func:`ctrlz.toolcalls.api.capture_rels`'s effect for the
pre-tool hook of a file tool: the pre-images of the paths the tool will write are durable
before it returns, and the snapshot appears in every view of the store, with its turn, its
session's budgets applied. What it skips is the indexing: the capture is written to the inbox
(:mod:`ctrlz.state.db.inbox`) and indexed by the next process that opens the tool-call store
(:mod:`ctrlz.toolcalls.intake`), which for an agent is the post-tool hook of the same call.
The hook then imports no SQLite, object store or hash function, which is most of what it cost
(docs/decisions/0008-tool-call-inbox.md).

Anything this way does not take (a body of :data:`BODY_MAX` or more, bodies adding up to
:data:`RECORD_MAX`, a store not made yet, a path that fails the checks, a full inbox, a write
that fails) goes the usual way instead, :func:`~ctrlz.toolcalls.api.capture_rels`, which
raises the error a person should see. A capture is therefore at least once: a record whose
write raised after its rename is indexed as well, and the second capture of the same paths
adds nothing (the first capture wins).
"""

from __future__ import annotations

import os
import stat
import time

from ..state.db import inbox
from .images import DIR, FILE, SYMLINK, check_rel, look, open_file

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

#: a file this big is captured the usual way: the inbox keeps whole bodies in one record
BODY_MAX = 1 << 20
#: nor a record whose bodies add up to this much (a patch tool naming many files): a record
#: is read whole, and its writer holds it whole
RECORD_MAX = 8 << 20
#: records waiting at once; past this, a hook indexes them (the usual way) before its own
PENDING_MAX = 64


def capture_later(session_id: str, scope_id: str, rels: Sequence[bytes], *,
                  workspace: Any, agent: str | None = None, tool: str | None = None,
                  args_key: str | None = None, turn_key: str | None = None) -> None:
    """Capture ``rels`` (workspace-relative, checked by the hook: :func:`ctrlz.hooks.actions.
    inside`) of ``workspace`` (a hook's context) for the snapshot ``scope_id`` through the
    inbox where it can, else through ``capture_rels``."""
    try:
        left = _leave(session_id, scope_id, rels, workspace, agent=agent, tool=tool,
                      args_key=args_key, turn_key=turn_key)
    except Exception:  # noqa: BLE001 - the usual way runs next and reports what is wrong
        left = False
    if not left:
        from .api import capture_rels

        capture_rels(session_id, scope_id, rels, workspace=workspace, agent=agent, tool=tool,
                     args_key=args_key, turn_key=turn_key)


def _leave(session_id: str, scope_id: str, rels: Sequence[bytes], workspace: Any, *,
           agent: str | None, tool: str | None, args_key: str | None,
           turn_key: str | None) -> bool:
    """Write the record; False for anything the inbox does not take (nothing written)."""
    if not (isinstance(session_id, str) and session_id.strip()
            and isinstance(scope_id, str) and scope_id.strip()):
        return False
    toolcalls_dir = os.path.join(workspace.store_dir, "toolcalls")
    if not os.path.isfile(os.path.join(toolcalls_dir, "catalog.db")):
        return False  # the first capture makes the store and its schema
    if len(inbox.listing(toolcalls_dir)[0]) >= PENDING_MAX:
        return False
    taken_ns = time.time_ns()
    root = os.fsencode(workspace.root_dir)  # real: the locator resolved it
    images: list[dict[str, Any]] = []
    bodies: list[bytes] = []
    held = 0
    for rel in dict.fromkeys(rels):
        image, body = _image(root, rel)
        if image is None:
            return False
        images.append(image)
        bodies.append(body)
        held += len(body)
        if held >= RECORD_MAX:
            return False
    header = {"v": inbox.VERSION, "kind": "pre", "session_id": session_id, "scope_id": scope_id,
              "agent": agent, "tool": tool, "args_key": args_key, "turn_key": turn_key,
              "taken_ns": taken_ns, "images": images}
    inbox.write(toolcalls_dir, header, bodies, taken_ns)
    return True


def _image(root: bytes, rel: bytes) -> tuple[dict[str, Any] | None, bytes]:
    """One path's image and body, as :func:`~ctrlz.toolcalls.images.capture` takes it (no
    symlink followed, the parents checked); (None, b"") for a body too big for a record."""
    full = check_rel(root, rel)
    kind, st, target = look(full)
    image: dict[str, Any] = {"path": os.fsdecode(rel), "kind": kind, "size": 0, "mode": None}
    if kind == SYMLINK:
        return image | {"size": len(target)}, target
    if kind == DIR:
        assert st is not None
        return image | {"mode": stat.S_IMODE(st.st_mode)}, b""
    if kind != FILE:
        return image, b""
    assert st is not None
    if st.st_size >= BODY_MAX:
        return None, b""
    fd = open_file(full)
    try:
        chunks = []
        size = 0
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
            size += len(chunk)
            if size >= BODY_MAX:  # it grew while read
                return None, b""
    finally:
        os.close(fd)
    body = b"".join(chunks)
    return image | {"size": len(body), "mode": stat.S_IMODE(st.st_mode)}, body
