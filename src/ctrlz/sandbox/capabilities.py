"""What a sandboxed process may touch: access modes, filesystem grants and the set of them.

These are the names nono-py users already know (``AccessMode``, ``CapabilitySource``,
``FsCapability``, ``CapabilitySet``), with the same signatures, defaults, exception types and
text forms, so that code written for nono-py runs after changing only its import. Nothing here
touches the kernel: building a set only validates and canonicalizes paths. :func:`apply` and
:func:`sandboxed_exec` (``enforce`` and ``execute``) turn a set into Landlock and seccomp rules.

Paths are canonicalized when a grant is added (symlinks resolved, like ``realpath``), because
Landlock attaches a rule to an inode: a grant on a symlink would name a different place than the
one the kernel checks.
"""

from __future__ import annotations

import enum
import os

__all__ = ["AccessMode", "CapabilitySet", "CapabilitySource", "FsCapability"]


class AccessMode(enum.Enum):
    """File system access mode: ``READ``, ``WRITE`` or ``READ_WRITE``.

    ``READ`` lets a process read files, list directories and execute; ``WRITE`` lets it create,
    modify, rename and delete; ``READ_WRITE`` is both. ``str()`` gives nono-py's words
    (``"read"``, ``"write"``, ``"read+write"``), which are also the values.
    """

    READ = "read"
    WRITE = "write"
    READ_WRITE = "read+write"

    def __repr__(self) -> str:
        return f"AccessMode.{self.name}"

    def __str__(self) -> str:
        return self.value

    def covers(self, requested: AccessMode) -> bool:
        """Whether a grant of this mode allows ``requested`` (READ_WRITE covers all)."""
        return self is AccessMode.READ_WRITE or self is requested


class CapabilitySource:
    """Where a grant came from: the user, a named policy group, or the system.

    Deduplication uses it: a user's grant wins over a system or group grant for the same path,
    whatever their access levels, so that an explicit ``READ`` is never widened behind the
    user's back.
    """

    __slots__ = ("_kind", "_name")

    def __init__(self, kind: str = "user", name: str | None = None) -> None:
        if kind not in ("user", "group", "system"):
            raise ValueError(f"unknown capability source kind: {kind!r}")
        if (kind == "group") != (name is not None):
            raise ValueError("a group source needs a name, and only a group has one")
        self._kind = kind
        self._name = name

    @staticmethod
    def user() -> CapabilitySource:
        """A grant added directly by the user (the source of ``allow_path``/``allow_file``)."""
        return CapabilitySource("user")

    @staticmethod
    def group(name: str) -> CapabilitySource:
        """A grant resolved from the named policy group."""
        if not isinstance(name, str):
            raise TypeError(f"group name must be str, not {type(name).__name__}")
        return CapabilitySource("group", name)

    @staticmethod
    def system() -> CapabilitySource:
        """A grant for a path the system needs for a program to run at all."""
        return CapabilitySource("system")

    @property
    def is_user_intent(self) -> bool:
        """True for a user's own grant: the one deduplication keeps."""
        return self._kind == "user"

    def __str__(self) -> str:
        return f"group:{self._name}" if self._kind == "group" else self._kind

    def __repr__(self) -> str:
        return f"CapabilitySource({self})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CapabilitySource):
            return NotImplemented
        return (self._kind, self._name) == (other._kind, other._name)

    def __hash__(self) -> int:
        return hash((self._kind, self._name))


class FsCapability:
    """One filesystem grant (a read-only view): a directory and all below it, or one file.

    Made by :meth:`CapabilitySet.allow_path` and :meth:`CapabilitySet.allow_file`; read them
    back with :meth:`CapabilitySet.fs_capabilities`.
    """

    __slots__ = ("_access", "_is_file", "_original", "_resolved", "_source")

    def __init__(self, original: str, resolved: str, access: AccessMode, is_file: bool,
                 source: CapabilitySource | None = None) -> None:
        self._original = original
        self._resolved = resolved
        self._access = access
        self._is_file = is_file
        self._source = source if source is not None else CapabilitySource.user()

    @classmethod
    def new(cls, path: str | os.PathLike[str], access: AccessMode, *, is_file: bool,
            source: CapabilitySource | None = None) -> FsCapability:
        """A grant on ``path``, canonicalized now; the checks and errors of nono-py.

        Raises FileNotFoundError when the path does not exist, ValueError when it is a
        directory and a file was asked for (or the other way round), and OSError for any other
        failure to resolve it (a component that is not a directory, a loop, no permission).
        """
        if not isinstance(access, AccessMode):
            raise TypeError(f"mode must be an AccessMode, not {type(access).__name__}")
        original = os.fspath(path)
        if not isinstance(original, str):
            raise TypeError("path must be str or an os.PathLike of str")
        try:
            if not original:  # realpath would take it for the working directory
                raise FileNotFoundError(2, "empty path")
            resolved = os.path.realpath(original, strict=True)
            is_dir = os.path.isdir(resolved)
        except FileNotFoundError as e:
            raise FileNotFoundError(e.errno, f"Path does not exist: {original}",
                                    original) from None
        except OSError as e:
            raise OSError(e.errno, f"Cannot canonicalize {original}: {e.strerror}",
                          original) from None
        if is_file and is_dir:
            raise ValueError(f"Expected a file, but path is a directory: {original}")
        if not is_file and not is_dir:
            raise ValueError(f"Expected a directory, but path is not one: {original}")
        return cls(original, resolved, access, is_file, source)

    @property
    def original(self) -> str:
        """The path as the caller gave it."""
        return self._original

    @property
    def resolved(self) -> str:
        """The canonical absolute path (symlinks resolved) that the rule is attached to."""
        return self._resolved

    @property
    def access(self) -> AccessMode:
        """The access mode granted."""
        return self._access

    @property
    def is_file(self) -> bool:
        """True for a single file, False for a directory and everything below it."""
        return self._is_file

    @property
    def source(self) -> CapabilitySource:
        """Where this grant came from."""
        return self._source

    def _with(self, *, original: str | None = None,
              access: AccessMode | None = None) -> FsCapability:
        return FsCapability(self._original if original is None else original, self._resolved,
                            self._access if access is None else access, self._is_file,
                            self._source)

    def __repr__(self) -> str:
        return (f"FsCapability(path='{self._resolved}', access={self._access}, "
                f"is_file={self._is_file})")

    def __str__(self) -> str:
        return f"{self._resolved} ({self._access})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FsCapability):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def _key(self) -> tuple:
        return (self._original, self._resolved, self._access, self._is_file, self._source)


def _parts(path: str) -> tuple[str, ...]:
    """A path's components, compared whole (``/home`` is not a prefix of ``/homeevil``); empty
    and ``.`` components dropped but a leading one, as Rust's ``Path::components`` does (so
    that ``.`` is no prefix of every relative path)."""
    parts = tuple(p for p in path.split("/") if p not in ("", "."))
    if path.startswith("/"):
        return ("/", *parts)
    return (".", *parts) if path == "." or path.startswith("./") else parts


def covers_path(cap: FsCapability, path: str) -> bool:
    """Whether a directory grant's subtree holds ``path`` (compared as written, component by
    component, no resolving); a file grant covers nothing here (``path_covered``'s rule)."""
    if cap.is_file:
        return False
    root = _parts(cap.resolved)
    return _parts(path)[:len(root)] == root


class CapabilitySet:
    """The grants a sandboxed process gets: filesystem paths, and whether it has a network.

    Starts empty, with the network allowed. Nothing is enforced until :func:`apply` (this
    process, irreversibly) or :func:`sandboxed_exec` (a child) is given the set.
    """

    def __init__(self) -> None:
        self._fs: list[FsCapability] = []
        self._network_blocked = False
        self._platform_rules: list[str] = []

    def allow_path(self, path: str, mode: AccessMode) -> None:
        """Grant ``mode`` on the directory ``path`` and everything below it.

        Raises FileNotFoundError if the path does not exist and ValueError if it is not a
        directory.
        """
        self._fs.append(FsCapability.new(path, mode, is_file=False))

    def allow_file(self, path: str, mode: AccessMode) -> None:
        """Grant ``mode`` on the single file ``path`` (not its directory).

        Raises FileNotFoundError if the path does not exist and ValueError if it is a
        directory. Devices and FIFOs count as files, so ``/dev/null`` can be granted.
        """
        self._fs.append(FsCapability.new(path, mode, is_file=True))

    def block_network(self) -> None:
        """Block all network access: no socket of any internet family can be made."""
        self._network_blocked = True

    def platform_rule(self, rule: str) -> None:
        """Add a raw platform rule (a macOS Seatbelt S-expression; ignored on Linux).

        Validated as nono-py does, so that the same code fails the same way: ValueError for a
        rule that is not one balanced S-expression, or that grants read or write on ``/``.
        """
        from .platform_rule import validate_platform_rule
        validate_platform_rule(rule)
        self._platform_rules.append(rule)

    def deduplicate(self) -> None:
        """Merge grants on the same path (and of the same kind, file or directory).

        Of two grants on one path, a user's grant wins over a system or group one, whatever
        their levels; between equals the higher level wins. A READ and a WRITE grant merge to
        READ_WRITE. The survivor keeps a symlink spelling of the path if either had one.
        """
        seen: dict[tuple[str, bool], int] = {}
        keep: list[FsCapability | None] = list(self._fs)
        for i, cap in enumerate(self._fs):
            key = (cap.resolved, cap.is_file)
            if key not in seen:
                seen[key] = i
                continue
            j = seen[key]
            old = keep[j]
            assert old is not None
            new_user, old_user = cap.source.is_user_intent, old.source.is_user_intent
            if new_user != old_user:
                keep_new = new_user
            else:
                keep_new = (cap.access is AccessMode.READ_WRITE
                            and old.access is not AccessMode.READ_WRITE)
            merged = (AccessMode.READ_WRITE
                      if {old.access, cap.access} == {AccessMode.READ, AccessMode.WRITE}
                      else None)
            winner, loser = (cap, old) if keep_new else (old, cap)
            original = (loser.original if winner.original == winner.resolved
                        and loser.original != loser.resolved else None)
            winner = winner._with(original=original, access=merged)
            if keep_new:
                keep[j] = None
                keep[i] = winner
                seen[key] = i
            else:
                keep[j] = winner
                keep[i] = None
        self._fs = [c for c in keep if c is not None]

    def path_covered(self, path: str) -> bool:
        """Whether a directory grant already covers ``path``.

        The path is compared as given, component by component, with the grants' resolved
        paths; it is not resolved itself, so pass a canonical path.
        """
        path = os.fspath(path)
        return any(covers_path(cap, path) for cap in self._fs)

    def fs_capabilities(self) -> list[FsCapability]:
        """Every filesystem grant, in the order added."""
        return list(self._fs)

    @property
    def is_network_blocked(self) -> bool:
        """True once :meth:`block_network` was called."""
        return self._network_blocked

    def summary(self) -> str:
        """A plain-text summary: one line per grant, then the network."""
        lines = []
        if self._fs:
            lines.append("Filesystem:")
            lines += [f"  {c.resolved} [{c.access}] ({'file' if c.is_file else 'dir'})"
                      for c in self._fs]
        else:
            lines.append("(no capabilities granted)")
        lines += ["Network:", f"  outbound: {self._network_word()}"]
        return "\n".join(lines)

    def _network_word(self) -> str:
        return "blocked" if self._network_blocked else "allowed"

    def _add(self, cap: FsCapability) -> None:
        """Add a grant made elsewhere (a restored state, a policy with its own source)."""
        self._fs.append(cap)

    def _copy(self) -> CapabilitySet:
        """An independent copy: grants are immutable, so the list is all that is copied."""
        other = CapabilitySet()
        other._fs = list(self._fs)
        other._network_blocked = self._network_blocked
        other._platform_rules = list(self._platform_rules)
        return other

    __copy__ = _copy

    def __deepcopy__(self, memo: dict) -> CapabilitySet:
        return self._copy()

    def __repr__(self) -> str:
        return f"CapabilitySet(fs={len(self._fs)}, network={self._network_word()})"
