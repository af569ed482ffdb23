"""The JSONC editor (``installers/jsonc.py``) and the reversible edits built on it.

Unit tests pin the parser (comments, trailing commas, BOM, the errors it names) and each edit.
The property: for any settings text a person could have written (comments anywhere, trailing
commas, odd indentation, a BOM, CRLF line ends), installing a hook entry and uninstalling it
gives back the original bytes, through the in-memory edits and through ``install`` /
``uninstall`` on a real file.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctrlz import installers
from ctrlz.installers import edits, jsonc
from ctrlz.installers.specs import Target, hook_command

# -- the parser --------------------------------------------------------------------------------


def test_comments_trailing_commas_and_a_bom_parse_as_their_json() -> None:
    text = ('\ufeff// settings\n{\n  /* block */ "a": [1, 2,], // end\n'
            '  "b": {"c": "x // not a comment", "d": null,},\n}\n')
    assert jsonc.loads(text) == {"a": [1, 2], "b": {"c": "x // not a comment", "d": None}}


def test_the_last_duplicate_key_wins_as_in_json() -> None:
    assert jsonc.parse('{"a": 1, "a": 2}').child("a").value == 2  # type: ignore[union-attr]


def test_an_empty_text_is_an_empty_object() -> None:
    assert jsonc.loads("  \n") == {}
    assert jsonc.add_member("", [], "k", 1) == '{\n  "k": 1\n}\n'


@pytest.mark.parametrize(("text", "where"), [
    ('{"a": 1', "line 1 column 8"),
    ('{\n  "a" 1}', "line 2 column 7"),
    ("{/* open", "line 1 column 2"),
    ('{"a": tru}', "line 1 column 7"),
    ("[1] [2]", "line 1 column 5"),
    ("{a: 1}", "line 1 column 2"),
])
def test_errors_say_where_parsing_stopped(text: str, where: str) -> None:
    with pytest.raises(jsonc.JsoncError, match=where):
        jsonc.parse(text)


def test_nesting_is_bounded_without_recursion() -> None:
    jsonc.parse("[" * jsonc.MAX_DEPTH + "]" * jsonc.MAX_DEPTH)
    with pytest.raises(jsonc.JsoncError, match="nested more than"):
        jsonc.parse("[" * (jsonc.MAX_DEPTH + 1) + "]" * (jsonc.MAX_DEPTH + 1))


# -- the edits ---------------------------------------------------------------------------------


def test_add_member_keeps_the_files_indentation_and_comments() -> None:
    text = '{\n\t// mine\n\t"a": 1 // one\n}\n'
    out = jsonc.add_member(text, [], "b", {"c": [2]})
    assert out == '{\n\t// mine\n\t"a": 1,\n\t"b": {\n\t\t"c": [\n\t\t\t2\n\t\t]\n\t} // one\n}\n'
    assert jsonc.remove(out, ["b"]) == text


def test_append_item_and_remove_it_again() -> None:
    text = '{"hooks": [ {"x": 1} ,]}'
    out = jsonc.append_item(text, ["hooks"], {"y": 2})
    assert jsonc.loads(out) == {"hooks": [{"x": 1}, {"y": 2}]}
    assert jsonc.remove(out, ["hooks", 1]) == text


def test_insert_into_an_empty_container_and_take_it_out() -> None:
    for text in ('{"h": {}}', '{"h": []}'):
        path: list[str | int] = ["h"]
        out = (jsonc.add_member(text, path, "k", 1) if "{}" in text
               else jsonc.append_item(text, path, 1))
        assert jsonc.remove(out, [*path, "k" if "{}" in text else 0]) == text


def test_removing_a_middle_member_leaves_its_neighbours() -> None:
    text = '{\n  "a": 1,\n  "b": 2,\n  "c": 3\n}'
    assert jsonc.remove(text, ["b"]) == '{\n  "a": 1,\n  "c": 3\n}'


def test_edits_refuse_the_wrong_kind_of_container() -> None:
    with pytest.raises(jsonc.JsoncError, match="not an array"):
        jsonc.append_item('{"a": {}}', ["a"], 1)
    with pytest.raises(jsonc.JsoncError, match="not an object"):
        jsonc.add_member('{"a": []}', ["a"], "k", 1)


# -- install then uninstall gives back the original bytes --------------------------------------

ENTRY = {"matcher": "Edit|Write", "hooks": [{"type": "command", "command": hook_command("claude")}]}
THEIRS = {"matcher": "Bash", "hooks": [{"type": "command", "command": "my-linter --fast"}]}

scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                    st.text("ab /*\\\"\u00e9\t", max_size=6))
keys = st.sampled_from(["a", "b", "env", "hooks", "PreToolUse", "PostToolUse", "x y", "é"])
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(keys, inner, max_size=3)), max_leaves=8)
hooks_values = st.one_of(
    st.just({}), st.just({"PreToolUse": []}), st.just({"PreToolUse": [THEIRS]}),
    st.just({"Stop": [THEIRS]}), st.just({"PreToolUse": [THEIRS, ENTRY]}))


@st.composite
def documents(draw: st.DrawFn) -> dict[str, Any]:
    doc = draw(st.dictionaries(keys.filter(lambda k: k != "hooks"), values, max_size=4))
    if draw(st.booleans()):
        doc["hooks"] = draw(hooks_values)
    return doc


@st.composite
def written(draw: st.DrawFn, doc: Any) -> str:
    """``doc`` as a person might have written it: any indentation, comments between tokens,
    trailing commas, spaces before commas, CRLF line ends, a BOM, text after the value."""
    nl = draw(st.sampled_from(["\n", "\r\n"]))
    unit = draw(st.sampled_from(["  ", "    ", "\t", " "]))
    compact = draw(st.booleans())

    def gap(depth: int) -> str:
        """Whitespace, maybe with a comment, between two tokens."""
        out = draw(st.sampled_from(["", " "])) if compact else nl + unit * depth
        comment = draw(st.sampled_from(["", "// note", "/* c */", "/**/", '// {"k": 1,}']))
        if comment.startswith("//"):
            return " " + comment + nl + out.lstrip(" \t\r\n")
        return out + comment + (" " if comment else "")

    def render(v: Any, depth: int) -> str:
        if not isinstance(v, dict | list):
            return json.dumps(v, ensure_ascii=draw(st.booleans()))
        items = ([json.dumps(k, ensure_ascii=draw(st.booleans()))
                  + draw(st.sampled_from([": ", ":", " : "])) + render(x, depth + 1)
                  for k, x in v.items()] if isinstance(v, dict)
                 else [render(x, depth + 1) for x in v])
        opening, closing = "{}" if isinstance(v, dict) else "[]"
        if not items:
            return opening + draw(st.sampled_from(["", " ", nl, nl + "  // empty" + nl])) + closing
        body = "".join((gap(depth + 1) if i == 0 else draw(st.sampled_from([",", " ,"]))
                        + gap(depth + 1)) + item for i, item in enumerate(items))
        return opening + body + draw(st.sampled_from(["", ","])) + gap(depth) + closing

    text = render(doc, 0)
    return (draw(st.sampled_from(["", "\ufeff"])) + draw(st.sampled_from(["", "// top" + nl]))
            + text + draw(st.sampled_from(["", nl, nl + "// end" + nl])))


def claude_target(path: Path) -> Target:
    return Target(path, hooks={"PreToolUse": [ENTRY], "PostToolUse": [ENTRY]})


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_install_then_uninstall_gives_back_the_original_text(data: st.DataObject) -> None:
    doc = data.draw(documents())
    text = data.draw(written(doc))
    assert jsonc.loads(text) == doc  # the generator writes what it means
    target = claude_target(Path("settings.json"))
    new, record, _ = edits.apply_json(target.path, text, target)
    after = jsonc.loads(new)
    assert after["hooks"]["PreToolUse"][-1] == ENTRY
    assert {k: v for k, v in after.items() if k != "hooks"} == {
        k: v for k, v in doc.items() if k != "hooks"}
    back, notes = edits.undo_json(target.path, new, record, target)
    assert (back, notes) == (text, [])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_install_then_uninstall_gives_back_the_files_bytes(data: st.DataObject) -> None:
    """The same through ``ctrlz install claude`` on a real file: what is read and written is
    bytes, so a CRLF file or a BOM comes back as it was."""
    text = data.draw(written(data.draw(documents())))
    with tempfile.TemporaryDirectory() as tmp:
        project, home = Path(tmp) / "p", Path(tmp) / "h"
        settings_file = project / ".claude" / "settings.local.json"
        settings_file.parent.mkdir(parents=True)
        home.mkdir()
        original = text.encode()
        settings_file.write_bytes(original)
        installers.install("claude", project=project, home=home)
        assert jsonc.loads(settings_file.read_text(encoding="utf-8"))["hooks"]
        installers.uninstall("claude", project=project, home=home)
        assert settings_file.read_bytes() == original


def test_a_crlf_settings_file_keeps_its_line_ends(tmp_path: Path) -> None:
    """Found by the property above: the file was read with universal newlines, so installing
    rewrote every CRLF of the user's file as LF and uninstalling could not put them back."""
    project, home = tmp_path / "p", tmp_path / "h"
    settings_file = project / ".claude" / "settings.local.json"
    settings_file.parent.mkdir(parents=True)
    home.mkdir()
    original = b'{\r\n  // mine\r\n  "env": {"A": "1"}\r\n}\r\n'
    settings_file.write_bytes(original)
    installers.install("claude", project=project, home=home)
    installed = settings_file.read_bytes()
    assert installed.startswith(b'{\r\n  // mine\r\n  "env": {"A": "1"}')
    installers.uninstall("claude", project=project, home=home)
    assert settings_file.read_bytes() == original
