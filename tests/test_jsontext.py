"""``ctrlz.jsontext`` must write and read exactly what ``json`` does: the daemon's replies and
``--json`` output go through it, and scripts compare that text."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctrlz import jsontext

# names that came from non-UTF-8 bytes carry lone surrogates (os.fsdecode); text has to too
TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=12)
SCALARS = (st.none() | st.booleans() | st.integers() | TEXT
           | st.floats(allow_nan=True, allow_infinity=True))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(TEXT, inner, max_size=4), max_leaves=20)


@given(VALUES, st.sampled_from([None, 2]), st.booleans(), st.booleans())
def test_dumps_writes_what_json_writes(value: object, indent: int | None,
                                       ensure_ascii: bool, sort_keys: bool) -> None:
    options = {"indent": indent, "ensure_ascii": ensure_ascii, "sort_keys": sort_keys}
    assert jsontext.dumps(value, **options) == json.dumps(value, **options)


@given(VALUES, st.sampled_from([None, 2]), st.sampled_from(["", " \n", "\t\r\n "]))
def test_loads_reads_what_json_reads(value: object, indent: int | None, pad: str) -> None:
    text = pad + json.dumps(value, indent=indent) + pad
    assert _same(jsontext.loads(text), json.loads(text))


def _same(a: object, b: object) -> bool:
    """Equality that takes NaN for itself."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def test_values_the_fast_path_leaves_to_json_come_out_as_json_writes_them() -> None:
    odd = {1: [True, None], None: (), "t": (1, 2.5)}  # non-string keys, tuples
    for indent in (None, 2):
        assert jsontext.dumps(odd, indent=indent) == json.dumps(odd, indent=indent)
    numbered = {2: "b", 1: "a"}
    for indent in (None, 2):
        assert jsontext.dumps(numbered, indent=indent, sort_keys=True) == json.dumps(
            numbered, indent=indent, sort_keys=True)


def test_what_json_refuses_it_refuses_the_same_way() -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        jsontext.dumps({"a": {1, 2}}, indent=2)
    with pytest.raises(TypeError, match="not JSON serializable"):
        jsontext.dumps(object())
    cycle: list[object] = []
    cycle.append(cycle)
    with pytest.raises(ValueError, match="Circular reference"):
        jsontext.dumps(cycle, indent=2)


@pytest.mark.parametrize("text", ["", "  ", "{", '{"a": 1} x', "[1,]", "nul", '"\\x"', "{} {}"])
def test_malformed_text_is_a_json_decode_error(text: str) -> None:
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    with pytest.raises(json.JSONDecodeError):
        jsontext.loads(text)


@given(VALUES, st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-32-be"]))
def test_bytes_are_read_as_json_reads_them(value: object, encoding: str) -> None:
    data = json.dumps(value, ensure_ascii=False).encode(encoding, "surrogatepass")
    assert _same(jsontext.loads(data), json.loads(data))


def test_malformed_bytes_are_a_value_error_as_in_json() -> None:
    for data in (b'{"a": "\xff"}', b"\xef\xbb\xbf", b"[1] x"):
        with pytest.raises(ValueError):
            json.loads(data)
        with pytest.raises(ValueError):
            jsontext.loads(data)


BROKEN = """
import json, sys, _json
calls = []

def changed(*args, **kwargs):  # a later Python's _json.make_scanner, of another signature
    calls.append(args)
    raise TypeError("make_scanner() takes exactly 1 keyword argument")

_json.make_scanner = changed
from ctrlz import jsontext
values = [jsontext.loads('{"a": [1, 2.5, null]}') for _ in range(100)]
texts = {jsontext.dumps(v, indent=i) for v in values for i in (None, 2)}
print(json.dumps([len(calls), values[0], sorted(texts)]))
"""


def test_a_fast_path_that_fails_is_given_up_once_for_the_process() -> None:
    """``_json`` is private and called positionally; where it changed shape, every call
    goes to ``json`` (the same values, the same text), and the fast path is tried once per
    process, not once per call: no call pays for an exception."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", BROKEN], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    value = {"a": [1, 2.5, None]}
    assert json.loads(proc.stdout) == [1, value, sorted({json.dumps(value),
                                                         json.dumps(value, indent=2)})]
