"""Reversible edits of agent settings files: add entries, remember exactly what was added.

Every edit is a merge made in the text (:mod:`ctrlz.installers.jsonc`), so the user's comments,
key order and formatting survive: existing keys, hooks and servers are never replaced or
reordered; an entry equal to one already present is not added twice; a server name already
taken by something else is left alone (and reported). What was added (hook entries, servers,
format versions, containers created to hold them, TOML blocks) is returned as a record, and
:func:`undo_json` / :func:`undo_toml` remove exactly that and nothing else.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

from ..errors import UsageError
from . import jsonc
from .specs import Target


def load(path: Path, text: str) -> dict[str, Any]:
    try:
        doc = jsonc.loads(text)
    except jsonc.JsoncError as exc:
        raise UsageError(f"{path} is not JSON ({exc}); not touching it. Fix or move it and run "
                         "the command again") from None
    if not isinstance(doc, dict):
        raise UsageError(f"{path} does not hold a JSON object; not touching it")
    return doc


def _get(doc: Any, keys: list[str]) -> Any:
    for k in keys:
        doc = doc.get(k) if isinstance(doc, dict) else None
    return doc


def _ensure(text: str, path: Path, keys: list[str], leaf: Any,
            created: list[list[str]]) -> str:
    """``text`` with containers down ``keys`` (the last one ``leaf`` when made)."""
    for i in range(len(keys)):
        here = _get(jsonc.loads(text) if text.strip() else {}, keys[:i + 1])
        if here is None:
            text = jsonc.add_member(text, keys[:i], keys[i], leaf if i == len(keys) - 1 else {})
            created.append(keys[:i + 1])
        elif not isinstance(here, type(leaf) if i == len(keys) - 1 else dict):
            raise UsageError(f"{path}: {'.'.join(keys[:i + 1])} is not "
                             f"{'a list' if isinstance(leaf, list) else 'an object'}; "
                             "not touching it")
    return text


def apply_json(path: Path, text: str, target: Target) -> tuple[str, dict[str, Any], list[str]]:
    """(new text, record of what was added, notes)."""
    if text.strip():
        load(path, text)  # refuse a file that is not JSON before touching it
    record: dict[str, Any] = {"hooks": [], "servers": {}, "created": [], "top": {}}
    notes: list[str] = []
    for key, value in target.top.items():
        if key not in (jsonc.loads(text) if text.strip() else {}):
            text = jsonc.add_member(text, [], key, value)
            record["top"][key] = value
    for event, entries in target.hooks.items():
        for entry in entries:
            present = _get(jsonc.loads(text) if text.strip() else {},
                           [*target.hooks_key, event]) or []
            if entry in present:
                notes.append(f"hook {event} is already there")
                continue
            text = _ensure(text, path, [*target.hooks_key, event], [], record["created"])
            text = jsonc.append_item(text, [*target.hooks_key, event], entry)
            record["hooks"].append({"event": event, "group": entry})
    for name, entry in target.servers.items():
        existing = _get(jsonc.loads(text) if text.strip() else {}, target.server_key)
        if isinstance(existing, dict) and name in existing:
            notes.append(f"kept the existing MCP server {name!r} (it differs from ours)"
                         if existing[name] != entry else f"MCP server {name!r} is already there")
            continue
        text = _ensure(text, path, target.server_key, {}, record["created"])
        text = jsonc.add_member(text, target.server_key, name, entry)
        record["servers"][name] = entry
    return text, record, notes


def _last_index(items: Any, value: Any) -> int | None:
    if isinstance(items, list):
        for i in range(len(items) - 1, -1, -1):
            if items[i] == value:
                return i
    return None


def undo_json(path: Path, text: str, record: dict[str, Any],
              target: Target) -> tuple[str, list[str]]:
    """(text without what :func:`apply_json` added, notes). An entry changed since is left in
    place, and said."""
    load(path, text)
    notes = []
    for item in reversed(record.get("hooks", [])):
        where = [*target.hooks_key, item["event"]]
        i = _last_index(_get(jsonc.loads(text), where), item["group"])
        if i is None:
            notes.append(f"hook {item['event']} was changed or removed since; left as it is")
            continue
        text = jsonc.remove(text, [*where, i])
    for name, entry in record.get("servers", {}).items():
        servers = _get(jsonc.loads(text), target.server_key)
        if isinstance(servers, dict) and servers.get(name) == entry:
            text = jsonc.remove(text, [*target.server_key, name])
        else:
            notes.append(f"MCP server {name!r} was changed or removed since; left as it is")
    for keys in sorted(record.get("created", []), key=len, reverse=True):
        if _get(jsonc.loads(text), keys) in ({}, []):
            text = jsonc.remove(text, keys)
    for key, value in record.get("top", {}).items():
        if jsonc.loads(text).get(key) == value and len(jsonc.loads(text)) == 1:
            text = jsonc.remove(text, [key])  # only when nothing else is left beside it
    return text, notes


def toml_server_block(name: str, entry: dict[str, Any]) -> str:
    """A ``[mcp_servers.NAME]`` table for Codex's config.toml, marked as ours."""
    import json

    return (f"# added by `ctrlz install codex`; `ctrlz uninstall codex` removes it\n"
            f"[mcp_servers.{name}]\ncommand = {json.dumps(entry['command'])}\n"
            f"args = {json.dumps(entry['args'])}\n")


def parse_toml(path: Path, text: str) -> dict[str, Any]:
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path} is not valid TOML ({exc}); not touching it") from None


def append_toml(text: str, blocks: list[str]) -> tuple[str, list[str]]:
    """(new text, the exact pieces appended, separators included)."""
    added = []
    for b in blocks:
        piece = ("" if not text else "\n" if text.endswith("\n") else "\n\n") + b
        text += piece
        added.append(piece)
    return text, added


def undo_toml(text: str, added: list[str]) -> tuple[str, list[str]]:
    """(text without the pieces :func:`append_toml` added, notes). A piece is taken out only
    when that removes exactly its tables: keys the user wrote below it since would otherwise
    move into the table before it."""
    from . import verify

    notes = []
    for piece in reversed(added):
        if piece and piece in text:
            i = text.rindex(piece)
            without = text[:i] + text[i + len(piece):]
            if verify.toml_removal(text, without, piece):
                text = without
                continue
        if piece.strip():
            header = next((ln for ln in piece.splitlines() if ln.startswith("[")), piece.strip())
            notes.append(f"{header} was changed since; left as it is")
    return text, notes


def unified(path: Path, old: str | None, new: str | None) -> str:
    return "".join(difflib.unified_diff(
        (old or "").splitlines(keepends=True), (new or "").splitlines(keepends=True),
        fromfile=str(path) if old is not None else "/dev/null",
        tofile=str(path) if new is not None else "/dev/null"))


def write_text(path: Path, text: str | None) -> None:
    """Atomically replace (or, for None, delete) a settings file, keeping its mode. A settings
    file that is a symlink (dotfiles managers make them) is written through, never replaced."""
    from ..state.fsio.atomic import atomic_write_bytes

    if path.is_symlink():
        path = path.resolve()
    if text is None:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        return
    try:
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o644
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, text.encode("utf-8"), mode=mode)
    os.chmod(path, mode)
