"""Reversible edits of agent settings files: add entries, remember exactly what was added.

Every edit is a merge: existing keys, hooks and servers are never replaced or reordered; an
entry equal to one already present is not added twice; a server name already taken by something
else is left alone (and reported). What was added (hook groups, servers, TOML text, containers
created to hold them, whether the file itself was created) is returned as a record, and
:func:`undo_json` / :func:`undo_toml` remove exactly that and nothing else.
"""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path
from typing import Any

from ..errors import UsageError


def load_json(path: Path) -> tuple[dict[str, Any], str | None]:
    """(document, original text); a missing file is an empty document."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}, None
    if not text.strip():
        return {}, text
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{path} is not plain JSON ({exc}); not touching it. Fix or move it "
                         "and run the command again") from None
    if not isinstance(doc, dict):
        raise UsageError(f"{path} does not hold a JSON object; not touching it")
    return doc, text


def dump_json(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def _container(doc: dict[str, Any], keys: list[str], created: list[list[str]]) -> Any:
    here: Any = doc
    for i, key in enumerate(keys):
        if key not in here:
            here[key] = [] if i == len(keys) - 1 and keys[0] == "hooks" else {}
            created.append(keys[:i + 1])
        here = here[key]
    return here


def apply_json(doc: dict[str, Any], hooks: dict[str, list[dict[str, Any]]],
               servers: dict[str, Any], server_key: list[str]) -> tuple[dict[str, Any],
                                                                         list[str]]:
    """Merge ``hooks`` (event -> matcher groups) and ``servers`` (name -> entry under
    ``server_key``) into ``doc``; returns (record of what was added, notes)."""
    record: dict[str, Any] = {"hooks": [], "servers": {}, "created": []}
    notes: list[str] = []
    if hooks and not isinstance(doc.get("hooks", {}), dict):
        raise UsageError("the settings' \"hooks\" is not an object; not touching it")
    for event, groups in hooks.items():
        for group in groups:
            present = doc.get("hooks", {}).get(event, [])
            commands = {h.get("command") for g in present if isinstance(g, dict)
                        for h in g.get("hooks", []) if isinstance(h, dict)}
            if group in present or all(h["command"] in commands for h in group["hooks"]):
                notes.append(f"hook {event} ({group.get('matcher', '*')}) is already there")
                continue
            target = _container(doc, ["hooks", event], record["created"])
            if not isinstance(target, list):
                raise UsageError(f"the settings' hooks.{event} is not a list; not touching it")
            target.append(group)
            record["hooks"].append({"event": event, "group": group})
    for name, entry in servers.items():
        existing = doc
        for key in server_key:
            existing = existing.get(key, {}) if isinstance(existing, dict) else {}
        if isinstance(existing, dict) and name in existing:
            if existing[name] != entry:
                notes.append(f"kept the existing MCP server {name!r} (it differs from ours)")
            else:
                notes.append(f"MCP server {name!r} is already there")
            continue
        _container(doc, server_key, record["created"])[name] = entry
        record["servers"][name] = entry
    return record, notes


def undo_json(doc: dict[str, Any], record: dict[str, Any], server_key: list[str]) -> list[str]:
    """Remove exactly what :func:`apply_json` added (and containers it created, if empty).
    An entry changed since is left in place; the returned notes say which."""
    notes = []
    for item in record.get("hooks", []):
        groups = doc.get("hooks", {}).get(item["event"])
        if isinstance(groups, list) and item["group"] in groups:
            groups.remove(item["group"])
        else:
            notes.append(f"hook {item['event']} was changed or removed since; left as it is")
    servers: Any = doc
    for key in server_key:
        servers = servers.get(key, {}) if isinstance(servers, dict) else {}
    for name, entry in record.get("servers", {}).items():
        if isinstance(servers, dict) and servers.get(name) == entry:
            del servers[name]
        else:
            notes.append(f"MCP server {name!r} was changed or removed since; left as it is")
    for keys in sorted(record.get("created", []), key=len, reverse=True):
        parent: Any = doc
        for key in keys[:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
        if isinstance(parent, dict) and keys[-1] in parent and not parent[keys[-1]]:
            del parent[keys[-1]]
    return notes


def toml_block(name: str, command: str, args: list[str]) -> str:
    """A ``[mcp_servers.NAME]`` table for Codex's config.toml, marked as ours."""
    return (f"\n# added by `ctrlz install codex`; `ctrlz uninstall codex` removes it\n"
            f"[mcp_servers.{name}]\ncommand = {json.dumps(command)}\n"
            f"args = {json.dumps(args)}\n")


def apply_toml(text: str, name: str, block: str) -> tuple[str, str | None, list[str]]:
    """(new text, block added or None, notes); an existing server of that name is kept."""
    import tomllib

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"config.toml is not valid TOML ({exc}); not touching it") from None
    if name in data.get("mcp_servers", {}):
        return text, None, [f"kept the existing MCP server {name!r} in config.toml"]
    if not text.strip():
        block = block.lstrip("\n")
    sep = "" if not text or text.endswith("\n") else "\n"
    return text + sep + block, sep + block, []


def undo_toml(text: str, added: str) -> str:
    if added and added in text:
        i = text.rindex(added)
        return text[:i] + text[i + len(added):]
    return text


def unified(path: Path, old: str | None, new: str | None) -> str:
    return "".join(difflib.unified_diff(
        (old or "").splitlines(keepends=True), (new or "").splitlines(keepends=True),
        fromfile=str(path) if old is not None else "/dev/null",
        tofile=str(path) if new is not None else "/dev/null"))


def write_text(path: Path, text: str | None) -> None:
    """Atomically replace (or, for None, delete) a settings file, keeping its mode."""
    from ..state.atomic import atomic_write_bytes

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
