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

``_json`` is private: its functions are called positionally and may change shape in any later
Python. The first call in a process checks the fast path once on a known sample (the scanner
reads it back, both escapers write it as ``json`` does) and keeps the answer: where anything
fails or differs, every call of the process goes to ``json``, at no cost per call. A failure
the check did not foresee (anything but the errors ``json`` itself raises) hands that call to
``json`` as well. Every hook reads and writes through here, and a hook that fails records its
error and exits 0, so a codec that broke would silently stop every capture (issue 41).

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

#: the check's sample, as ``json.dumps`` writes it with ``ensure_ascii`` on and off
_SAMPLE = {"a": [1, -2.5, None, True, False, "\u00e9\u2028\"\\\n"], "b": {}, "c": []}
_SAMPLE_ASCII = '{"a": [1, -2.5, null, true, false, "\\u00e9\\u2028\\"\\\\\\n"], "b": {}, "c": []}'
_SAMPLE_TEXT = '{"a": [1, -2.5, null, true, false, "\u00e9\u2028\\"\\\\\\n"], "b": {}, "c": []}'

#: the fast path's scanner once checked, ``False`` when ``json`` does every call; None: not
#: checked yet in this process
_scanner: Callable[[str, int], tuple[Any, int]] | bool | None = None


def _fast() -> Callable[[str, int], tuple[Any, int]] | None:
    """The C scanner when the fast path works in this Python, else None (checked once)."""
    global _scanner
    if _scanner is None:
        _scanner = _check() or False
    return _scanner or None


def _check() -> Callable[[str, int], tuple[Any, int]] | None:
    """The scanner, when ``_json`` reads and writes the sample as ``json`` does."""
    if _json is None:  # pragma: no cover - CPython always builds it
        return None
    try:
        scan = _json.make_scanner(_Context)
        if scan(_SAMPLE_ASCII, 0) != (_SAMPLE, len(_SAMPLE_ASCII)) \
                or scan(_SAMPLE_TEXT, 0) != (_SAMPLE, len(_SAMPLE_TEXT)):
            return None
        for ascii, text in ((True, _SAMPLE_ASCII), (False, _SAMPLE_TEXT)):
            if "".join(_make_encoder(ascii, False)(_SAMPLE, 0)) != text:
                return None
    except Exception:  # noqa: BLE001 - whatever it is, json does the work
        return None
    return scan


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
    scan = _fast()
    if scan is None:
        import json

        return json.loads(text)
    start = len(text) - len(text.lstrip(_WHITESPACE))
    try:
        value, end = scan(text, start)
    except StopIteration as stop:
        return _fail("Expecting value", text, stop.value)
    except (ValueError, RecursionError):  # json's own errors: json.JSONDecodeError is one
        raise
    except Exception:  # noqa: BLE001 - not one json raises: json reads it
        import json

        return json.loads(text)
    if text[end:].strip(_WHITESPACE):
        return _fail("Extra data", text, end)
    return value


def _fail(message: str, text: str, at: int) -> Any:
    import json  # an error is rare: its type and message are json's own

    raise json.JSONDecodeError(message, text, at)


def _encoder(ascii: bool, sort_keys: bool) -> Callable[[Any, int], Any] | None:
    """The C encoder, when the fast path works in this Python (see :func:`_fast`)."""
    return _make_encoder(ascii, sort_keys) if _fast() is not None else None


def _make_encoder(ascii: bool, sort_keys: bool) -> Callable[[Any, int], Any]:
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
        except ValueError:  # json's own: a cycle the C encoder found
            raise
        except Exception:  # noqa: BLE001 - a TypeError json raises too, or one it does not:
            pass  # either way, json's word on the value
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
