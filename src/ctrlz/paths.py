"""The one inside-the-workspace path check.

A path a user, an agent or a tool hands to ctrlz becomes a workspace-relative path here, or is
refused. The check is lexical (``..`` is resolved as text, symlinks are never followed), so
``a..b.txt`` is a fine name while ``../x`` and ``/etc/passwd`` are refused; whether a parent is a
symlink *on disk* is the restore engine's business, which reaches every parent through
``O_NOFOLLOW`` directory handles. Agent hooks call this on every file tool call, so it imports
nothing but ``os``.
"""

from __future__ import annotations

import os

from .errors import PathOutsideWorkspace, UsageError


def workspace_relative(root: bytes, path: str | os.PathLike[str] | bytes, base: bytes,
                       *, allow_root: bool = True) -> bytes:
    """``path`` (absolute, or relative to ``base``) relative to ``root``; ``b""`` is the root
    itself, refused unless ``allow_root``."""
    raw = os.fsencode(path)
    if not raw:
        raise UsageError("empty path")
    if b"\0" in raw:
        raise UsageError("a path cannot contain a NUL byte")
    full = os.path.normpath(raw if raw.startswith(b"/") else os.path.join(base, raw))
    if full == root and allow_root:
        return b""
    if not full.startswith(root + b"/"):
        raise PathOutsideWorkspace(f"{_quoted(raw)} is outside the workspace {_quoted(root)}")
    return full[len(root) + 1:]


def _quoted(path: bytes) -> str:
    """A path in an error message, quoted as every message quotes one; ``ctrlz.types`` is
    loaded only for the error (the click-free doors do without it)."""
    from .types import quote_path

    return quote_path(path)


def plain_relative(path: str | bytes) -> bytes:
    """A path handed over a network API, which has no current directory to be relative to:
    it must already be workspace-relative, so an absolute path, a ``..`` component, a NUL
    byte or an empty path is refused outright (``a..b.txt`` is a fine name). ``.`` parts
    and repeated slashes are dropped; ``""`` and ``"."`` are refused too (name a path).
    Text that names no bytes (a lone surrogate from JSON's ``\\ud800``) is refused too."""
    try:
        raw = os.fsencode(path)
    except UnicodeEncodeError:
        shown = path.encode("utf-8", "backslashreplace").decode("utf-8") \
            if isinstance(path, str) else repr(path)
        raise UsageError(f"the path {shown} is not text a file name can hold (a lone "
                         "surrogate); give it in UTF-8") from None
    if b"\0" in raw:
        raise UsageError("a path cannot contain a NUL byte")
    if raw.startswith(b"/"):
        raise PathOutsideWorkspace(f"{_quoted(raw)} is absolute; give a path relative to "
                                   "the workspace root")
    parts = [p for p in raw.split(b"/") if p not in (b"", b".")]
    if b".." in parts:
        raise PathOutsideWorkspace(f"{_quoted(raw)} contains '..'; give a path inside the "
                                   "workspace without it")
    if not parts:
        raise UsageError("empty path")
    return b"/".join(parts)
