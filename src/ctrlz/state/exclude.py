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
   precedence, then ``.git/info/exclude``. Like git, ``.git`` itself is never ignored and no
   ignore file applies inside it.

The rules in force are recorded in every snapshot (:meth:`Rules.to_json`), and a restore judges
coverage with the snapshot's own rules and the ignore files captured in it, never with today's.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pathspec

from .atomic import TEMP_PREFIX

_TEMP = TEMP_PREFIX.encode()
GITIGNORE = b".gitignore"
GIT = b".git"


@dataclass(frozen=True)
class Rules:
    use_gitignore: bool = True
    exclude_patterns: tuple[str, ...] = ()
    exclude_globs: tuple[str, ...] = ()
    force_include: tuple[str, ...] = ()

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
        raw = json.dumps(self.to_json(), sort_keys=True).encode()
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


class _IgnoreFile:
    """One ignore file's patterns; a combined regex answers the common 'no match' case fast."""

    def __init__(self, base: bytes, text: bytes) -> None:
        self.base = base  # directory it applies to, relative to the root ('' for the root)
        lines = text.decode("utf-8", "surrogateescape").splitlines()
        spec = pathspec.GitIgnoreSpec.from_lines(lines)
        self.patterns = [(p.regex, bool(p.include)) for p in spec.patterns
                         if p.include is not None and p.regex is not None]
        if self.patterns:
            joined = "|".join(
                "(?:" + r.pattern.replace("(?P<ps_d>", "(?:") + ")" for r, _ in self.patterns)
            self.any = re.compile(joined)
        else:
            self.any = None

    def decide(self, rel: str) -> bool | None:
        """True: ignored, False: re-included by a negation, None: no pattern matches."""
        if self.any is None or self.any.match(rel) is None:
            return None
        for regex, include in reversed(self.patterns):
            if regex.match(rel) is not None:
                return include
        return None


@dataclass
class DirRules:
    """The rules in force inside one directory: inherited ignore files plus its own."""

    rel: bytes  # the directory, relative to the root, '' for the root
    ignores: tuple[_IgnoreFile, ...] = ()  # deepest first
    forced: bool = False  # an ancestor matched force_include
    in_git: bool = False  # inside a .git directory: ignore files do not apply
    children: dict[bytes, DirRules] = field(default_factory=dict)


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
        self.root_rules = self._make_root()

    def _make_root(self) -> DirRules:
        ignores: list[_IgnoreFile] = []
        if self.rules.use_gitignore:
            info = self.read_ignore(b".git/info/exclude")
            if info:
                ignores.append(_IgnoreFile(b"", info))
            own = self.read_ignore(GITIGNORE)
            if own:
                ignores.insert(0, _IgnoreFile(b"", own))
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
                ignores = (_IgnoreFile(rel, text), *ignores)
        return DirRules(rel, ignores, forced, in_git)

    def may_exclude(self, d: DirRules) -> bool:
        """Whether any rule could exclude something in this directory; when not, the scanner
        skips the per-entry check (only ctrlz's temp files need filtering)."""
        if d.forced:
            return False
        return bool(not self.exclude.empty or self.glob is not None or self.internal_dirs
                    or (d.ignores and not d.in_git))

    def excluded(self, d: DirRules, name: bytes, rel: bytes, is_dir: bool) -> bool:
        if name.startswith(_TEMP):
            return True
        if is_dir and rel in self.internal_dirs:
            return True
        if d.forced or (not self.force.empty and self.force.matches(name, rel)):
            return False
        if not self.exclude.empty and self.exclude.matches(name, rel):
            return True
        if self.glob is not None and self.glob.match(os.fsdecode(name)):
            return True
        if d.ignores and not d.in_git and name != GIT:
            text = os.fsdecode(rel)
            for ign in d.ignores:
                sub = text[len(ign.base) + 1:] if ign.base else text
                verdict = ign.decide(sub + "/" if is_dir else sub)
                if verdict is not None:
                    return verdict
        return False

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
