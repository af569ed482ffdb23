"""The one inside-the-workspace path check.

Every path a user, an agent or a tool hands to ctrlz becomes a workspace-relative path in
:func:`where`, or is refused there with the reason. Two questions look alike and are not, and
the check answers each by one rule, chosen by its caller:

- **a name in the workspace** (``on_disk=False``: a path to restore, to look up in a snapshot,
  to diff). It is read as text: ``..`` is resolved lexically and no symlink is followed, so
  ``a..b.txt`` is a fine name while ``../x`` and ``/etc/passwd`` are refused. A snapshot holds
  names, not inodes, and the restore engine reaches every parent through ``O_NOFOLLOW``
  directory handles, so a name whose parent is *now* a link (a planted one, or a loop) is
  still the name the user means: the engine refuses to write through the link, in its own
  words ("src: the snapshot has a directory there"), instead of this check calling a
  workspace name "outside".
- **a file a tool is about to write** (``on_disk=True``: an agent's file tool, an ACP
  ``fs/write_text_file``, a capture through the tool-call API). The path is taken where the
  write will really land: its parent directories' links are followed (``os.path.realpath`` of
  the parent), the last component is not (a link is a name of its own). So the workspace
  named as ``/tmp/ws`` for ``/private/tmp/ws``, or ``lib/f.txt`` where ``lib`` links to
  ``packages/lib``, becomes the real ``packages/lib/f.txt``, which the capture (refusing any
  path through a link, like every write) can take; and ``lib/f.txt`` where ``lib`` links out
  of the workspace is outside, because the write lands outside. A parent that is a loop of
  links is refused (the write would fail with ``ELOOP``). When the path is itself a link, the
  tool writes through it, so the link's target is reported too (:attr:`Where.target`) when it
  lies in the workspace.

Both are safe on their own terms, and neither can be loosened: the lexical rule stays
lexical so the engine sees (and refuses) the link, and the on-disk rule is the strictest
there is, the real location. ``root`` must be the real path of the workspace root (what the
locator gives): under ``on_disk`` a root with a link in it matches nothing, so everything is
refused, never let through. Agent hooks call this on every file tool call, so it imports
nothing but ``os``.
"""

from __future__ import annotations

import errno
import os

from .errors import PathOutsideWorkspace, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, AnyStr


class Where:
    """:func:`where`'s answer: ``inside``, the workspace-relative ``rel`` (``b""`` for the
    root itself, and when refused), or ``why`` not (one line, for a message). ``target``: under
    ``on_disk``, when the path is a symlink whose target lies in the workspace, that target's
    relative path (the tool writes through the link); else None. A plain class: hooks make
    one per path, and ``dataclasses`` costs each hook milliseconds of import."""

    __slots__ = ("rel", "why", "target", "_error")

    def __init__(self, rel: bytes, why: str | None = None, target: bytes | None = None,
                 error: type[UsageError] = PathOutsideWorkspace) -> None:
        self.rel = rel
        self.why = why
        self.target = target
        self._error = error

    @property
    def inside(self) -> bool:
        return self.why is None

    def relative(self) -> bytes:
        """``rel``, or the refusal raised (:class:`~ctrlz.errors.PathOutsideWorkspace`, or a
        :class:`~ctrlz.errors.UsageError` for what is no path at all)."""
        if self.why is not None:
            raise self._error(self.why)
        return self.rel

    def __repr__(self) -> str:
        return f"Where(rel={self.rel!r}, why={self.why!r}, target={self.target!r})"


def where(path: str | os.PathLike[str] | bytes, root: bytes, cwd: bytes | None = None, *,
          on_disk: bool = False, allow_root: bool = True) -> Where:
    """Whether ``path`` (absolute, or relative to ``cwd``, default the root) lies in the
    workspace at ``root`` (its real path), and as what relative path; the two rules are in
    the module's docstring. The root itself is ``b""``, refused unless ``allow_root``."""
    try:
        raw = os.fsencode(path)
    except UnicodeEncodeError:  # a lone surrogate (JSON's "\ud800") names no bytes
        return Where(b"", "the path is not text a file name can hold (a lone surrogate); "
                     "give it in UTF-8", error=UsageError)
    if not raw:
        return Where(b"", "empty path", error=UsageError)
    if b"\0" in raw:
        return Where(b"", "a path cannot contain a NUL byte", error=UsageError)
    full = raw if raw.startswith(b"/") else os.path.join(cwd or root, raw)
    if on_disk:
        full, loop = _real_parent(full)
        if loop:
            return Where(b"", f"{_quoted(raw)} goes through a loop of symlinks")
    else:
        full = os.path.normpath(full)
    rel = _below(full, root)
    if rel is None or (not rel and not allow_root):
        return Where(b"", f"{_quoted(raw)} is outside the workspace {_quoted(root)}")
    target = None
    if on_disk and rel and os.path.islink(full):
        target = _below(os.path.realpath(full), root) or None
        if target == rel:
            target = None  # a link to itself: no other file is written
    return Where(rel, target=target)


def _real_parent(full: bytes) -> tuple[bytes, bool]:
    """``full`` with its parent directories' links followed and its last component kept, as
    a write to it would land; and whether a parent is a loop of links. A path ending in
    ``/``, ``.`` or ``..`` names a directory through its last component, so it is followed
    whole (as the kernel does)."""
    head, tail = os.path.split(full)
    if tail in (b"", b".", b".."):
        head, tail = full, b""
    try:
        real = os.path.realpath(head, strict=True)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return full, True
        real = os.path.realpath(head)  # a parent not made yet: the tool may make it
    return (os.path.join(real, tail) if tail else real), False


def _below(full: bytes, root: bytes) -> bytes | None:
    """``full`` (normalised) relative to ``root``; ``b""`` for the root, None outside it."""
    if full == root:
        return b""
    top = root.rstrip(b"/") + b"/"
    return full[len(top):] if full.startswith(top) else None


def within(path: AnyStr, top: AnyStr) -> bool:
    """Whether the normalised absolute ``path`` is ``top`` or below it, by text (resolve
    both first where links matter): the one spelling of "below a directory" for checks that
    compare two directories (a fork's destination and the workspace, a sandbox's roots)."""
    sep: Any = "/" if isinstance(path, str) else b"/"
    return path == top or path.startswith(top.rstrip(sep) + sep)


def workspace_relative(root: bytes, path: str | os.PathLike[str] | bytes, base: bytes,
                       *, allow_root: bool = True, on_disk: bool = False) -> bytes:
    """:func:`where`'s relative path, or its refusal raised."""
    return where(path, root, base, on_disk=on_disk, allow_root=allow_root).relative()


def _quoted(path: bytes) -> str:
    """A path in an error message, quoted as every message quotes one."""
    from .quoting import quote_path

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
