"""What stands between a written hook and a running one, said at install time.

A hook file that is written is not yet a hook that runs: ``ctrlz-hook`` must be on the PATH the
agent gives its hooks, Gemini CLI runs project hooks only in a trusted folder, Codex reads a
project's ``.codex/`` only when the project is trusted, and a local settings file that git does
not ignore may still get committed. ctrlz does not change any of these for the user (trusting a
folder is the user's decision); it checks them and says what to do.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from . import jsonc
from .specs import HOOK_SCRIPT, Target, codex_home, droid_dir


def path_notes() -> list[str]:
    found = shutil.which(HOOK_SCRIPT)
    beside = Path(sys.executable).parent / HOOK_SCRIPT
    if found is None:
        where = f" (it is in {beside.parent}: add that to PATH)" if beside.exists() else ""
        return [f"{HOOK_SCRIPT} is not on PATH{where}; until it is, the hooks only print a "
                "warning and the agent runs unprotected. `pipx install ctrlz` puts it there "
                "for every shell"]
    if beside.exists() and Path(found).resolve() != beside.resolve():
        return [f"{HOOK_SCRIPT} on PATH is {found}, not this installation's {beside}; the "
                "hooks will run that one"]
    return []


def _git_ignored(project: Path, path: Path) -> bool | None:
    """Whether git ignores ``path``; None when ``project`` is not a git work tree."""
    if not (project / ".git").exists():
        return None
    try:
        proc = subprocess.run(["git", "-C", str(project), "check-ignore", "-q", str(path)],
                              capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.returncode == 0 if proc.returncode in (0, 1) else None


def gemini_trusted(project: Path, home: Path) -> bool | None:
    """Gemini's folder trust for ``project`` (True/False), or None when trust is not set up."""
    try:
        rules = json.loads((home / ".gemini" / "trustedFolders.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(rules, dict):
        return None
    verdict = None
    for folder, level in rules.items():
        here = Path(folder)
        if level == "TRUST_FOLDER" and here == project:
            return True
        if level == "TRUST_PARENT" and here == project.parent:
            return True
        if level == "TRUST_FOLDER" and here in project.parents:
            verdict = True
        if level == "DO_NOT_TRUST" and here == project:
            return False
    return verdict if verdict is not None else False


def codex_project_trusted(project: Path, home: Path) -> bool:
    import tomllib

    try:
        config = tomllib.loads((codex_home(home) / "config.toml").read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return False
    projects = config.get("projects") or {}
    for here in (project, *project.parents):
        entry = projects.get(str(here))
        if isinstance(entry, dict) and entry.get("trust_level") == "trusted":
            return True
    return False


def droid_trusted(project: Path, home: Path) -> bool:
    """Whether Droid trusts ``project``: its trust root (the git root, else the project) lies
    in a folder listed under ``trustedFolders`` in the user's ``~/.factory/settings.json`` (or
    ``settings.local.json``), as Droid 0.225 checks it. Its interactive start asks once and
    runs no hook before the answer; ``droid exec`` does not ask."""
    root = next((d for d in (project, *project.parents) if (d / ".git").exists()), project)
    folders: list[Path] = []
    for name in ("settings.json", "settings.local.json"):
        try:
            doc = jsonc.loads((droid_dir("user", project, home) / name).read_text())
        except (OSError, ValueError):  # JsoncError is a ValueError
            continue
        trusted = doc.get("trustedFolders") if isinstance(doc, dict) else None
        if isinstance(trusted, dict):
            folders += [Path(os.path.expanduser(f)) for f in trusted]
    return any(root == f or f in root.parents for f in folders)


def notes(agent: str, scope: str, project: Path, home: Path, targets: list[Target]) -> list[str]:
    out = path_notes()
    if scope == "project":
        shared = [str(t.path.relative_to(project)) for t in targets if t.committed
                  and t.path.is_relative_to(project)]
        if shared:
            out.append(f"{', '.join(shared)} {'is' if len(shared) == 1 else 'are'} usually "
                       "committed: what ctrlz wrote there is portable (no path of this machine; "
                       "where ctrlz is missing it does nothing)")
        local_file = {"claude": ".claude/settings.local.json",
                      "auggie": ".augment/settings.local.json"}.get(agent)
        if local_file:
            local = project / local_file
            if _git_ignored(project, local) is False:
                out.append(f"git does not ignore {local.relative_to(project)}; add it to "
                           ".gitignore to keep it out of commits")
        if agent == "gemini" and not gemini_trusted(project, home):
            out.append("Gemini CLI runs project hooks only in a trusted folder: trust "
                       f"{project} when Gemini asks (or with /permissions)")
        if agent == "droid" and not droid_trusted(project, home):
            out.append(f"Droid asks on its first interactive start in {project} whether to trust "
                       "the folder, and runs no hook until you do (droid exec does not ask)")
        if agent == "codex" and not codex_project_trusted(project, home):
            out.append(f"Codex reads .codex/ only in a trusted project: trust {project} when "
                       f"Codex asks, or add [projects.{json.dumps(str(project))}] trust_level = "
                       f"\"trusted\" to {codex_home(home) / 'config.toml'}")
    if agent == "codex":
        out.append("ctrlz's Codex hooks are marked trusted in your Codex config (hook trust); "
                   "/hooks in Codex lists them")
    if agent == "auggie":
        out.append("Auggie runs hooks only where the Augment service turns them on for your "
                   "account (its enableHooks flag); /hooks in Auggie lists them when it does")
    return out


def found(agent_binaries: tuple[str, ...], marks: list[Path]) -> str | None:
    """Why an agent counts as present here: its program on PATH, or its files."""
    for name in agent_binaries:
        if shutil.which(name):
            return f"{name} on PATH"
    for mark in marks:
        if os.path.lexists(mark):
            return str(mark)
    return None
