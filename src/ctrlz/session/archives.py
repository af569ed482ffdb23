"""Archives for a workspace: which snapshots, which file, and ``import --to`` a new workspace.

Writing goes to a temp file beside the target, renamed into place when complete, so a failed
or interrupted export never leaves a file that looks like an archive; ``-`` streams to stdout.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

from ..engine.archive import ExportReport, ImportReport, export_archive, import_archive
from ..errors import RemoteError, UsageError
from ..state.fsio.atomic import fsync_dir, temp_name
from .protected import ProtectedWorkspace


def export(ws: ProtectedWorkspace, refs: Sequence[str], output: str,
           since: str | None = None) -> ExportReport:
    snaps = [ws.resolve(r) for r in refs]
    snaps = list({s.id: s for s in snaps}.values())
    base = ws.resolve(since) if since else None
    if base is not None and base.id in {s.id for s in snaps} and len(snaps) == 1:
        raise UsageError(f"--since {since} is the snapshot being exported; nothing to export")
    extra = {"workspace": {"name": ws.root.name}}
    if output == "-":
        out = sys.stdout.buffer
        if out.isatty():
            raise UsageError("refusing to write an archive to a terminal; use -o FILE or a "
                             "pipe")
        report = export_archive(ws.repo, snaps, out, base, extra)
        out.flush()
        return report
    target = Path(output).expanduser()
    if target.is_dir():
        raise UsageError(f"{output} is a directory; give a file name")
    tmp = target.parent / temp_name(target.name)
    try:
        with open(tmp, "wb") as f:
            report = export_archive(ws.repo, snaps, f, base, extra)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
        fsync_dir(target.parent)
    except OSError as exc:
        raise RemoteError(f"cannot write {output}: {exc.strerror or exc}") from None
    finally:
        if tmp.exists():
            tmp.unlink()
    return report


def _open(file: str) -> tuple[BinaryIO, str]:
    if file == "-":
        return sys.stdin.buffer, "the archive on stdin"
    try:
        return open(Path(file).expanduser(), "rb"), file  # noqa: SIM115
    except OSError as exc:
        raise RemoteError(f"cannot read {file}: {exc.strerror or exc}") from None


def import_into(ws: ProtectedWorkspace, file: str) -> ImportReport:
    src, name = _open(file)
    try:
        return import_archive(ws.repo, src, name)
    finally:
        if src is not sys.stdin.buffer:
            src.close()


def import_to(file: str, dest: str) -> tuple[ProtectedWorkspace, ImportReport, Any]:
    """``import FILE --to DIR``: DIR (new or empty) becomes a workspace with the archive's
    snapshots, and the newest is restored into it."""
    from ..engine.restore.restore import restore_into

    target = Path(dest).expanduser()
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise UsageError(f"{target} exists and is not an empty directory")
    from .locator import default_home, has_store, store_path_for

    src, name = _open(file)
    made = not target.exists()
    target.mkdir(parents=True, exist_ok=True)
    fresh = not has_store(store_path_for(target.resolve(), Path(default_home()).expanduser()))
    ws = ProtectedWorkspace.init(target)
    try:
        try:
            report = import_archive(ws.repo, src, name)
        finally:
            if src is not sys.stdin.buffer:
                src.close()
        if report.newest is None:
            raise RemoteError(f"{name} holds no snapshot")
        restored = restore_into(ws.repo, len(ws.roots), ws.resolve(report.newest.id), ws.root)
    except BaseException:
        # the store this call made goes too (as a failed clone's does): left behind, a later
        # import --to DIR would import into it, beside whatever the failed one left
        from .remotes.cloning import discard_new

        discard_new(ws, fresh, target if made else None)
        raise
    return ws, report, restored
