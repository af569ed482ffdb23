"""JSON text for the short-lived processes: the standard library's codec, without its start-up.

``import json`` costs a fresh interpreter ~6 ms on the machines measured (docs/benchmarks.md):
its modules compile seven regular expressions as they load, and ``re`` brings ``enum`` with
it. Every agent hook and every command the workspace daemon serves reads one JSON reply and
writes one, in a process whose whole useful work is ~2 ms. This module calls the C codec that
``json`` itself uses (``_json``: the same scanner, the same string escaping, the same number
formatting) and only lays out ``indent=2`` text itself, so its output is ``json``'s, byte for
byte (a property test holds it to that). Where ``_json`` is missing (another Python) or a
value is one the fast path does not take (a non-string key, a type needing ``default``), it
hands the call to ``json``.

Errors are ``json``'s: malformed text raises ``json.JSONDecodeError`` (a :class:`ValueError`),
an unserialisable value :class:`TypeError`.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = ["dumps", "loads"]

try:
    import _json
except ImportError:  # pragma: no cover - CPython always builds it
    _json = None


class _Context:
    """What the C scanner reads off a ``json.JSONDecoder``: the defaults of ``json.loads``."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"NaN": float("nan"), "Infinity": float("inf"),
                      "-Infinity": float("-inf")}.__getitem__


_WHITESPACE = " \t\n\r"


def loads(text: str | bytes) -> Any:
    """``json.loads(text)``. Bytes are decoded as ``json`` decodes them: UTF-8 with or
    without a byte-order mark here, UTF-16 and UTF-32 by ``json`` itself."""
    if isinstance(text, (bytes, bytearray)):
        head = bytes(text[:4])
        if b"\x00" in head or head.startswith((b"\xff\xfe", b"\xfe\xff")):
            import json

            return json.loads(text)
        raw = bytes(text)
        # as "utf-8-sig" decodes, without loading that codec's module into every hook
        text = raw[3 if raw.startswith(b"\xef\xbb\xbf") else 0:].decode("utf-8", "surrogatepass")
    if _json is None:  # pragma: no cover
        import json

        return json.loads(text)
    start = len(text) - len(text.lstrip(_WHITESPACE))
    try:
        value, end = _json.make_scanner(_Context)(text, start)
    except StopIteration as stop:
        return _fail("Expecting value", text, stop.value)
    if text[end:].strip(_WHITESPACE):
        return _fail("Extra data", text, end)
    return value


def _fail(message: str, text: str, at: int) -> Any:
    import json  # an error is rare: its type and message are json's own

    raise json.JSONDecodeError(message, text, at)


def _encoder(ascii: bool, sort_keys: bool) -> Callable[[Any, int], Any] | None:
    if _json is None:  # pragma: no cover
        return None
    escape = _json.encode_basestring_ascii if ascii else _json.encode_basestring
    # markers (for cycles), default (unsupported types: see _unsupported), the string
    # escaper, indent (unused by the C encoder), separators, sort_keys, skipkeys, allow_nan
    return _json.make_encoder({}, _unsupported, escape, None, ": ", ", ", sort_keys, False,
                              True)


def _unsupported(value: Any) -> Any:
    raise _Unsupported


class _Unsupported(Exception):
    """A value the fast path leaves to ``json`` (which raises its own TypeError for it)."""


def dumps(value: Any, *, indent: int | None = None, ensure_ascii: bool = True,
          sort_keys: bool = False) -> str:
    """``json.dumps(value, indent=indent, ensure_ascii=ensure_ascii, sort_keys=sort_keys)``;
    compact text uses ``json``'s default separators (``", "`` and ``": "``)."""
    encode = _encoder(ensure_ascii, sort_keys)
    if encode is not None:
        try:
            if indent is None:
                return "".join(encode(value, 0))
            out: list[str] = []
            _layout(value, encode, " " * indent, "\n", sort_keys, out)
            return "".join(out)
        except (_Unsupported, RecursionError):  # json says which value, or finds the cycle
            pass
    import json

    return json.dumps(value, indent=indent, ensure_ascii=ensure_ascii, sort_keys=sort_keys)


def _layout(value: Any, encode: Callable[[Any, int], Any], step: str, newline: str,
            sort_keys: bool, out: list[str]) -> None:
    """``value`` as ``json.dumps(..., indent=len(step))`` lays it out: one member per line,
    ``", "`` never used, empty containers as ``{}`` and ``[]``."""
    if isinstance(value, dict) and value:
        inner = newline + step
        out.append("{")
        sep = inner
        if any(not isinstance(key, str) for key in value):
            raise _Unsupported  # json turns 1, True, None keys into strings
        for key, member in sorted(value.items()) if sort_keys else value.items():
            out.append(sep)
            out.extend(encode(key, 0))
            out.append(": ")
            _layout(member, encode, step, inner, sort_keys, out)
            sep = "," + inner
        out.append(newline + "}")
    elif isinstance(value, (list, tuple)) and value:
        inner = newline + step
        out.append("[")
        sep = inner
        for member in value:
            out.append(sep)
            _layout(member, encode, step, inner, sort_keys, out)
            sep = "," + inner
        out.append(newline + "]")
    else:
        out.extend(encode(value, 0))
