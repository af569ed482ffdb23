"""Which paths a snapshot covers: gitignore files, patterns, globs and force-includes.

Rules are evaluated relative to each tracked root and never look at folders above it, so tracking
``~/build/proj`` with the pattern ``build`` excludes ``proj/build`` and nothing else.

Order of evaluation for one path (the first that decides wins):

1. ctrlz's own temp files (``.ctrlz-tmp-*``) and the store itself are never captured;
2. ``force_include``: a component equal to the pattern, or (patterns with ``/``) a substring of
   the path, includes the path and everything under it, whatever follows;
3. ``exclude_patterns``: same matching, excludes;
4. ``exclude_globs``: ``fnmatch`` against the file name;
5. ``.gitignore`` files at every level, each relative to its own directory, deeper files taking
   precedence, then ``.git/info/exclude``, matched exactly as git matches them (see
   :mod:`ctrlz.state.ignore.wildmatch`; ``tests/test_gitignore_git.py`` checks it against git). The
   last matching pattern of a file decides, and nothing below an excluded directory is looked
   at, so, as in git, a negation cannot re-include a file whose directory is excluded. Like
   git, ``.git`` itself is never ignored and no ignore file applies inside it.

Exclusion runs for every entry of every scan, so it is built to cost little: ignore files are
compiled without regexes where possible (and cached by content for the process), and each
directory gets, on its first entry check, the few patterns that can match there
(:class:`_DirCheck`), with a union of their literal names, prefixes and suffixes that lets most
entries through after one set lookup.

The rules in force are recorded in every snapshot (:meth:`Rules.to_json`), and a restore judges
coverage with the snapshot's own rules and the ignore files captured in it, never with today's.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections import namedtuple
from collections.abc import Callable

from ... import jsontext
from ..fsio.atomic import TEMP_PREFIX
from .wildmatch import IgnoreFile, NameRules, compile_ignore

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_TEMP = TEMP_PREFIX.encode()
GITIGNORE = b".gitignore"
GIT = b".git"


class Rules(namedtuple("Rules", "use_gitignore exclude_patterns exclude_globs force_include",
                       defaults=(True, (), (), ()))):
    """What a scan leaves out: ``.gitignore`` files (``use_gitignore``), ``exclude_patterns``
    (seed 002's: a name equal to a path component, or, with a ``/``, a substring of the
    path), shell ``exclude_globs`` on file names, and ``force_include`` patterns that win over
    all of them. Each pattern list is a tuple of strings."""

    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "use_gitignore": self.use_gitignore,
            "exclude_patterns": list(self.exclude_patterns),
            "exclude_globs": list(self.exclude_globs),
            "force_include": list(self.force_include),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Rules:
        return cls(
            use_gitignore=bool(data.get("use_gitignore", True)),
            exclude_patterns=tuple(data.get("exclude_patterns", ())),
            exclude_globs=tuple(data.get("exclude_globs", ())),
            force_include=tuple(data.get("force_include", ())),
        )

    def fingerprint(self) -> str:
        raw = jsontext.dumps(self.to_json(), sort_keys=True).encode()
        import hashlib  # OpenSSL: only when a fingerprint is asked for

        return hashlib.sha256(raw).hexdigest()[:16]


class _PatternSet:
    """Component patterns (exact name) and substring patterns (those containing ``/``)."""

    def __init__(self, patterns: tuple[str, ...]) -> None:
        self.components = frozenset(os.fsencode(p) for p in patterns if "/" not in p and p)
        self.substrings = tuple(os.fsencode(p) for p in patterns if "/" in p)
        self.empty = not self.components and not self.substrings

    def matches(self, name: bytes, rel: bytes) -> bool:
        if self.empty:
            return False
        if name in self.components:
            return True
        return any(s in rel for s in self.substrings)


class _Ignore:
    """An ignore file in force: its compiled patterns and the directory they are relative to."""

    __slots__ = ("base", "file")

    def __init__(self, base: bytes, file: IgnoreFile) -> None:
        self.base = base  # directory it applies to, relative to the root ('' for the root)
        self.file = file


_Layer = tuple[NameRules | None, NameRules | None, re.Pattern[bytes] | None, int]


class _DirCheck:
    """The ignore patterns that can match an entry of one directory, and a cheap union of
    them (literal names, suffixes, prefixes) that rules out most entries with one set lookup
    and two ``bytes`` calls before any per-file evaluation."""

    __slots__ = ("layers", "lits", "suffixes", "prefixes", "always")

    def __init__(self, layers: list[_Layer]) -> None:
        #: per ignore file, deepest first: its basename patterns, its patterns for this very
        #: directory, a regex of its other path patterns that can match here, and where the
        #: path relative to the file's directory starts in a root-relative path
        self.layers = tuple(layers)
        lits: set[bytes] = set()
        suffixes: set[bytes] = set()
        prefixes: set[bytes] = set()
        always = False
        for names, local, prx, _ in layers:
            always = always or prx is not None
            for rules in (names, local):
                if rules is not None:
                    lits.update(rules.lit_dir)
                    suffixes.update(rules.suffixes)
                    prefixes.update(rules.prefixes)
                    always = always or rules.always
        self.lits = frozenset(lits)
        self.suffixes = tuple(suffixes)
        self.prefixes = tuple(prefixes)
        self.always = always

    def decide(self, name: bytes, rel: bytes, is_dir: bool) -> bool | None:
        """True: ignored, False: re-included by a negation, None: no pattern matches. The
        first file (deepest) with a matching pattern decides, by its last matching one."""
        for names, local, prx, cut in self.layers:
            best = names.best(name, is_dir) if names is not None else -1
            if local is not None:
                code = local.best(name, is_dir)
                if code > best:
                    best = code
            if prx is not None:
                sub = rel[cut:]
                m = prx.fullmatch(sub + b"\0" if is_dir else sub)
                if m is not None:
                    code = int(m.lastgroup[1:])  # type: ignore[index]
                    if code > best:
                        best = code
            if best >= 0:
                return not best & 1
        return None


#: the check of a directory no ignore pattern can reach
_NOTHING = _DirCheck([])


class DirRules:
    """The rules in force inside one directory: inherited ignore files (deepest first) plus
    its own. ``rel``: the directory, relative to the root, '' for the root; ``forced``: an
    ancestor matched force_include; ``in_git``: inside a ``.git`` directory, where ignore
    files do not apply; ``check``: what the ignore files say in this directory, built on its
    first entry check."""

    __slots__ = ("rel", "ignores", "forced", "in_git", "children", "check")

    def __init__(self, rel: bytes, ignores: tuple[_Ignore, ...] = (), forced: bool = False,
                 in_git: bool = False) -> None:
        self.rel = rel
        self.ignores = ignores
        self.forced = forced
        self.in_git = in_git
        self.children: dict[bytes, DirRules] = {}
        self.check: _DirCheck | None = None

    def __repr__(self) -> str:
        return (f"DirRules(rel={self.rel!r}, ignores={self.ignores!r}, forced={self.forced}, "
                f"in_git={self.in_git})")


GitignoreReader = Callable[[bytes], bytes | None]


class Matcher:
    """Answers 'is this path excluded?' for one tracked root, walking top-down."""

    def __init__(self, rules: Rules, read_ignore: GitignoreReader,
                 internal_dirs: frozenset[bytes] = frozenset()) -> None:
        self.rules = rules
        self.read_ignore = read_ignore
        self.internal_dirs = internal_dirs  # root-relative dirs never captured (the store)
        self.force = _PatternSet(rules.force_include)
        self.exclude = _PatternSet(rules.exclude_patterns)
        globs = [g for g in rules.exclude_globs if g]
        self.glob = re.compile("|".join(fnmatch.translate(g) for g in globs)) if globs else None
        #: no internal dirs, force-includes, patterns or globs: only ignore files can exclude
        self._ignores_only = (not internal_dirs and self.force.empty and self.exclude.empty
                              and self.glob is None)
        self._shared: dict[tuple[_Ignore, ...], _DirCheck] = {}
        self.root_rules = self._make_root()

    def _make_root(self) -> DirRules:
        ignores: list[_Ignore] = []
        if self.rules.use_gitignore:
            for path in (GITIGNORE, b".git/info/exclude"):
                text = self.read_ignore(path)
                if text:
                    compiled = compile_ignore(text)
                    if not compiled.empty:
                        ignores.append(_Ignore(b"", compiled))
        return DirRules(b"", tuple(ignores))

    def enter(self, parent: DirRules, name: bytes, rel: bytes,
              has_ignore: bool | None = None) -> DirRules:
        """Rules for subdirectory ``rel`` (whose name is ``name``) of ``parent``.

        ``has_ignore`` says whether the directory holds a ``.gitignore`` (the scanner knows from
        its listing); ``None`` asks the reader."""
        forced = parent.forced or self.force.matches(name, rel)
        in_git = parent.in_git or name == GIT
        ignores = parent.ignores
        if self.rules.use_gitignore and not in_git and has_ignore is not False:
            text = self.read_ignore(rel + b"/" + GITIGNORE)
            if text:
                compiled = compile_ignore(text)
                if not compiled.empty:
                    ignores = (_Ignore(rel, compiled), *ignores)
        return DirRules(rel, ignores, forced, in_git)

    def may_exclude(self, d: DirRules) -> bool:
        """Whether any rule could exclude something in this directory; when not, the scanner
        skips the per-entry check (only ctrlz's temp files need filtering)."""
        if d.forced:
            return False
        return bool(not self.exclude.empty or self.glob is not None or self.internal_dirs
                    or self._check(d) is not _NOTHING)

    def _check(self, d: DirRules) -> _DirCheck:
        """Build ``d.check``: for each ignore file in force, the patterns that can match in
        this directory. Directories that no file's path patterns single out share one check
        per stack of ignore files."""
        check = d.check
        if check is not None:
            return check
        if d.in_git or not d.ignores:
            d.check = _NOTHING
            return _NOTHING
        layers = []
        own = False  # some layer is particular to this directory
        for ign in d.ignores:
            f = ign.file
            base = ign.base
            dsub = d.rel if not base else (b"" if d.rel == base else d.rel[len(base) + 1:])
            local = f.dirs.get(dsub)
            prx = f.path_regex(dsub)
            names = None if f.names.empty else f.names
            if local is not None or prx is not None:
                own = True
            if names is not None or local is not None or prx is not None:
                layers.append((names, local, prx, len(base) + 1 if base else 0))
        if not layers:
            check = _NOTHING
        elif own:
            check = _DirCheck(layers)
        else:
            check = self._shared.get(d.ignores)
            if check is None:
                check = self._shared[d.ignores] = _DirCheck(layers)
        d.check = check
        return check

    def excluded(self, d: DirRules, name: bytes, rel: bytes, is_dir: bool) -> bool:
        """Whether entry ``name`` (path ``rel``) of the directory ruled by ``d`` is left out.
        Called for every entry of a scan: with only ignore files in play (the usual case) it
        costs a set lookup and two ``bytes`` calls unless a pattern may match."""
        if name.startswith(_TEMP):
            return True
        if not self._ignores_only:
            if is_dir and rel in self.internal_dirs:
                return True
            if d.forced or (not self.force.empty and self.force.matches(name, rel)):
                return False
            if not self.exclude.empty and self.exclude.matches(name, rel):
                return True
            if self.glob is not None and self.glob.match(os.fsdecode(name)):
                return True
        elif d.forced:
            return False
        check = d.check or self._check(d)
        return bool((check.always or name in check.lits or name.endswith(check.suffixes)
                     or name.startswith(check.prefixes))
                    and name != GIT and check.decide(name, rel, is_dir))

    def covers(self, rel: bytes, is_dir: bool = False) -> bool:
        """Whether ``rel`` (and each of its parents) falls inside the rules. Used by restores,
        with a matcher whose ignore files come from the snapshot."""
        parts = rel.split(b"/")
        d = self.root_rules
        prefix = b""
        for i, name in enumerate(parts):
            prefix = name if not prefix else prefix + b"/" + name
            last = i == len(parts) - 1
            if self.excluded(d, name, prefix, is_dir or not last):
                return False
            if not last:
                child = d.children.get(name)
                if child is None:
                    child = d.children[name] = self.enter(d, name, prefix)
                d = child
        return True
