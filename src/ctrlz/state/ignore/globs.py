"""git's ignore-pattern syntax: the lines of an ignore file, each pattern as tokens, and the
regex source for the patterns that need one.

Why apart from :mod:`ctrlz.state.ignore.wildmatch`: this is the grammar (what a line means, what a
``*`` or a ``[...]`` may match), a port of git 2.39's ``dir.c`` and ``wildmatch.c``;
wildmatch builds the cheap matchers on top of it. The rules, byte for byte as git's:

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
"""

from __future__ import annotations

import re
from itertools import product

# -- tokens ------------------------------------------------------------------------------------

SLASH = 0x2F
BACKSLASH = 0x5C
NOT_SLASH = frozenset(range(1, 256)) - {SLASH}  # NUL never occurs in a path

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
SPECIAL = re.compile(rb"[*?\[\\]")


def _simple_length(p: bytes) -> int:
    """git's ``simple_length``: the bytes before the first ``*``, ``?``, ``[`` or ``\\``."""
    m = SPECIAL.search(p)
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
        if ch == BACKSLASH:
            k += 1
            if k >= n:
                return None
            ch = p[k]
            members.add(ch)
        elif ch == 0x2D and prev and k + 1 < n and p[k + 1] != 0x5D:  # a range
            k += 1 + (p[k + 1] == BACKSLASH)  # its upper end, escaped or not
            if k >= n:
                return None
            members.update(range(prev, p[k] + 1))
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
    allowed = NOT_SLASH - members if negated else NOT_SLASH & members
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
        if c == BACKSLASH:
            if i + 1 >= n:
                return None  # a trailing backslash never matches
            lit.append(p[i + 1])
            i += 2
        elif c == 0x3F:  # '?'
            flush()
            out.append(NOT_SLASH)
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
            double = (pathname and j - i >= 2 and (i == start or p[i - 1] == SLASH)
                      and (j == n or p[j] == SLASH
                           or (p[j] == BACKSLASH and j + 1 < n and p[j + 1] == SLASH)))
            if not double:
                if not out or out[-1] != STAR:
                    out.append(STAR)
                i = j
            elif j < n and p[j] == SLASH:
                out.append(DSTAR_SLASH)
                i = j + 1
            else:
                out.append(DSTAR)
                i = j
        else:
            m = SPECIAL.search(p, i)
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
    if s == NOT_SLASH:
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


def alternation(items: list[tuple[int, str, bool]]) -> re.Pattern[bytes]:
    """One regex for several patterns: the alternatives come highest code first, so the one
    that matches (``lastgroup``, ``c<code>``) is the last pattern of the file that matches.
    Directory-only ones need the NUL a directory's subject ends with."""
    alts = [f"(?P<c{code}>{src})" + ("\\x00" if dironly else "\\x00?")
            for code, src, dironly in sorted(items, reverse=True)]
    return re.compile("|".join(alts).encode("ascii"))


def expand(toks: list[Token]) -> list[tuple[bytes, bytes | None]] | None:
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


def one_component(toks: list[Token]) -> bool:
    """Whether the tokens can only match bytes without a '/' (one path component)."""
    return bool(toks) and all(
        (isinstance(t, bytes) and b"/" not in t) or isinstance(t, frozenset) or t == STAR
        for t in toks)


def split_literal_dir(toks: list[Token]) -> tuple[bytes | None, list[Token]]:
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
        elif c == BACKSLASH:
            i += 1
            if i >= n:
                return line
            last_space = -1
        else:
            last_space = -1
        i += 1
    return line[:last_space] if last_space >= 0 else line
