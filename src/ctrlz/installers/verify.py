"""Check an install's or uninstall's new text of a settings file before it is written.

Every edit is made in the text, so the new text could be one the agent cannot read even though
each step looked right: TOML forbids adding a ``[mcp_servers.ctrlz]`` section once
``mcp_servers = { ... }`` was written as an inline table, and the parser Codex uses then rejects
the whole file (Codex starts without the user's config). So the new text is parsed again and
compared with what the edit meant: the old document plus exactly what was added (or minus
exactly what was removed). A text that fails is never written; install refuses with a line
that says what to change in the file.
"""

from __future__ import annotations

import copy
import json
import tomllib
from pathlib import Path
from typing import Any

from ..errors import UsageError
from . import jsonc
from .specs import Target


def _merge(into: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    for k, v in more.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            _merge(into[k], v)
        else:
            into[k] = copy.deepcopy(v)
    return into


def _subtract(doc: dict[str, Any], less: dict[str, Any]) -> dict[str, Any]:
    for k, v in less.items():
        if isinstance(v, dict) and isinstance(doc.get(k), dict):
            _subtract(doc[k], v)
        else:
            doc.pop(k, None)
    return doc


def _pruned(doc: Any) -> Any:
    """``doc`` without empty tables: whether removing ``[a.b]`` leaves an empty ``a`` depends on
    whether the file also says ``[a]``, which means nothing to the agent either way."""
    if not isinstance(doc, dict):
        return doc
    out = {k: _pruned(v) for k, v in doc.items()}
    return {k: v for k, v in out.items() if v != {}}


def _table_path(block_doc: dict[str, Any]) -> list[str]:
    """The table a block's header names: ``[mcp_servers.ctrlz]`` -> [mcp_servers, ctrlz]."""
    path, node = [], block_doc
    while len(node) == 1:
        (k, v), = node.items()
        if not isinstance(v, dict):
            break
        path.append(k)
        node = v
    return path


def _dotted(keys: list[str]) -> str:
    return ".".join(k if k.replace("_", "").replace("-", "").isalnum() and k.isascii()
                    else json.dumps(k, ensure_ascii=False) for k in keys)


def _blocker(old: str, before: dict[str, Any], table: list[str]) -> tuple[list[str], str] | None:
    """The part of ``old`` that stops a ``[table]`` section being appended: (keys, why)."""
    node: Any = before
    for i in range(1, len(table)):
        prefix = table[:i]
        node = node.get(prefix[-1]) if isinstance(node, dict) else None
        if node is None:
            return None
        if not isinstance(node, dict):
            return prefix, "not a table"
        probe = f"{old}\n\n[{_dotted([*prefix, 'ctrlz-probe-' + str(len(node))])}]\n"
        try:
            tomllib.loads(probe)
        except tomllib.TOMLDecodeError:
            return prefix, "inline"
    return None


def toml_append(path: Path, old: str, new: str, blocks: list[str]) -> None:
    """Refuse (UsageError) unless ``new`` parses as TOML and holds ``old``'s document plus
    exactly the tables of ``blocks``."""
    before = tomllib.loads(old)
    want = copy.deepcopy(before)
    for b in blocks:
        _merge(want, tomllib.loads(b))
    try:
        if tomllib.loads(new) == want:
            return
        why = "it would not hold what ctrlz meant to add"
    except tomllib.TOMLDecodeError as exc:
        why = f"it would not be valid TOML: {exc}"
    for b in blocks:
        found = _blocker(old, before, _table_path(tomllib.loads(b)))
        if found is None:
            continue
        keys, kind = found
        d = _dotted(keys)
        if kind == "inline":
            raise UsageError(
                f"{path} sets {d} as an inline table ({keys[-1]} = {{ ... }}), which TOML "
                f"allows nothing to be added to; write its entries as [{d}.NAME] sections and "
                "run the command again (nothing was changed)")
        raise UsageError(f"{path}: {d} is not a table, so ctrlz cannot add its [{d}.…] section; "
                         "fix it and run the command again (nothing was changed)")
    raise UsageError(f"{path}: not changed, because {why}; please report this to ctrlz")


def toml_removal(old: str, new: str, piece: str) -> bool:
    """Whether taking ``piece`` (a block an install appended) out of ``old`` removes exactly its
    tables: not if the user wrote keys below it since, which would then land in the table
    before it (or clash there)."""
    try:
        got = tomllib.loads(new)
        want = _subtract(tomllib.loads(old), tomllib.loads(piece))
    except tomllib.TOMLDecodeError:
        return False
    return _pruned(got) == _pruned(want)


def toml_valid(text: str) -> bool:
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return False
    return True


def _strict(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _container(doc: dict[str, Any], keys: list[str], leaf: Any) -> Any:
    for i, k in enumerate(keys):
        doc = doc.setdefault(k, copy.deepcopy(leaf) if i == len(keys) - 1 else {})
    return doc


def json_text(path: Path, old: str | None, new: str) -> Any:
    """``new`` parsed, or UsageError when it is not JSON(C) — or not plain JSON where ``old``
    was (``~/.claude.json`` is read by a strict parser)."""
    try:
        doc = jsonc.loads(new)
    except jsonc.JsoncError as exc:
        raise UsageError(f"{path}: not changed, because ctrlz's edit would not be valid JSON "
                         f"({exc}); please report this to ctrlz") from None
    if (not old or not old.strip() or _strict(old)) and not _strict(new):
        raise UsageError(f"{path}: not changed, because ctrlz's edit would not be plain JSON; "
                         "please report this to ctrlz")
    return doc


def json_apply(path: Path, old: str | None, new: str, record: dict[str, Any],
               target: Target) -> None:
    """Refuse (UsageError) unless ``new`` holds ``old``'s document plus exactly what ``record``
    says was added."""
    got = json_text(path, old, new)
    want = copy.deepcopy(jsonc.loads(old)) if old and old.strip() else {}
    for key, value in record.get("top", {}).items():
        want[key] = value
    for item in record.get("hooks", []):
        _container(want, [*target.hooks_key, item["event"]], []).append(item["group"])
    for name, entry in record.get("servers", {}).items():
        _container(want, target.server_key, {})[name] = entry
    if got != want:
        raise UsageError(f"{path}: not changed, because ctrlz's edit would not hold what it "
                         "meant to add; please report this to ctrlz")
