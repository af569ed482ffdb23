"""Codex's hook trust: what makes an installed Codex hook actually run.

Codex runs a non-managed hook only when the user's ``config.toml`` holds a matching
``[hooks.state."<abs hooks.json>:<event>:<group>:<handler>"] trusted_hash = "sha256:…"``; a hook
without one shows as "needs review" in the TUI's ``/hooks`` and is silently skipped by ``codex
exec``, which has no way to approve it. The hash is Codex's own ``version_for_toml`` of the
hook's normalized identity — ``{event_name, matcher?, hooks: [handler]}`` as canonical JSON
(keys sorted, no spaces) hashed with SHA-256 — so ``ctrlz install codex`` can write exactly
the entry the user would get by trusting the hook in ``/hooks``, for its own hooks and nothing
else. The trust keys are positional: :func:`rekey` moves the entries of the user's other hooks
when uninstalling ours shifts their positions, so they stay trusted.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from . import jsonc
from .specs import CODEX_EVENTS


def hook_hash(event: str, matcher: str | None, handler: dict[str, Any]) -> str:
    """``trusted_hash`` of one command handler of one matcher group, as Codex computes it."""
    normalized: dict[str, Any] = {"type": "command", "command": handler["command"],
                                  "timeout": int(handler.get("timeout", 600)),
                                  "async": bool(handler.get("async", False))}
    for key in ("statusMessage", "commandWindows"):
        if handler.get(key) is not None:
            normalized[key] = handler[key]
    identity: dict[str, Any] = {"event_name": CODEX_EVENTS[event], "hooks": [normalized]}
    if matcher is not None:
        identity["matcher"] = matcher
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def positions(hooks_text: str) -> list[tuple[str, int, int, dict[str, Any], str | None]]:
    """(event, group index, handler index, handler, matcher) of every command handler."""
    doc = jsonc.loads(hooks_text) if hooks_text.strip() else {}
    out = []
    for event in CODEX_EVENTS:
        groups = (doc.get("hooks") or {}).get(event) or []
        for g, group in enumerate(groups):
            if not isinstance(group, dict):
                continue
            for h, handler in enumerate(group.get("hooks") or []):
                if isinstance(handler, dict) and handler.get("type") == "command":
                    out.append((event, g, h, handler, group.get("matcher")))
    return out


def key(hooks_path: Path, event: str, group: int, handler: int) -> str:
    return f"{hooks_path}:{CODEX_EVENTS[event]}:{group}:{handler}"


def block(trust_key: str, trusted_hash: str) -> str:
    return (f"[hooks.state.{json.dumps(trust_key, ensure_ascii=False)}]\n"
            f"trusted_hash = {json.dumps(trusted_hash)}\n")


def trust_blocks(hooks_text: str, hooks_path: Path, commands: set[str],
                 config: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(blocks to append, notes) trusting the handlers whose command is in ``commands``."""
    hooks = config.get("hooks")
    state = hooks.get("state") if isinstance(hooks, dict) else None
    state = state if isinstance(state, dict) else {}  # not a table: the append check says so
    blocks, notes = [], []
    for event, g, h, handler, matcher in positions(hooks_text):
        if handler.get("command") not in commands:
            continue
        k, digest = key(hooks_path, event, g, h), hook_hash(event, matcher, handler)
        present = state.get(k)
        if isinstance(present, dict) and present.get("trusted_hash") == digest:
            continue
        if present is not None:
            notes.append(f"Codex already has a trust entry for {k} (another hook's); "
                         "trust ctrlz's hook in Codex with /hooks")
            continue
        blocks.append(block(k, digest))
    return blocks, notes


def moves(before: str, after: str) -> list[tuple[str, int, int]]:
    """(event, old group index, new group index) for groups that moved when ours went."""
    def groups(text: str) -> dict[str, list[str]]:
        doc = jsonc.loads(text) if text.strip() else {}
        hooks = doc.get("hooks") or {}
        return {e: [json.dumps(g, sort_keys=True) for g in hooks.get(e) or []]
                for e in CODEX_EVENTS}

    old, new = groups(before), groups(after)
    out = []
    for event in CODEX_EVENTS:
        j = 0
        for i, g in enumerate(old[event]):
            if j < len(new[event]) and new[event][j] == g:
                if i != j:
                    out.append((event, i, j))
                j += 1
    return out


def rekey(config_text: str, hooks_path: Path, shifted: list[tuple[str, int, int]]) -> str:
    """Move the trust entries of groups that changed position (lowest first, so a renamed key
    never meets one not yet moved)."""
    for event, old, new in sorted(shifted, key=lambda m: m[1]):
        prefix_old = json.dumps(f"{hooks_path}:{CODEX_EVENTS[event]}:{old}:")[:-1]
        prefix_new = json.dumps(f"{hooks_path}:{CODEX_EVENTS[event]}:{new}:")[:-1]
        pattern = re.compile(r"^(\s*\[\s*hooks\.state\.)" + re.escape(prefix_old), re.M)
        config_text = pattern.sub(lambda m, to=prefix_new: m.group(1) + to, config_text)
    return config_text
