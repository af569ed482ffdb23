"""`ctrlz install` / `ctrlz uninstall` on settings files that already hold other hooks and
servers: merge, never clobber, show the diff, remove exactly what was added; --dry-run writes
nothing; --project and --user pick the right files. HOME points at a temporary directory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

CTRLZ = str(Path(sys.executable).parent / "ctrlz")

THEIR_HOOK = {"matcher": "Bash", "hooks": [{"type": "command", "command": "my-linter --fast"}]}
THEIR_STOP = [{"hooks": [{"type": "command", "command": "notify-send done"}]}]
THEIR_SERVER = {"command": "npx", "args": ["-y", "@acme/mcp"], "env": {"TOKEN": "${TOKEN}"}}


def run(*args: str, cwd: Path, ok: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([CTRLZ, *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def write_json(path: Path, doc: dict) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(doc, indent=2) + "\n"
    path.write_text(text)
    return text


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("HOME", str(h))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    return h


@pytest.fixture
def project(ws_dir: Path, home: Path) -> Path:
    return ws_dir


def test_claude_project_merges_shows_diff_and_uninstalls_exactly(project: Path) -> None:
    settings = project / ".claude" / "settings.json"
    mcp = project / ".mcp.json"
    s_before = write_json(settings, {"permissions": {"allow": ["Bash(ls:*)"]},
                                     "hooks": {"PreToolUse": [THEIR_HOOK], "Stop": THEIR_STOP}})
    m_before = write_json(mcp, {"mcpServers": {"acme": THEIR_SERVER}})
    out = run("install", "claude", cwd=project)
    assert f"+++ {settings}" in out.stdout and f"+++ {mcp}" in out.stdout
    assert "-m ctrlz.hooks claude" in out.stdout
    doc = json.loads(settings.read_text())
    assert doc["permissions"] == {"allow": ["Bash(ls:*)"]}
    assert doc["hooks"]["PreToolUse"][0] == THEIR_HOOK
    ours = doc["hooks"]["PreToolUse"][1]
    assert ours["matcher"] == "Write|Edit|MultiEdit|NotebookEdit|Bash"
    assert ours["hooks"][0]["command"].endswith("-m ctrlz.hooks claude")
    assert doc["hooks"]["Stop"] == THEIR_STOP
    assert set(doc["hooks"]) == {"PreToolUse", "PostToolUse", "UserPromptSubmit", "Stop",
                                 "SessionStart"}
    servers = json.loads(mcp.read_text())["mcpServers"]
    assert servers["acme"] == THEIR_SERVER
    assert servers["ctrlz"]["args"] == ["mcp"] and Path(servers["ctrlz"]["command"]).is_absolute()
    again = run("install", "claude", cwd=project)  # idempotent
    assert "Nothing to change" in again.stderr
    assert len(json.loads(settings.read_text())["hooks"]["PreToolUse"]) == 2
    run("uninstall", "claude", cwd=project)
    assert settings.read_text() == s_before
    assert mcp.read_text() == m_before


def test_dry_run_writes_nothing(project: Path, home: Path) -> None:
    settings = project / ".claude" / "settings.json"
    before = write_json(settings, {"hooks": {"PreToolUse": [THEIR_HOOK]}})
    out = run("install", "claude", "--dry-run", cwd=project)
    assert "+++" in out.stdout and "dry run" in out.stderr
    assert settings.read_text() == before
    assert not (project / ".mcp.json").exists()
    assert not (Path(__import__("os").environ["CTRLZ_HOME"]) / "installs.json").exists()
    data = json.loads(run("install", "claude", "--dry-run", "--json", cwd=project).stdout)
    assert data["dry_run"] and all(f["changed"] for f in data["files"])


def test_user_scope_uses_the_home_files(project: Path, home: Path) -> None:
    claude_json = home / ".claude.json"
    before = write_json(claude_json, {"numStartups": 7, "projects": {"/x": {"allowedTools": []}},
                                      "mcpServers": {"acme": THEIR_SERVER}})
    run("install", "claude", "--user", cwd=project)
    assert (home / ".claude" / "settings.json").is_file()
    doc = json.loads(claude_json.read_text())
    assert doc["numStartups"] == 7 and set(doc["mcpServers"]) == {"acme", "ctrlz"}
    assert not (project / ".claude").exists() and not (project / ".mcp.json").exists()
    run("uninstall", "claude", "--user", cwd=project)
    assert claude_json.read_text() == before
    assert not (home / ".claude" / "settings.json").exists()  # we created it; it is gone


def test_gemini_settings_merge(project: Path, home: Path) -> None:
    settings = home / ".gemini" / "settings.json"
    before = write_json(settings, {
        "general": {"checkpointing": {"enabled": True}},
        "hooks": {"BeforeTool": [{"matcher": "write_file", "hooks": [
            {"type": "command", "command": "./lint.sh", "timeout": 5000}]}]},
        "mcpServers": {"acme": THEIR_SERVER}})
    run("install", "gemini", "--user", cwd=project)
    doc = json.loads(settings.read_text())
    assert len(doc["hooks"]["BeforeTool"]) == 2
    assert doc["hooks"]["BeforeTool"][1]["matcher"] == "write_file|replace|run_shell_command"
    assert doc["hooks"]["BeforeTool"][1]["hooks"][0]["timeout"] == 30000  # ms for Gemini
    assert set(doc["mcpServers"]) == {"acme", "ctrlz"}
    run("uninstall", "gemini", "--user", cwd=project)
    assert settings.read_text() == before


def test_codex_project_toml_and_hooks(project: Path) -> None:
    config = project / ".codex" / "config.toml"
    config.parent.mkdir()
    before = ('model = "gpt-5-codex"\n\n[mcp_servers.acme]\ncommand = "npx"\n'
              'args = ["-y", "@acme/mcp"]\n')
    config.write_text(before)
    out = run("install", "codex", cwd=project)
    assert "[mcp_servers.ctrlz]" in out.stdout
    import tomllib

    data = tomllib.loads(config.read_text())
    assert set(data["mcp_servers"]) == {"acme", "ctrlz"} and data["model"] == "gpt-5-codex"
    hooks = json.loads((project / ".codex" / "hooks.json").read_text())["hooks"]
    assert hooks["PreToolUse"][0]["matcher"] == "apply_patch|Bash"
    run("uninstall", "codex", cwd=project)
    assert config.read_text() == before
    assert not (project / ".codex" / "hooks.json").exists()


def test_an_existing_ctrlz_server_is_kept(project: Path) -> None:
    mcp = project / ".mcp.json"
    mine = {"command": "/opt/ctrlz-dev/bin/ctrlz", "args": ["mcp", "--debug"]}
    before = write_json(mcp, {"mcpServers": {"ctrlz": mine}})
    out = run("install", "claude", cwd=project)
    assert "kept the existing MCP server 'ctrlz'" in out.stderr
    assert mcp.read_text() == before
    run("uninstall", "claude", cwd=project)
    assert mcp.read_text() == before


def test_unparseable_settings_are_left_alone(project: Path) -> None:
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text("{ // a comment\n}")
    proc = run("install", "claude", cwd=project, ok=False)
    assert proc.returncode == 2 and "not plain JSON" in proc.stderr
    assert settings.read_text() == "{ // a comment\n}"


def test_installed_hook_command_runs(project: Path) -> None:
    """The command string written into the settings works from any cwd and stays silent."""
    run("install", "claude", cwd=project)
    doc = json.loads((project / ".claude" / "settings.json").read_text())
    command = doc["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    (project / "f.txt").write_text("x")
    payload = {"session_id": "s", "cwd": str(project), "hook_event_name": "PreToolUse",
               "tool_name": "Write", "tool_use_id": "toolu_1",
               "tool_input": {"file_path": str(project / "f.txt"), "content": "y"}}
    proc = subprocess.run(["sh", "-c", command], input=json.dumps(payload), text=True,
                          capture_output=True, cwd="/")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    from ctrlz import toolcalls

    assert toolcalls.list_snapshots("s", workspace=project)[0]["captured_paths"] == ["f.txt"]


def test_uninstall_leaves_an_entry_the_user_changed(project: Path) -> None:
    settings = project / ".claude" / "settings.json"
    run("install", "claude", cwd=project)
    doc = json.loads(settings.read_text())
    doc["hooks"]["SessionStart"][0]["hooks"][0]["timeout"] = 99  # the user tuned our hook
    settings.write_text(json.dumps(doc, indent=2) + "\n")
    out = run("uninstall", "claude", cwd=project)
    assert "SessionStart was changed or removed since" in out.stderr
    left = json.loads(settings.read_text())["hooks"]
    assert list(left) == ["SessionStart"] and left["SessionStart"][0]["hooks"][0]["timeout"] == 99
