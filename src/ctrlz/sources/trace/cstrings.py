"""strace's C string literals decoded: exec paths, argv, chdir targets, refused paths.

Apart from :mod:`.parser` so that :mod:`.denials`, which the parser uses, can decode its paths
without importing the parser back.
"""

from __future__ import annotations

_SIMPLE_ESCAPES = {"n": 10, "t": 9, "r": 13, "f": 12, "v": 11, "a": 7, "b": 8,
                   "\\": 92, '"': 34, "'": 39, "?": 63, "e": 27}
_OCTAL = frozenset("01234567")
_HEX = frozenset("0123456789abcdefABCDEF")


def unescape_c_string(body: str) -> str:
    """Decode the inside of one of strace's C string literals into text.

    strace prints unprintable bytes as ``\\n``-style escapes, octal (``\\377``, ``\\1``) or,
    with ``-x``, hex (``\\xff``). The bytes are decoded as UTF-8 with ``surrogateescape`` so
    non-UTF-8 arguments survive and ``os.fsencode`` gives the original bytes back.
    """
    out = bytearray()
    i, n = 0, len(body)
    while i < n:
        ch = body[i]
        if ch != "\\" or i + 1 >= n:
            out += ch.encode("utf-8", "surrogateescape")
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in _OCTAL:
            j = i + 1
            while j < n and j < i + 4 and body[j] in _OCTAL:
                j += 1
            out.append(int(body[i + 1:j], 8) & 0xFF)
            i = j
        elif nxt == "x" and i + 2 < n and body[i + 2] in _HEX:
            j = i + 2
            while j < n and j < i + 4 and body[j] in _HEX:
                j += 1
            out.append(int(body[i + 2:j], 16))
            i = j
        else:
            out.append(_SIMPLE_ESCAPES.get(nxt, ord(nxt) if nxt.isascii() else 63))
            i += 2
    return out.decode("utf-8", "surrogateescape")
