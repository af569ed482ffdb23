"""gitignore files compiled the way git matches them, and cheap to compile.

Why this exists: a no-change snapshot reads every ``.gitignore`` of the tree again, and
compiling them through a general-purpose library (one Python regex per pattern, ``re``'s
parser is pure Python) cost ~116 ms of a ~180 ms snapshot of git's own source. Most real
patterns need no regex at all: literal names (``/git-add``, ``build/``), ``*.ext`` and
``prefix*``, and small character classes (``*.[oa]``, which expand to literals). Those go into
dicts and into tuples for ``bytes.endswith`` / ``startswith``; only what is left (``?``,
negated or large classes, several ``*``, ``**``) becomes regex source, joined into one
alternation per kind and compiled on first use.

The semantics are git's (``dir.c`` and ``wildmatch.c`` of git 2.39), byte for byte; the
pattern syntax (lines, tokens, regex source) lives in :mod:`ctrlz.state.ignore.globs`.

Rules across files (deeper files first, parents excluded means children excluded) live in
:mod:`ctrlz.state.ignore.exclude`.

A compiled :class:`IgnoreFile` depends only on the file's bytes: :func:`compile_ignore` keeps
the most recent ones by content, so the daemon and restores that build matcher after matcher
compile each file once per process.
"""

from __future__ import annotations

import _thread
import re

from .globs import (
    DSTAR,
    DSTAR_SLASH,
    SLASH,
    SPECIAL,
    Token,
    alternation,
    expand,
    one_component,
    parse_lines,
    regex_source,
    split_literal_dir,
    tokens,
)

# -- compiled files ----------------------------------------------------------------------------


class NameRules:
    """Patterns matched against one path component: git's basename patterns, and the last
    component of path patterns whose directory part is literal.

    Answers with a *code*, ``index << 1 | negated``: the largest code among the matching
    patterns belongs to the last one in the file, and its low bit says whether it negates."""

    __slots__ = ("lit_file", "lit_dir", "stars", "suffixes", "prefixes", "any_star", "always",
                 "_rx_items", "_rx")

    def __init__(self) -> None:
        self.lit_file: dict[bytes, int] = {}  # literal name -> code, for files
        self.lit_dir: dict[bytes, int] = {}  # the same, dir-only patterns included
        self.stars: list[tuple[int, bytes, bytes, int, bool]] = []  # code, pre, suf, len, dir
        self.prefixes: tuple[bytes, ...] = ()  # a quick 'no star pattern can match' test
        self.suffixes: tuple[bytes, ...] = ()
        self.any_star = False  # a lone "*": every name matches a star pattern
        self.always = False  # some pattern ("*", or a regex) must be tried on every name
        self._rx_items: list[tuple[int, str, bool]] = []
        self._rx: re.Pattern[bytes] | None = None

    def add_literal(self, name: bytes, code: int, dironly: bool) -> None:
        if self.lit_dir.get(name, -1) < code:
            self.lit_dir[name] = code
        if not dironly and self.lit_file.get(name, -1) < code:
            self.lit_file[name] = code

    def add_star(self, pre: bytes, suf: bytes, code: int, dironly: bool) -> None:
        self.stars.append((code, pre, suf, len(pre) + len(suf), dironly))

    def add_regex(self, toks: list[Token], code: int, dironly: bool) -> None:
        self._rx_items.append((code, regex_source(toks), dironly))

    def seal(self) -> None:
        self.stars.sort(reverse=True)
        # a star pattern can match only names with its prefix, or (no prefix) its suffix
        self.prefixes = tuple({p for _, p, _, _, _ in self.stars if p})
        self.suffixes = tuple({s for _, p, s, _, _ in self.stars if s and not p})
        self.any_star = any(not p and not s for _, p, s, _, _ in self.stars)
        self.always = bool(self._rx_items) or self.any_star

    @property
    def empty(self) -> bool:
        return not (self.lit_dir or self.stars or self._rx_items)

    def best(self, name: bytes, is_dir: bool) -> int:
        """The code of the last pattern matching ``name``, or -1."""
        best = (self.lit_dir if is_dir else self.lit_file).get(name, -1)
        if self.stars and (self.any_star or name.endswith(self.suffixes)
                           or name.startswith(self.prefixes)):
            size = len(name)
            for code, pre, suf, need, dironly in self.stars:
                if code <= best:
                    break
                if (size >= need and name.startswith(pre) and name.endswith(suf)
                        and (is_dir or not dironly)):
                    best = code
                    break
        if self._rx_items:
            rx = self._rx
            if rx is None:
                rx = self._rx = alternation(self._rx_items)
            m = rx.fullmatch(name + b"\0" if is_dir else name)
            if m is not None:
                code = int(m.lastgroup[1:])  # type: ignore[index]
                if code > best:
                    best = code
        return best


class IgnoreFile:
    """One ignore file, compiled: what it says about a path below its directory."""

    __slots__ = ("names", "dirs", "paths", "_path_rx", "empty")

    def __init__(self, text: bytes) -> None:
        #: basename patterns (no '/')
        self.names = NameRules()
        #: path patterns whose directory part is literal, by that directory ('' for the file's)
        self.dirs: dict[bytes, NameRules] = {}
        #: the other path patterns: (code, regex source, dironly, segments or None, literal
        #: prefix), tried only in the directories where they can match
        self.paths: list[tuple[int, str, bool, int | None, bytes]] = []
        self._path_rx: dict[tuple[int, ...], re.Pattern[bytes]] = {}
        for index, (pattern, negated, dironly) in enumerate(parse_lines(text)):
            self._add(pattern, (index << 1) | negated, dironly)
        self.names.seal()
        for rules in self.dirs.values():
            rules.seal()
        self.empty = self.names.empty and not self.dirs and not self.paths

    def _add(self, p: bytes, code: int, dironly: bool) -> None:
        pathname = b"/" in p
        if pathname and p[0] == SLASH:
            p = p[1:]  # git removes one leading '/'; a path never starts with another
        if p[:1] == b"/" or p[:2] == b"\\/":
            return
        if SPECIAL.search(p) is None:  # a literal: most patterns, and the cheapest
            head, _, name = p.rpartition(b"/")
            if not name:
                return
            rules = self.names if not pathname else self._dir_rules(head)
            rules.add_literal(name, code, dironly)
            return
        toks = tokens(p, pathname)
        if not toks:
            return  # never matches (an empty pattern matches nothing either)
        if pathname and toks[0] == DSTAR_SLASH and one_component(toks[1:]):
            toks, pathname = toks[1:], False  # "**/x" is x at any depth
        if not pathname:
            self._add_name(self.names, toks, code, dironly)
            return
        head, tail = split_literal_dir(toks)
        if head is not None:
            if tail:
                self._add_name(self._dir_rules(head), tail, code, dironly)
            return
        segments = None if any(t in (DSTAR, DSTAR_SLASH) for t in toks if isinstance(t, str)) \
            else 1 + sum(t.count(b"/") for t in toks if isinstance(t, bytes))
        lead = toks[0] if isinstance(toks[0], bytes) else b""
        self.paths.append((code, regex_source(toks), dironly, segments, lead))

    def _dir_rules(self, head: bytes) -> NameRules:
        rules = self.dirs.get(head)
        if rules is None:
            rules = self.dirs[head] = NameRules()
        return rules

    @staticmethod
    def _add_name(rules: NameRules, toks: list[Token], code: int, dironly: bool) -> None:
        forms = expand(toks)
        if forms is None:
            rules.add_regex(toks, code, dironly)
            return
        for pre, suf in forms:
            if suf is None:
                rules.add_literal(pre, code, dironly)
            else:
                rules.add_star(pre, suf, code, dironly)

    def path_regex(self, dsub: bytes) -> re.Pattern[bytes] | None:
        """One regex for the path patterns that can match an entry of directory ``dsub``
        (relative to this file's directory, '' for it): the subject is the entry's path
        relative to this file's directory, with a NUL appended for a directory."""
        if not self.paths:
            return None
        dprefix = dsub + b"/" if dsub else b""
        segments = dsub.count(b"/") + 2 if dsub else 1
        live = tuple(
            i for i, (_, _, _, segs, lead) in enumerate(self.paths)
            if (segs is None or segs == segments)
            and (dprefix.startswith(lead)
                 or (lead.startswith(dprefix) and b"/" not in lead[len(dprefix):])))
        if not live:
            return None
        rx = self._path_rx.get(live)
        if rx is None:
            rx = self._path_rx[live] = alternation(
                [(self.paths[i][0], self.paths[i][1], self.paths[i][2]) for i in live])
        return rx


_CACHE: dict[bytes, IgnoreFile] = {}
_CACHE_LOCK = _thread.allocate_lock()
_CACHE_BUDGET = 4 << 20  # bytes of ignore-file text kept compiled
_cached = 0


def compile_ignore(text: bytes) -> IgnoreFile:
    """The compiled form of an ignore file's bytes, shared by every matcher of the process
    (a compiled file holds no path: the same bytes compile the same wherever they live). The
    daemon and restores build matcher after matcher; each file compiles once. Oldest first
    out past a few MiB of text."""
    global _cached
    got = _CACHE.get(text)
    if got is not None:
        return got
    got = IgnoreFile(text)
    if len(text) <= _CACHE_BUDGET // 4:
        with _CACHE_LOCK:
            if text not in _CACHE:
                _CACHE[text] = got
                _cached += len(text)
                while _cached > _CACHE_BUDGET:
                    oldest = next(iter(_CACHE))
                    del _CACHE[oldest]
                    _cached -= len(oldest)
    return got
