"""``ctrlz install`` / ``ctrlz uninstall``: register the hooks and the MCP server with an agent.

Each install merges into the agent's files (see :mod:`ctrlz.installers.specs` for which, and
why), shows the diff, and records exactly what it added in ``$CTRLZ_HOME/installs.json``;
uninstall removes exactly that, so what the user had before (other hooks, other servers,
comments, formatting) survives both, byte for byte. Installing twice changes nothing. Every
file's new text is computed and checked (:mod:`ctrlz.installers.verify`) before any is written,
so a refused file leaves all of them as they were.
``dry_run`` computes the same diffs and writes nothing. :func:`detect` finds the agents present
on this machine or in this project, for ``ctrlz install --detect``.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import CtrlzError, UsageError
from . import checks, codex_trust, edits, verify
from .specs import AGENT_NAMES, AGENTS, Target, hook_command, targets

__all__ = ["AGENT_NAMES", "InstallResult", "detect", "install", "uninstall"]


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
        data = json.loads(_manifest_path().read_text())
    except (FileNotFoundError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save_manifest(data: dict[str, Any]) -> None:
    edits.write_text(_manifest_path(), json.dumps(data, indent=2) + "\n")


def _check(agent: str, scope: str) -> None:
    if agent not in AGENTS:
        raise UsageError(f"unknown agent {agent!r}; use one of {', '.join(AGENT_NAMES)}")
    if scope not in ("project", "user"):
        raise UsageError("scope is project or user")


def _read(path: Path) -> str | None:
    """The file's text exactly (``\\r\\n`` kept: universal newlines would rewrite a CRLF file's
    every line end, and an uninstall could not give its bytes back)."""
    try:
        return path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise UsageError(f"{path} is not UTF-8 text; not touching it") from None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None


def _key(target: Target, agent: str) -> str:
    """The manifest key: the file, plus the agent for files two agents share (~/.claude.json
    is only Claude's, but a Codex config.toml holds both a server and hook trust)."""
    return f"{target.path}#{agent}"


@dataclass
class _Write:
    """One file an install or uninstall changes: its text before and after, and the manifest
    entry that goes with it (None: the entry is removed)."""

    path: Path
    old: str | None
    new: str | None
    key: str
    record: dict[str, Any] | None
    made_dirs: list[str] = field(default_factory=list)


def install(agent: str, scope: str = "project", dry_run: bool = False,
            project: str | os.PathLike[str] | None = None,
            home: Path | None = None) -> InstallResult:
    """Register ctrlz's hooks and MCP server for ``agent`` in its project or user files.

    Every file's new text is computed and checked (it parses, and holds what was meant) before
    any is written, so a file that must be refused leaves all of them as they were."""
    _check(agent, scope)
    root, home = Path(project or ".").resolve(), home or _home()
    result = InstallResult("install", agent, scope, dry_run)
    manifest = _load_manifest()
    planned = targets(agent, scope, root, home)
    texts: dict[Path, str | None] = {}  # each file as this install leaves it (dry run too)
    ours = {hook_command(agent)}
    writes: list[_Write] = []
    made: set[str] = set()  # directories an earlier file of this install creates
    for target in planned:
        old = _read(target.path)
        new, record, notes = _apply(target, old, texts, ours)
        texts[target.path] = new
        result.notes += [f"{target.path}: {n}" for n in notes]
        result.files.append(FileChange(str(target.path), edits.unified(target.path, old, new),
                                       created=old is None and new is not None))
        if new == old:
            continue
        key = _key(target, agent)
        record |= {"agent": agent, "scope": scope, "path": str(target.path),
                   "project": str(root) if scope == "project" else None,
                   "fmt": target.fmt, "hooks_key": target.hooks_key,
                   "server_key": target.server_key, "created_file": old is None,
                   "trust_for": str(target.trust_for) if target.trust_for else None}
        previous = manifest.get(key)
        if previous:  # a second install adds to the first one's record
            for part in ("hooks", "created", "toml"):
                record[part] = previous.get(part, []) + record.get(part, [])
            for part in ("servers", "top"):
                record[part] = previous.get(part, {}) | record.get(part, {})
            record["created_file"] = previous.get("created_file", False)
        dirs = []
        if old is None:  # the directories this install makes, so uninstall can take them
            dirs = [str(d) for d in _missing_dirs(target.path.parent) if str(d) not in made]
            record["created_dirs"] = dirs
            made.update(dirs)
        writes.append(_Write(target.path, old, new, key, record, dirs))
    if not dry_run:
        _write_all(writes, manifest)
    result.notes += checks.notes(agent, scope, root, home, planned)
    return result


def _write_all(writes: list[_Write], manifest: dict[str, Any]) -> None:
    """Write every file of an install, each after its manifest entry (a crash between the two
    leaves a record uninstall can act on, never an edit nobody recorded). When one fails (a full
    disk), the files already written are put back and their entries taken out again, so the
    install did nothing; one that cannot be put back keeps its entry, for ``ctrlz uninstall``."""
    before = {w.key: manifest.get(w.key) for w in writes}
    done: list[_Write] = []
    where = _manifest_path()
    try:
        for w in writes:
            assert w.record is not None
            manifest[w.key] = w.record
            where = _manifest_path()
            _save_manifest(manifest)
            where = w.path
            edits.write_text(w.path, w.new)
            done.append(w)
    except (OSError, CtrlzError) as exc:
        stuck = _put_back(done)
        for w in writes:
            if w not in stuck:
                if before[w.key] is None:
                    manifest.pop(w.key, None)
                else:
                    manifest[w.key] = before[w.key]
        try:
            _save_manifest(manifest)
        except (OSError, CtrlzError):
            pass  # the saved one records more than was written: uninstall skips what is absent
        what = str(exc) if isinstance(exc, CtrlzError) else (
            f"cannot write {where}: {exc.strerror or exc}")
        if stuck:
            left = ", ".join(str(s.path) for s in stuck)
            tail = (f"; {left} could not be put back (`ctrlz uninstall` takes ctrlz's part "
                    "out of it)")
        else:
            tail = "; nothing was changed"
        raise type(exc)(what + tail) if isinstance(exc, CtrlzError) else CtrlzError(
            what + tail) from exc


def _put_back(done: list[_Write]) -> list[_Write]:
    """Give the written files back their old text (a created one goes, with the folders made
    for it); the ones that could not be."""
    stuck = []
    for w in reversed(done):
        try:
            edits.write_text(w.path, w.old)
        except (OSError, CtrlzError):
            stuck.append(w)
            continue
        for d in w.made_dirs:  # deepest first; only if empty
            try:
                os.rmdir(d)
            except OSError:
                break
    return stuck


def _missing_dirs(path: Path) -> list[Path]:
    """``path`` and its ancestors that do not exist yet, deepest first."""
    out = []
    while not path.exists() and path != path.parent:
        out.append(path)
        path = path.parent
    return out


def _apply(target: Target, old: str | None, texts: dict[Path, str | None],
           ours: set[str]) -> tuple[str | None, dict[str, Any], list[str]]:
    if target.fmt == "file":
        assert target.content is not None
        if old == target.content:
            return old, {}, ["already there"]
        if old is not None:
            return old, {}, ["exists and is not ctrlz's; left as it is (move it and install "
                             "again)"]
        return target.content, {"sha256": hashlib.sha256(
            target.content.encode()).hexdigest()}, []
    if target.fmt == "toml":
        config = edits.parse_toml(target.path, old or "")
        blocks, notes = [], []
        for name, entry in target.servers.items():
            servers = config.get("mcp_servers")
            if isinstance(servers, dict) and name in servers:
                notes.append(f"kept the existing MCP server {name!r}")
            else:
                blocks.append(edits.toml_server_block(name, entry))
        if target.trust_for is not None:
            hooks_text = texts.get(target.trust_for)
            if hooks_text is None:
                hooks_text = _read(target.trust_for) or ""
            more, trust_notes = codex_trust.trust_blocks(hooks_text, target.trust_for, ours,
                                                         config)
            blocks += more
            notes += trust_notes
        new, added = edits.append_toml(old or "", blocks)
        if not added:
            return old, {"toml": added}, notes
        verify.toml_append(target.path, old or "", new, blocks)
        return new, {"toml": added}, notes
    new, record, notes = edits.apply_json(target.path, old or "", target)
    if not record["hooks"] and not record["servers"] and not record["top"]:
        return old, record, notes
    verify.json_apply(target.path, old, new, record, target)
    return new, record, notes


def uninstall(agent: str, scope: str = "project", dry_run: bool = False,
              project: str | os.PathLike[str] | None = None,
              home: Path | None = None) -> InstallResult:
    """Remove exactly what ``install`` added for ``agent`` in that scope, as its records say
    (so what an older ctrlz installed elsewhere goes too)."""
    _check(agent, scope)
    root = Path(project or ".").resolve()
    result = InstallResult("uninstall", agent, scope, dry_run)
    manifest = _load_manifest()
    shifted: dict[Path, list[tuple[str, int, int]]] = {}
    found = _records(manifest, agent, scope, root)
    if not found:
        result.notes.append(f"nothing of ctrlz's is recorded for {agent} ({scope})")
    texts: dict[Path, str | None] = {}  # each file as the records before left it
    writes: list[_Write] = []
    for key, record in found:  # every file's new text first: one that is refused stops all
        target = _target_of(record, key)
        old = texts[target.path] if target.path in texts else _read(target.path)
        new, notes = _undo(target, old, record, shifted)
        texts[target.path] = new
        result.notes += [f"{target.path}: {n}" for n in notes]
        if target.fmt == "json" and old is not None and agent == "codex":
            shifted[target.path] = codex_trust.moves(old, new or "")
        result.files.append(FileChange(str(target.path), edits.unified(target.path, old, new),
                                       removed=old is not None and new is None))
        writes.append(_Write(target.path, old, new, key, None,
                             record.get("created_dirs", []) if new is None else []))
    if dry_run:
        return result
    for w in writes:  # a failure stops here: the records of the files not yet done stay
        if w.new != w.old:
            try:
                edits.write_text(w.path, w.new)
            except OSError as exc:
                raise CtrlzError(f"cannot write {w.path}: {exc.strerror or exc}; run the "
                                 "command again once that is fixed") from exc
        del manifest[w.key]
        _save_manifest(manifest)
    made_dirs = {d for w in writes for d in w.made_dirs}
    for d in sorted(made_dirs, key=len, reverse=True):  # deepest first; only if empty
        try:
            os.rmdir(d)
        except OSError:
            pass
    return result


def _records(manifest: dict[str, Any], agent: str, scope: str,
             root: Path) -> list[tuple[str, dict[str, Any]]]:
    """This agent's install records for the scope (a project's: that project's), hook files
    before the config files whose trust entries follow them."""
    out = []
    for key, record in manifest.items():
        if not isinstance(record, dict) or record.get("agent") != agent or (
                record.get("scope") != scope):
            continue
        path = Path(record.get("path") or key.split("#")[0])
        if scope == "project" and record.get("project", None) not in (str(root), None):
            continue
        if scope == "project" and "project" not in record and not (
                path.is_relative_to(root) or path.name == ".claude.json"):
            continue  # a record of an older ctrlz, which kept no project: by its path
        out.append((key, record))
    return sorted(out, key=lambda kr: _target_of(kr[1], kr[0]).fmt != "json")


def _target_of(record: dict[str, Any], key: str) -> Target:
    path = Path(record.get("path") or key.split("#")[0])
    fmt = record.get("fmt") or ("toml" if path.suffix == ".toml" else "json")
    trust = record.get("trust_for")
    hooks_key = record.get("hooks_key")  # [] is a file whose root holds the events (Droid)
    return Target(path, fmt, hooks_key=["hooks"] if hooks_key is None else hooks_key,
                  server_key=record.get("server_key") or ["mcpServers"],
                  trust_for=Path(trust) if trust else None)


def _undo(target: Target, old: str | None, record: dict[str, Any],
          shifted: dict[Path, list[tuple[str, int, int]]]) -> tuple[str | None, list[str]]:
    if old is None:
        return None, []
    if target.fmt == "file":
        if hashlib.sha256(old.encode()).hexdigest() == record.get("sha256"):
            return None, []
        return old, ["changed since ctrlz wrote it; left as it is"]
    if target.fmt == "toml":
        edits.parse_toml(target.path, old)  # refuses a file that is not TOML
        added = record.get("toml", [])
        new, notes = edits.undo_toml(old, [added] if isinstance(added, str) else added)
        if target.trust_for is not None and shifted.get(target.trust_for):
            moved = codex_trust.rekey(new, target.trust_for, shifted[target.trust_for])
            if verify.toml_valid(moved):
                new = moved
            else:  # a trust key the user's hook moves to is taken (ours, changed and kept)
                notes.append("the trust entries of hooks after ctrlz's could not be moved with "
                             "them; trust those hooks again in Codex with /hooks")
        if record.get("created_file") and not new.strip():
            return None, notes
        return new, notes
    new, notes = edits.undo_json(target.path, old, record, target)
    verify.json_text(target.path, old, new)
    if record.get("created_file") and not edits.load(target.path, new):
        return None, notes  # we created the file and it holds nothing else
    return new, notes


def detect(project: str | os.PathLike[str] | None = None,
           home: Path | None = None) -> dict[str, str]:
    """The agents found on this machine or in this project: name -> why (what was found)."""
    root, home = Path(project or ".").resolve(), home or _home()
    out = {}
    for name, agent in AGENTS.items():
        marks = [root / m for m in agent.project_marks] + [home / m for m in agent.home_marks]
        if name == "codex" and os.environ.get("CODEX_HOME"):
            marks.append(Path(os.environ["CODEX_HOME"]))
        why = checks.found(agent.binaries, marks)
        if why:
            out[name] = why
    return out
