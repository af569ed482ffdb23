"""gitignore files compiled the way git matches them, and cheap to compile.

Why this exists: a no-change snapshot reads every ``.gitignore`` of the tree again, and
compiling them through a general-purpose library (one Python regex per pattern, ``re``'s
parser is pure Python) cost ~116 ms of a ~180 ms snapshot of git's own source. Most real
patterns need no regex at all: literal names (``/git-add``, ``build/``), ``*.ext`` and
``prefix*``, and small character classes (``*.[oa]``, which expand to literals). Those go into
dicts and into tuples for ``bytes.endswith`` / ``startswith``; only what is left (``?``,
negated or large classes, several ``*``, ``**``) becomes regex source, joined into one
alternation per kind and compiled on first use.

The semantics are git's (``dir.c`` and ``wildmatch.c`` of git 2.39), byte for byte:

- a file is read as bytes; a UTF-8 BOM is skipped; lines end at ``\\n`` with one ``\\r`` before
  it dropped; empty lines and lines starting with ``#`` are skipped; trailing spaces are cut
  unless escaped with ``\\``; a NUL ends the line;
- a leading ``!`` negates; one trailing ``/`` makes the pattern match directories only and is
  removed; a pattern with no ``/`` left matches the last component of a path at any depth
  (git's "basename" patterns), any other is matched against the whole path relative to the
  ignore file's directory, with one leading ``/`` removed;
- ``*``, ``?`` and ``[...]`` never match ``/``; ``[...]`` takes ``!`` or ``^`` for negation,
  ranges, ``\\`` escapes, ``[:alpha:]``-style classes (ASCII, git's ctype) and a ``]`` right
  after the opening bracket as a member; a malformed class, or a ``\\`` at the end, makes the
  pattern match nothing;
- ``**`` is special only in path patterns, when it starts the pattern or follows a ``/`` and
  ends it or precedes a ``/``: ``**/`` matches zero or more directories, a trailing ``/**``
  everything below. "Starts the pattern" is git's own reading: the literal prefix before the
  first wildcard is compared separately, so ``a/b**`` has its ``**`` at the start;
- the last pattern of a file that matches decides; matching is byte-wise (``?`` is one byte).

Rules across files (deeper files first, parents excluded means children excluded) live in
:mod:`ctrlz.state.exclude`.

A compiled :class:`IgnoreFile` depends only on the file's bytes: :func:`compile_ignore` keeps
the most recent ones by content, so the daemon and restores that build matcher after matcher
compile each file once per process.
"""

from __future__ import annotations

import _thread
import re
from itertools import product

# -- tokens ------------------------------------------------------------------------------------

_SLASH = 0x2F
_BACKSLASH = 0x5C
_NOT_SLASH = frozenset(range(1, 256)) - {_SLASH}  # NUL never occurs in a path

#: A token is ``bytes`` (a literal), a ``frozenset`` of byte values (one byte of the set; a
#: ``?`` is the set of every byte but ``/``) or one of these:
STAR = "*"  # any run of bytes without '/'
DSTAR = "**"  # any run of bytes, '/' included (a trailing "**", or "**" before an escaped '/')
DSTAR_SLASH = "**/"  # zero or more whole directories: '' or '<anything>/'
Token = bytes | frozenset[int] | str

#: the expansion of small classes into literals stops past this many variants
_MAX_VARIANTS = 32


_UPPER = frozenset(range(0x41, 0x5B))
_LOWER = frozenset(range(0x61, 0x7B))
_DIGIT = frozenset(range(0x30, 0x3A))
_PRINT = frozenset(range(0x20, 0x7F))
#: git's own ctype (``sane_ctype``): ASCII only, and its "space" has no \v or \f
_CLASSES: dict[bytes, frozenset[int]] = {
    b"alnum": _UPPER | _LOWER | _DIGIT,
    b"alpha": _UPPER | _LOWER,
    b"blank": frozenset({0x20, 0x09}),
    b"cntrl": frozenset(range(0x20)) | {0x7F},
    b"digit": _DIGIT,
    b"graph": _PRINT - {0x20},
    b"lower": _LOWER,
    b"print": _PRINT,
    b"punct": _PRINT - _UPPER - _LOWER - _DIGIT - {0x20},
    b"space": frozenset({0x09, 0x0A, 0x0D, 0x20}),
    b"upper": _UPPER,
    b"xdigit": _DIGIT | frozenset(range(0x41, 0x47)) | frozenset(range(0x61, 0x67)),
}
#: git's glob specials (``is_glob_special``)
_SPECIAL = re.compile(rb"[*?\[\\]")


def _simple_length(p: bytes) -> int:
    """git's ``simple_length``: the bytes before the first ``*``, ``?``, ``[`` or ``\\``."""
    m = _SPECIAL.search(p)
    return m.start() if m is not None else len(p)


def _bracket(p: bytes, i: int) -> tuple[frozenset[int], int] | None:
    """The class opening at ``p[i] == '['``: (the bytes it matches, the index after its ``]``),
    or None when it is malformed (git then fails the whole match). A port of the ``case '['``
    branch of git's ``dowild``, with ``/`` and NUL taken out (they never match)."""
    n = len(p)
    k = i + 1
    if k >= n:
        return None
    negated = p[k] in b"!^"
    if negated:
        k += 1
    members: set[int] = set()
    prev = 0
    while True:
        if k >= n:
            return None
        ch = p[k]
        if ch == _BACKSLASH:
            k += 1
            if k >= n:
                return None
            ch = p[k]
            members.add(ch)
        elif ch == 0x2D and prev and k + 1 < n and p[k + 1] != 0x5D:  # a range
            k += 1
            hi = p[k]
            if hi == _BACKSLASH:
                k += 1
                if k >= n:
                    return None
                hi = p[k]
            members.update(range(prev, hi + 1))
            ch = 0
        elif ch == 0x5B and k + 1 < n and p[k + 1] == 0x3A:  # "[:"
            s = k + 2
            e = s
            while e < n and p[e] != 0x5D:
                e += 1
            if e >= n:
                return None
            if e - s - 1 < 0 or p[e - 1] != 0x3A:  # no ":]": a plain '['
                members.add(0x5B)
                ch = 0x5B
                k = s - 2
            else:
                cls = _CLASSES.get(p[s:e - 1])
                if cls is None:
                    return None
                members |= cls
                ch = 0
                k = e
        else:
            members.add(ch)
        prev = ch
        k += 1
        if k < n and p[k] == 0x5D:
            break
    allowed = _NOT_SLASH - members if negated else _NOT_SLASH & members
    return frozenset(allowed), k + 1


def tokens(p: bytes, pathname: bool) -> list[Token] | None:
    """``p`` as tokens, adjacent literals joined; None when it can never match.

    ``pathname`` is git's ``WM_PATHNAME`` (patterns with a ``/``): only there is ``**``
    special, and only at git's "start" (after the literal prefix) or after a ``/``."""
    start = _simple_length(p) if pathname else -1
    out: list[Token] = []
    lit = bytearray()
    n = len(p)
    i = 0

    def flush() -> None:
        if lit:
            out.append(bytes(lit))
            lit.clear()

    while i < n:
        c = p[i]
        if c == _BACKSLASH:
            if i + 1 >= n:
                return None  # a trailing backslash never matches
            lit.append(p[i + 1])
            i += 2
        elif c == 0x3F:  # '?'
            flush()
            out.append(_NOT_SLASH)
            i += 1
        elif c == 0x5B:  # '['
            got = _bracket(p, i)
            if got is None:
                return None
            if not got[0]:
                return None  # a class that matches no byte: the pattern matches nothing
            flush()
            out.append(got[0])
            i = got[1]
        elif c == 0x2A:  # '*'
            j = i
            while j < n and p[j] == 0x2A:
                j += 1
            flush()
            double = (pathname and j - i >= 2 and (i == start or p[i - 1] == _SLASH)
                      and (j == n or p[j] == _SLASH
                           or (p[j] == _BACKSLASH and j + 1 < n and p[j + 1] == _SLASH)))
            if not double:
                if not out or out[-1] != STAR:
                    out.append(STAR)
                i = j
            elif j < n and p[j] == _SLASH:
                out.append(DSTAR_SLASH)
                i = j + 1
            else:
                out.append(DSTAR)
                i = j
        else:
            m = _SPECIAL.search(p, i)
            end = m.start() if m is not None else n
            lit += p[i:end]
            i = end
    flush()
    return out


# -- regex source ------------------------------------------------------------------------------

_PLAIN = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def _re_literal(b: bytes) -> str:
    return "".join(chr(c) if c in _PLAIN else f"\\x{c:02x}" for c in b)


def _re_set(s: frozenset[int]) -> str:
    if s == _NOT_SLASH:
        return "[^/\\x00]"
    values = sorted(s)
    parts = []
    lo = prev = values[0]
    for v in values[1:] + [-1]:
        if v == prev + 1:
            prev = v
            continue
        parts.append(f"\\x{lo:02x}" if lo == prev else f"\\x{lo:02x}-\\x{prev:02x}")
        lo = prev = v
    return "[" + "".join(parts) + "]"


def regex_source(toks: list[Token]) -> str:
    """Regex source (for a bytes pattern) matching what the tokens match. NUL is kept out of
    every wildcard: a directory is matched with a NUL appended (see :class:`NameRules`)."""
    out = []
    for t in toks:
        if isinstance(t, bytes):
            out.append(_re_literal(t))
        elif isinstance(t, frozenset):
            out.append(_re_set(t))
        elif t == STAR:
            out.append("[^/\\x00]*")
        elif t == DSTAR:
            out.append("[^\\x00]*")
        else:
            out.append("(?:[^\\x00]*/)?")
    return "".join(out)


def _alternation(items: list[tuple[int, str, bool]]) -> re.Pattern[bytes]:
    """One regex for several patterns: the alternatives come highest code first, so the one
    that matches (``lastgroup``, ``c<code>``) is the last pattern of the file that matches.
    Directory-only ones need the NUL a directory's subject ends with."""
    alts = [f"(?P<c{code}>{src})" + ("\\x00" if dironly else "\\x00?")
            for code, src, dironly in sorted(items, reverse=True)]
    return re.compile("|".join(alts).encode("ascii"))


def _expand(toks: list[Token]) -> list[tuple[bytes, bytes | None]] | None:
    """Literal forms of a pattern made of literals, small classes and at most one ``*``:
    ``(prefix, suffix)`` pairs, suffix None when there is no ``*``. None when the pattern
    needs a regex."""
    if sum(1 for t in toks if t == STAR) > 1:
        return None
    choices: list[list[bytes] | None] = []
    variants = 1
    for t in toks:
        if isinstance(t, bytes):
            choices.append([t])
        elif isinstance(t, frozenset):
            if len(t) > 8:
                return None
            variants *= len(t)
            if variants > _MAX_VARIANTS:
                return None
            choices.append([bytes((c,)) for c in sorted(t)])
        elif t == STAR:
            choices.append(None)
        else:
            return None
    star = next((i for i, c in enumerate(choices) if c is None), -1)
    if star < 0:
        return [(b"".join(v), None) for v in product(*choices)]  # type: ignore[arg-type]
    before = [b"".join(v) for v in product(*choices[:star])]  # type: ignore[arg-type]
    after = [b"".join(v) for v in product(*choices[star + 1:])]  # type: ignore[arg-type]
    return [(b, a) for b in before for a in after]


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
                rx = self._rx = _alternation(self._rx_items)
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
        if pathname and p[0] == _SLASH:
            p = p[1:]  # git removes one leading '/'; a path never starts with another
        if p[:1] == b"/" or p[:2] == b"\\/":
            return
        if _SPECIAL.search(p) is None:  # a literal: most patterns, and the cheapest
            head, _, name = p.rpartition(b"/")
            if not name:
                return
            rules = self.names if not pathname else self._dir_rules(head)
            rules.add_literal(name, code, dironly)
            return
        toks = tokens(p, pathname)
        if not toks:
            return  # never matches (an empty pattern matches nothing either)
        if pathname and toks[0] == DSTAR_SLASH and _one_component(toks[1:]):
            toks, pathname = toks[1:], False  # "**/x" is x at any depth
        if not pathname:
            self._add_name(self.names, toks, code, dironly)
            return
        head, tail = _split_literal_dir(toks)
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
        forms = _expand(toks)
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
            rx = self._path_rx[live] = _alternation(
                [(self.paths[i][0], self.paths[i][1], self.paths[i][2]) for i in live])
        return rx


def _one_component(toks: list[Token]) -> bool:
    """Whether the tokens can only match bytes without a '/' (one path component)."""
    return bool(toks) and all(
        (isinstance(t, bytes) and b"/" not in t) or isinstance(t, frozenset) or t == STAR
        for t in toks)


def _split_literal_dir(toks: list[Token]) -> tuple[bytes | None, list[Token]]:
    """(directory, tokens of the last component) when the pattern is one component below a
    literal directory ('' when it has no '/' at all); (None, tokens) otherwise."""
    if any(isinstance(t, str) and t != STAR for t in toks):
        return None, toks  # "**" crosses directories
    slashes = [i for i, t in enumerate(toks) if isinstance(t, bytes) and b"/" in t]
    if not slashes:
        return b"", toks
    if slashes != [0]:
        return None, toks
    head, _, rest = toks[0].rpartition(b"/")  # type: ignore[union-attr]
    return head, ([rest] if rest else []) + toks[1:]


def parse_lines(text: bytes) -> list[tuple[bytes, bool, bool]]:
    """The patterns of an ignore file as ``(pattern, negated, dironly)``, in file order: the
    reading of git's ``add_patterns_from_buffer``, ``trim_trailing_spaces`` and
    ``parse_path_pattern``. The pattern keeps its leading ``/`` (the caller needs it to know
    it is a path pattern) and loses the ``!`` and the trailing ``/``."""
    if text.startswith(b"\xef\xbb\xbf"):
        text = text[3:]
    lines = text.split(b"\n")
    if lines and not lines[-1]:
        lines.pop()
    out = []
    for line in lines:
        if not line or line[0] == 0x23:  # '#'
            continue
        if line[-1] == 0x0D:
            line = line[:-1]
        cut = line.find(b"\0")
        if cut >= 0:
            line = line[:cut]
        line = _trim_trailing_spaces(line)
        negated = line[:1] == b"!"
        if negated:
            line = line[1:]
        dironly = line[-1:] == b"/"
        if dironly:
            line = line[:-1]
        if line:
            out.append((line, negated, dironly))
    return out


def _trim_trailing_spaces(line: bytes) -> bytes:
    """git's ``trim_trailing_spaces``: unescaped trailing spaces go (not tabs); a line ending
    in a lone backslash is left alone."""
    if not line.endswith(b" "):
        return line
    last_space = -1
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if c == 0x20:
            if last_space < 0:
                last_space = i
        elif c == _BACKSLASH:
            i += 1
            if i >= n:
                return line
            last_space = -1
        else:
            last_space = -1
        i += 1
    return line[:last_space] if last_space >= 0 else line


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
