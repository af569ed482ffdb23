"""``ctrlz install`` / ``ctrlz uninstall``: register the hooks and the MCP server with an agent.

Each install merges into the agent's settings files (see :mod:`ctrlz.installers.specs`), shows
the diff, and records exactly what it added in ``$CTRLZ_HOME/installs.json``; uninstall removes
exactly that, so settings the user had before (other hooks, other servers, formatting of values)
survive both. ``dry_run`` computes the same diffs and writes nothing.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError
from . import edits
from .specs import AGENT_NAMES, Target, targets

__all__ = ["AGENT_NAMES", "InstallResult", "install", "uninstall"]


@dataclass
class FileChange:
    path: str
    diff: str
    created: bool = False
    removed: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "diff": self.diff, "created": self.created,
                "removed": self.removed, "changed": bool(self.diff)}


@dataclass
class InstallResult:
    action: str  # install | uninstall
    agent: str
    scope: str
    dry_run: bool
    files: list[FileChange] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "agent": self.agent, "scope": self.scope,
                "dry_run": self.dry_run, "files": [f.to_json() for f in self.files],
                "notes": self.notes}


def _home() -> Path:
    return Path(os.environ.get("HOME") or Path.home())


def _manifest_path() -> Path:
    from ..toolcalls.store import default_home

    return default_home() / "installs.json"


def _load_manifest() -> dict[str, Any]:
    try:
        return json.loads(_manifest_path().read_text())
    except (FileNotFoundError, ValueError):
        return {}


def _save_manifest(data: dict[str, Any]) -> None:
    edits.write_text(_manifest_path(), json.dumps(data, indent=2) + "\n")


def _check(agent: str, scope: str) -> None:
    if agent not in AGENT_NAMES:
        raise UsageError(f"unknown agent {agent!r}; use one of {', '.join(AGENT_NAMES)}")
    if scope not in ("project", "user"):
        raise UsageError("scope is project or user")


def install(agent: str, scope: str = "project", dry_run: bool = False,
            project: str | os.PathLike[str] | None = None,
            home: Path | None = None) -> InstallResult:
    """Register ctrlz's hooks and MCP server for ``agent`` in its project or user settings."""
    _check(agent, scope)
    result = InstallResult("install", agent, scope, dry_run)
    manifest = _load_manifest()
    for target in targets(agent, scope, Path(project or ".").resolve(), home or _home()):
        key = str(target.path)
        old = target.path.read_text(encoding="utf-8") if target.path.exists() else None
        new, record, notes = _apply(target, old)
        result.notes += [f"{target.path}: {n}" for n in notes]
        result.files.append(FileChange(key, edits.unified(target.path, old, new),
                                       created=old is None and new is not None))
        if dry_run or new == old:
            continue
        record["created_file"] = old is None
        previous = manifest.get(key)
        if previous:  # a second install adds to the first one's record
            for part in ("hooks", "created"):
                record[part] = previous.get(part, []) + record.get(part, [])
            record["servers"] = previous.get("servers", {}) | record.get("servers", {})
            record["toml"] = previous.get("toml", "") + record.get("toml", "")
            record["created_file"] = previous.get("created_file", False)
        manifest[key] = record | {"agent": agent, "scope": scope}
        edits.write_text(target.path, new)
        _save_manifest(manifest)
    return result


def _apply(target: Target, old: str | None) -> tuple[str | None, dict[str, Any], list[str]]:
    if target.fmt == "toml":
        name, entry = next(iter(target.servers.items()))
        block = edits.toml_block(name, entry["command"], entry["args"])
        new, added, notes = edits.apply_toml(old or "", name, block)
        return (new if added else old), {"toml": added or ""}, notes
    doc, _ = edits.load_json(target.path) if old is not None else ({}, None)
    record, notes = edits.apply_json(doc, target.hooks, target.servers, target.server_key)
    if not record["hooks"] and not record["servers"]:
        return old, record, notes
    return edits.dump_json(doc), record, notes


def uninstall(agent: str, scope: str = "project", dry_run: bool = False,
              project: str | os.PathLike[str] | None = None,
              home: Path | None = None) -> InstallResult:
    """Remove exactly what ``install`` added for ``agent`` in that scope."""
    _check(agent, scope)
    result = InstallResult("uninstall", agent, scope, dry_run)
    manifest = _load_manifest()
    for target in targets(agent, scope, Path(project or ".").resolve(), home or _home()):
        key = str(target.path)
        record = manifest.get(key)
        if record is None or record.get("agent") != agent:
            result.notes.append(f"{target.path}: nothing of ours recorded there")
            continue
        old = target.path.read_text(encoding="utf-8") if target.path.exists() else None
        if old is None:
            new = None
        elif target.fmt == "toml":
            new = edits.undo_toml(old, record.get("toml", ""))
        else:
            doc, _ = edits.load_json(target.path)
            result.notes += [f"{target.path}: {n}" for n in
                             edits.undo_json(doc, record, target.server_key)]
            new = edits.dump_json(doc)
        if new is not None and record.get("created_file") and (
                not new.strip() or new.strip() == "{}"):
            new = None  # we created the file and it holds nothing else
        result.files.append(FileChange(key, edits.unified(target.path, old, new),
                                       removed=old is not None and new is None))
        if dry_run:
            continue
        if new != old:
            edits.write_text(target.path, new)
        del manifest[key]
        _save_manifest(manifest)
    return result
