"""The real agents, installed from their own npm packages once into ``.cache/agents/<name>``.

Each agent's tests ask for its binary with ``agent_bin("claude")``. The first call in a session
installs the pinned package with npm (``npm install --prefix .cache/agents/<name> <pkg>@<ver>``)
unless that exact version is already there, then checks that the binary runs. When npm is
missing, the install fails or times out, or the binary does not run, the agent's tests are
skipped with the reason; nothing else is. ``make agents`` does the same installs up front.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from .harness import Sandbox, make_sandbox

REPO = Path(__file__).resolve().parents[3]
CACHE = REPO / ".cache" / "agents"
INSTALL_TIMEOUT = 900  # seconds, per package: Claude's and Codex's carry ~200 MB binaries
VERSION_TIMEOUT = 60


@dataclass(frozen=True)
class Package:
    name: str     # ours: the ctrlz agent name, and the cache directory
    package: str  # npm package
    version: str  # pinned
    binary: str   # its bin name
    # the binary's path under node_modules, for a package that links none into .bin (Droid's
    # platform package: the @factory/cli wrapper only finds it through an install script)
    path: str | None = None
    # whether ``<binary> --version`` prints the version; an ACP agent that has no such flag
    # (claude-code-acp serves ACP on stdin whatever its arguments) is checked by its manifest
    version_flag: bool = True

    def executable(self, prefix: Path) -> Path:
        modules = prefix / "node_modules"
        return modules / self.path if self.path else modules / ".bin" / self.binary


# Pinned: the versions these tests were written and run against (see agent-hooks.md §9).
PACKAGES = {p.name: p for p in (
    Package("claude", "@anthropic-ai/claude-code", "2.1.330", "claude"),
    Package("gemini", "@google/gemini-cli", "0.61.0", "gemini"),
    Package("codex", "@openai/codex", "0.169.0", "codex"),
    Package("opencode", "opencode-ai", "1.18.33", "opencode"),
    Package("copilot", "@github/copilot", "1.0.102", "copilot"),
    # Droid: the Linux x64 build @factory/cli installs (its wrapper's install script is not run
    # by this npm; on another platform npm refuses the package and the test is skipped)
    Package("droid", "@factory/cli-linux-x64", "0.225.2", "droid",
            "@factory/cli-linux-x64/bin/droid"),
    Package("auggie", "@augmentcode/auggie", "0.36.0", "auggie"),
    # Zed's ACP adapter around the Claude Agent SDK (which bundles Claude Code's cli.js)
    Package("claude-acp", "@zed-industries/claude-code-acp", "0.16.2", "claude-code-acp",
            version_flag=False),
)}


def installed_version(pkg: Package) -> str | None:
    manifest = CACHE / pkg.name / "node_modules" / pkg.package / "package.json"
    try:
        return json.loads(manifest.read_text()).get("version")
    except (OSError, ValueError):
        return None


def install(pkg: Package) -> Path:
    """The package's binary, installed if needed; raises ``RuntimeError`` with the reason."""
    prefix = CACHE / pkg.name
    binary = pkg.executable(prefix)
    prefix.mkdir(parents=True, exist_ok=True)
    with open(prefix.parent / f".{pkg.name}.lock", "w") as lock:  # `make agents` in parallel
        fcntl.flock(lock, fcntl.LOCK_EX)
        if installed_version(pkg) != pkg.version or not binary.exists():
            npm = shutil.which("npm")
            if npm is None:
                raise RuntimeError("npm is not on PATH")
            argv = [npm, "install", "--prefix", str(prefix), f"{pkg.package}@{pkg.version}",
                    "--no-audit", "--no-fund"]
            try:
                proc = subprocess.run(argv, capture_output=True, text=True,
                                      timeout=INSTALL_TIMEOUT, stdin=subprocess.DEVNULL)
            except subprocess.TimeoutExpired:
                raise RuntimeError(f"`{' '.join(argv)}` took more than {INSTALL_TIMEOUT} s"
                                   ) from None
            if proc.returncode != 0 or installed_version(pkg) != pkg.version:
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
                raise RuntimeError(f"`{' '.join(argv)}` failed (exit {proc.returncode}): "
                                   + " | ".join(tail))
    if not pkg.version_flag:
        if not binary.exists():
            raise RuntimeError(f"{binary} is missing after the install")
        return binary
    try:
        proc = subprocess.run([str(binary), "--version"], capture_output=True, text=True,
                              timeout=VERSION_TIMEOUT, stdin=subprocess.DEVNULL,
                              env=_version_env(prefix))
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeError(f"{binary} --version did not run: {exc}") from None
    if proc.returncode != 0 or pkg.version not in proc.stdout + proc.stderr:
        raise RuntimeError(f"{binary} --version exited {proc.returncode}: "
                           f"{(proc.stdout + proc.stderr).strip()[:300]}")
    return binary


def _version_env(prefix: Path) -> dict[str, str]:
    """``--version`` in a scratch HOME: some agents write caches or config on any start."""
    home = prefix / ".version-home"
    home.mkdir(exist_ok=True)
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
            "LANG": "C.UTF-8", "COPILOT_AUTO_UPDATE": "false", "DISABLE_AUTOUPDATER": "1",
            "CODEX_HOME": str(home / ".codex"), "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_DATA_HOME": str(home / ".local/share"), "XDG_CACHE_HOME": str(home / ".cache")}


@pytest.fixture(scope="session")
def agent_bin() -> Callable[[str], Path]:
    """``agent_bin(name)``: that agent's binary, installed once per session; skips the test
    with the reason when it cannot be installed or does not run here."""
    found: dict[str, Path | str] = {}

    def get(name: str) -> Path:
        if name not in found:
            try:
                found[name] = install(PACKAGES[name])
            except RuntimeError as exc:
                found[name] = f"{PACKAGES[name].package}@{PACKAGES[name].version}: {exc}"
        got = found[name]
        if isinstance(got, str):
            pytest.skip(f"cannot install or run {got}")
        return got

    return get


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[Sandbox]:
    """A scratch project, HOME, agent config dirs and ctrlz store; every process an agent run
    left behind is killed at the end."""
    sb = make_sandbox(tmp_path)
    try:
        yield sb
    finally:
        sb.kill_leftovers()


if __name__ == "__main__":  # `make agents`: install every pinned package now
    import sys

    failed = 0
    for p in PACKAGES.values():
        try:
            print(f"{p.package}@{p.version}: {install(p)}")
        except RuntimeError as exc:
            failed += 1
            print(f"{p.package}@{p.version}: {exc}", file=sys.stderr)
    sys.exit(1 if failed else 0)
