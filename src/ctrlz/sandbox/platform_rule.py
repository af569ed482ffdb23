"""The check nono-py makes on a raw platform rule, so the same code fails the same way here.

A platform rule is a macOS Seatbelt S-expression; on Linux it has no effect, yet nono-py still
refuses a malformed one or one that opens the whole disk, and a caller may rely on that
ValueError. The rule is tokenized (comments dropped, strings unquoted) before the check, so
spacing and comments cannot hide ``(allow file-read* (subpath "/"))``.
"""

from __future__ import annotations

__all__ = ["validate_platform_rule"]

_DELIMS = " \t\r\n\f\v()\""


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c == ";":  # a comment to the end of the line
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif text.startswith("#|", i):  # a block comment
            end = text.find("|#", i + 2)
            if end < 0:
                raise ValueError("platform rule has unterminated block comment")
            i = end + 2
        elif c in "()":
            out.append(c)
            i += 1
        elif c == '"':
            i += 1
            buf = []
            while i < n and text[i] != '"':
                if text[i] == "\\" and i + 1 < n:
                    i += 1
                buf.append(text[i])
                i += 1
            if i >= n:
                raise ValueError("platform rule has unterminated string")
            out.append("".join(buf))
            i += 1
        else:
            start = i
            while i < n and text[i] not in _DELIMS:
                i += 1
            out.append(text[start:i])
    return out


def validate_platform_rule(rule: str) -> None:
    """Raise ValueError unless ``rule`` is one balanced S-expression that grants neither read
    nor write on the root directory."""
    if not isinstance(rule, str):
        raise TypeError(f"rule must be str, not {type(rule).__name__}")
    trimmed = rule.strip()
    if not trimmed.startswith("("):
        raise ValueError(f"platform rule must be an S-expression starting with '(': {rule}")
    tokens = _tokens(trimmed)
    depth = 0
    for tok in tokens:
        depth += tok == "("
        depth -= tok == ")"
        if depth < 0:
            break
    if depth != 0:
        raise ValueError(f"platform rule has unbalanced parentheses: {rule}")
    words = [t for t in tokens if t not in ("(", ")")]
    for a, b, c, d in zip(words, words[1:], words[2:], words[3:], strict=False):
        if a == "allow" and b in ("file-read*", "file-write*") and c == "subpath" and d == "/":
            kind = "read" if b == "file-read*" else "write"
            raise ValueError(f"platform rule must not grant root-level {kind} access")
