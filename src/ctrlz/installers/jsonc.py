"""Edit JSON and JSON-with-comments settings files in place, touching only what changes.

Agents keep their settings in files people edit by hand: Gemini CLI strips ``//`` and ``/* */``
comments from ``settings.json``, VS Code-style files allow trailing commas, and everyone has
their own indentation. Loading such a file and dumping it again would drop the comments and
reformat every line the user wrote. So installers never re-serialise a settings file: this
module parses it into a tree of *spans* (where each value starts and ends in the text) and
makes the smallest textual edit — insert one member, append one item, delete one — leaving
every other byte as it was. Removing what was inserted gives back the original text.

The parser is deliberately small: JSON plus comments and trailing commas (what Gemini CLI and
VS Code accept), nothing of JSON5 beyond that.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

#: No settings file nests this deep; refusing deeper ones keeps every walk of the tree bounded.
MAX_DEPTH = 256


class JsoncError(ValueError):
    """The text is not JSON (with comments); ``pos`` is the offset where parsing stopped."""

    def __init__(self, message: str, pos: int, text: str) -> None:
        line = text.count("\n", 0, pos) + 1
        col = pos - (text.rfind("\n", 0, pos) + 1) + 1
        super().__init__(f"{message} at line {line} column {col}")
        self.pos = pos


@dataclass
class Node:
    """One value and where it is: ``text[start:end]``. Objects keep their members in order as
    (key, key_start, node); arrays their items."""

    kind: str  # object | array | scalar
    start: int
    end: int
    value: Any = None
    members: list[tuple[str, int, Node]] = field(default_factory=list)
    items: list[Node] = field(default_factory=list)

    def child(self, step: str | int) -> Node | None:
        if self.kind == "object" and isinstance(step, str):
            for key, _, node in reversed(self.members):  # the last duplicate wins, as in JSON
                if key == step:
                    return node
        if self.kind == "array" and isinstance(step, int) and 0 <= step < len(self.items):
            return self.items[step]
        return None

    def plain(self) -> Any:
        if self.kind == "object":
            return {k: n.plain() for k, _, n in self.members}
        if self.kind == "array":
            return [n.plain() for n in self.items]
        return self.value


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, message: str) -> JsoncError:
        return JsoncError(message, self.pos, self.text)

    def skip(self) -> None:
        """Skip whitespace and comments."""
        t, n = self.text, len(self.text)
        while self.pos < n:
            c = t[self.pos]
            if c in " \t\r\n\ufeff":
                self.pos += 1
            elif t.startswith("//", self.pos):
                end = t.find("\n", self.pos)
                self.pos = n if end < 0 else end + 1
            elif t.startswith("/*", self.pos):
                end = t.find("*/", self.pos + 2)
                if end < 0:
                    raise self.fail("unterminated comment")
                self.pos = end + 2
            else:
                return

    def value(self) -> Node:
        """Iterative, and bounded by :data:`MAX_DEPTH`: a hostile settings file cannot exhaust
        the stack."""
        stack: list[Node] = []
        pending_key: list[tuple[str, int] | None] = []
        root: Node | None = None
        while True:
            self.skip()
            if self.pos >= len(self.text):
                raise self.fail("unexpected end of text")
            c = self.text[self.pos]
            node: Node | None = None
            if c in "{[":
                if len(stack) >= MAX_DEPTH:
                    raise self.fail(f"nested more than {MAX_DEPTH} deep")
                stack.append(Node("object" if c == "{" else "array", self.pos, -1))
                pending_key.append(None)
                self.pos += 1
                if self._open_next(stack[-1], pending_key):
                    continue
                node = self._close(stack, pending_key)
            else:
                node = self.scalar()
            while node is not None:
                if not stack:
                    root = node
                    break
                parent = stack[-1]
                if parent.kind == "object":
                    key = pending_key[-1]
                    assert key is not None
                    parent.members.append((key[0], key[1], node))
                else:
                    parent.items.append(node)
                self.skip()
                close = "}" if parent.kind == "object" else "]"
                if self.text.startswith(",", self.pos):
                    self.pos += 1
                    if self._open_next(parent, pending_key):
                        node = None
                        break
                elif not self.text.startswith(close, self.pos):
                    raise self.fail(f"expected ',' or '{close}'")
                node = self._close(stack, pending_key)
            if root is not None:
                return root

    def _open_next(self, container: Node, pending_key: list[tuple[str, int] | None]) -> bool:
        """After ``{``/``[``/``,``: True when another member or item follows, False when the
        container closes here (a trailing comma is allowed, as Gemini and VS Code allow it)."""
        self.skip()
        close = "}" if container.kind == "object" else "]"
        if self.text.startswith(close, self.pos):
            return False
        if container.kind == "object":
            key_at = self.pos
            if not self.text.startswith('"', self.pos):
                raise self.fail("expected a quoted key")
            key = self.string()
            self.skip()
            if not self.text.startswith(":", self.pos):
                raise self.fail("expected ':'")
            self.pos += 1
            pending_key[-1] = (key, key_at)
        return True

    def _close(self, stack: list[Node], pending_key: list[tuple[str, int] | None]) -> Node:
        node = stack.pop()
        pending_key.pop()
        self.pos += 1
        node.end = self.pos
        return node

    def string(self) -> str:
        start = self.pos
        i = start + 1
        t = self.text
        while True:
            j = t.find('"', i)
            if j < 0:
                raise self.fail("unterminated string")
            backslashes = 0
            k = j - 1
            while t[k] == "\\":
                backslashes += 1
                k -= 1
            if backslashes % 2 == 0:
                break
            i = j + 1
        self.pos = j + 1
        try:
            return json.loads(t[start:self.pos])
        except ValueError:
            raise self.fail("bad string") from None

    def scalar(self) -> Node:
        start = self.pos
        if self.text.startswith('"', start):
            value = self.string()
            return Node("scalar", start, self.pos, value)
        end = start
        while end < len(self.text) and self.text[end] not in ",]}/ \t\r\n":
            end += 1
        word = self.text[start:end]
        try:
            value = json.loads(word)
        except ValueError:
            raise self.fail(f"unexpected {word[:20]!r}") from None
        self.pos = end
        return Node("scalar", start, end, value)

def parse(text: str) -> Node:
    """The span tree of ``text``; an empty text is an empty object."""
    if not text.strip():
        return Node("object", 0, 0)
    p = _Parser(text)
    root = p.value()
    p.skip()
    if p.pos != len(text):
        raise p.fail("unexpected text after the value")
    return root


def loads(text: str) -> Any:
    return parse(text).plain()


def _find(root: Node, path: list[str | int]) -> Node:
    node = root
    for step in path:
        nxt = node.child(step)
        if nxt is None:
            raise KeyError(path)
        node = nxt
    return node


def _indent_unit(text: str) -> str:
    for line in text.splitlines()[1:]:
        stripped = line.lstrip(" \t")
        if stripped and len(stripped) < len(line):
            return line[: len(line) - len(stripped)]
    return "  "


def _line_indent(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
    line = text[start:pos]
    return line[: len(line) - len(line.lstrip(" \t"))]


def _newline(text: str) -> str:
    """The file's own line end (its first one): a CRLF file gets CRLF lines from us."""
    at = text.find("\n")
    return "\r\n" if at > 0 and text[at - 1] == "\r" else "\n"


def _render(value: Any, indent: str, unit: str, nl: str = "\n") -> str:
    out = json.dumps(value, indent=len(unit) if unit.strip(" ") == "" else unit,
                     ensure_ascii=False)
    return out.replace("\n", nl + indent)


def _insert(text: str, node: Node, piece: str, unit: str) -> str:
    """Insert ``piece`` (already rendered for the child indent) as the last member or item.

    Into an empty container, whatever it held (spaces, comments) stays before the piece, and
    the piece goes on a line of its own, then the closing bracket on its own: :func:`remove`
    recognises that shape and gives back exactly what the container held."""
    nl = _newline(text)
    outer = _line_indent(text, node.start)
    inner = outer + unit
    last = node.members[-1][2] if node.kind == "object" and node.members else (
        node.items[-1] if node.kind == "array" and node.items else None)
    if last is None:
        close = node.end - 1
        return text[:close] + nl + inner + piece + nl + outer + text[close:]
    return text[:last.end] + "," + nl + inner + piece + text[last.end:]


def add_member(text: str, path: list[str | int], key: str, value: Any) -> str:
    """``text`` with ``key: value`` added as the last member of the object at ``path``."""
    if not text.strip():
        text = "{}\n"
    root = parse(text)
    node = _find(root, path)
    if node.kind != "object":
        raise JsoncError("not an object", node.start, text)
    unit = _indent_unit(text)
    inner = _line_indent(text, node.start) + unit
    piece = (json.dumps(key, ensure_ascii=False) + ": "
             + _render(value, inner, unit, _newline(text)))
    return _insert(text, node, piece, unit)


def append_item(text: str, path: list[str | int], value: Any) -> str:
    """``text`` with ``value`` appended to the array at ``path``."""
    root = parse(text)
    node = _find(root, path)
    if node.kind != "array":
        raise JsoncError("not an array", node.start, text)
    unit = _indent_unit(text)
    inner = _line_indent(text, node.start) + unit
    return _insert(text, node, _render(value, inner, unit, _newline(text)), unit)


def remove(text: str, path: list[str | int]) -> str:
    """``text`` without the member or item at ``path`` (the inverse of the two above: what
    they inserted, separator included, is what goes)."""
    root = parse(text)
    parent = _find(root, path[:-1])
    step = path[-1]
    if parent.kind == "object":
        idx = max(i for i, (k, _, _) in enumerate(parent.members) if k == step)
        starts = [ks for _, ks, _ in parent.members]
        nodes = [n for _, _, n in parent.members]
    else:
        assert isinstance(step, int)
        idx = step
        nodes = parent.items
        starts = [n.start for n in nodes]
    if idx + 1 < len(nodes):  # not the last: up to where the next one starts
        begin, end = starts[idx], starts[idx + 1]
    elif idx > 0:  # the last: from the end of the one before it
        begin, end = nodes[idx - 1].end, nodes[idx].end
    else:  # the only one: the container becomes empty
        return _empty(text, parent, starts[0], nodes[0].end)
    return text[:begin] + text[end:]


def _empty(text: str, parent: Node, begin: int, end: int) -> str:
    """``text`` without the only member or item of ``parent``, ``text[begin:end]``: what
    :func:`_insert` put into an empty container comes out with the container as it was."""
    nl = _newline(text)
    outer = _line_indent(text, parent.start)
    before, after = text[parent.start + 1:begin], text[end:parent.end - 1]
    lead = nl + outer + _indent_unit(text)
    if after == nl + outer and before.endswith(lead):
        out = text[:parent.start + 1] + before[:-len(lead)] + text[parent.end - 1:]
        try:
            parse(out)
            return out
        except JsoncError:
            pass  # a line comment would swallow the bracket: keep the line end
    if not (before.strip() + after.strip().lstrip(",").strip()):
        return text[:parent.start + 1] + text[parent.end - 1:]
    return text[:begin] + text[end:]
