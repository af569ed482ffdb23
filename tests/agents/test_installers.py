"""`ctrlz install` / `ctrlz uninstall` for every agent, on files that already hold the user's own
hooks, servers and comments: merge in place, show the diff, write the agent's format, nothing
machine-specific in a file a team commits, install twice = once, uninstall gives back the
original bytes; --dry-run writes nothing; --detect finds the agents. HOME is a temporary
directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from ctrlz.installers import codex_trust, jsonc

BIN = Path(sys.executable).parent
CTRLZ = str(BIN / "ctrlz")

THEIR_HOOK = {"matcher": "Bash", "hooks": [{"type": "command", "command": "my-linter --fast"}]}
THEIR_STOP = [{"hooks": [{"type": "command", "command": "notify-send done"}]}]
THEIR_SERVER = {"command": "npx", "args": ["-y", "@acme/mcp"], "env": {"TOKEN": "${TOKEN}"}}
AGENTS = ("claude", "gemini", "codex", "cursor", "copilot", "opencode")


def run(*args: str, cwd: Path, ok: bool = True, path: str | None = None
        ) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"PATH": path if path is not None else f"{BIN}:{os.environ['PATH']}"}
    proc = subprocess.run([CTRLZ, *args], cwd=cwd, capture_output=True, text=True, timeout=60,
                          env=env)
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def write_json(path: Path, doc: dict) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(doc, indent=2) + "\n"
    path.write_text(text)
    return text


def tree(*roots: Path) -> dict[str, bytes]:
    """Every file under ``roots`` (the store excluded), for before/after comparisons."""
    out = {}
    for root in roots:
        for dirpath, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d not in (".git",)]
            for name in files:
                p = Path(dirpath) / name
                out[str(p)] = p.read_bytes()
            for d in dirs:
                out[str(Path(dirpath) / d) + "/"] = b""
    return out


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("HOME", str(h))
    for var in ("CODEX_HOME", "COPILOT_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(var, raising=False)
    return h


@pytest.fixture
def project(ws_dir: Path, home: Path) -> Path:
    return ws_dir


def test_claude_project_goes_to_local_settings_and_uninstalls_exactly(project: Path,
                                                                      home: Path) -> None:
    shared = project / ".claude" / "settings.json"
    s_before = write_json(shared, {"permissions": {"allow": ["Bash(ls:*)"]},
                                   "hooks": {"PreToolUse": [THEIR_HOOK], "Stop": THEIR_STOP}})
    claude_json = home / ".claude.json"
    c_before = write_json(claude_json, {"numStartups": 3, "mcpServers": {"acme": THEIR_SERVER}})
    out = run("install", "claude", cwd=project)
    local = project / ".claude" / "settings.local.json"
    assert f"+++ {local}" in out.stdout and shared.read_text() == s_before  # committed: untouched
    hooks = json.loads(local.read_text())["hooks"]
    assert set(hooks) == {"SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse",
                          "PostToolUseFailure"}
    assert hooks["PreToolUse"][0]["matcher"] == "Write|Edit|MultiEdit|NotebookEdit|Bash|PowerShell"
    command = hooks["PreToolUse"][0]["hooks"][0]["command"]
    assert "exec ctrlz-hook claude" in command and sys.prefix not in local.read_text()
    doc = json.loads(claude_json.read_text())  # the local-scope MCP entry, as `claude mcp add`
    assert doc["projects"][str(project)]["mcpServers"]["ctrlz"] == {
        "type": "stdio", "command": "ctrlz", "args": ["mcp"]}
    assert doc["numStartups"] == 3 and doc["mcpServers"] == {"acme": THEIR_SERVER}
    first = tree(project, home)
    assert "Nothing to change" in run("install", "claude", cwd=project).stderr
    assert tree(project, home) == first  # installing twice changes nothing
    run("uninstall", "claude", cwd=project)
    assert shared.read_text() == s_before and claude_json.read_text() == c_before
    assert not local.exists()


def test_nothing_machine_specific_in_any_project_file(project: Path, home: Path) -> None:
    before = tree(project)
    for agent in AGENTS:
        run("install", agent, cwd=project)
    written = {p: b for p, b in tree(project).items() if p not in before and b}
    assert len(written) >= 8
    for path, body in written.items():
        assert sys.prefix.encode() not in body and str(home).encode() not in body, path
    for agent in AGENTS:
        run("uninstall", agent, cwd=project)
    assert tree(project) == before  # every file and directory the installs made is gone


def test_dry_run_writes_nothing(project: Path, home: Path) -> None:
    before = tree(project, home)
    out = run("install", "claude", "--dry-run", cwd=project)
    assert "+++" in out.stdout and "dry run" in out.stderr
    assert tree(project, home) == before
    assert not (Path(os.environ["CTRLZ_HOME"]) / "installs.json").exists()
    data = json.loads(run("install", "codex", "--dry-run", "--json", cwd=project).stdout)
    assert data["dry_run"] and all(f["changed"] for f in data["files"])
    trust = next(f for f in data["files"] if f["path"].startswith(str(home)))
    assert "trusted_hash" in trust["diff"]  # trust is computed from the hooks.json it would write
    assert tree(project, home) == before


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
    assert not (home / ".claude").exists()  # we made the directory and the file; both gone


GEMINI_JSONC = """{
  // my Gemini settings: keep these comments
  "general": {"checkpointing": {"enabled": true}},
  /* a hook of mine */
  "hooks": {
    "BeforeTool": [
      {"matcher": "write_file", "hooks": [{"type": "command", "command": "./lint.sh",
                                            "timeout": 5000}]},
    ],
  },
  "mcpServers": {"acme": {"command": "npx", "args": ["-y", "@acme/mcp"]}}
}
"""


def test_gemini_settings_with_comments_are_edited_in_place(project: Path, home: Path) -> None:
    settings = home / ".gemini" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(GEMINI_JSONC)
    run("install", "gemini", "--user", cwd=project)
    text = settings.read_text()
    assert "// my Gemini settings: keep these comments" in text and "/* a hook of mine */" in text
    doc = jsonc.loads(text)
    ours = doc["hooks"]["BeforeTool"][1]
    assert ours["matcher"] == "^(write_file|replace|run_shell_command)$"  # anchored regex
    assert ours["hooks"][0] | {"command": ""} == {"name": "ctrlz", "type": "command",
                                                  "command": "", "timeout": 30000}  # ms
    assert doc["hooks"]["AfterTool"][0]["matcher"] == "^(write_file|replace)$"
    assert set(doc["mcpServers"]) == {"acme", "ctrlz"}
    run("uninstall", "gemini", "--user", cwd=project)
    assert settings.read_text() == GEMINI_JSONC


def test_gemini_project_install_says_the_folder_is_not_trusted(project: Path,
                                                              home: Path) -> None:
    out = run("install", "gemini", cwd=project)
    assert "only in a trusted folder" in out.stderr and "usually committed" in out.stderr
    write_json(home / ".gemini" / "trustedFolders.json", {str(project): "TRUST_FOLDER"})
    run("uninstall", "gemini", cwd=project)
    assert "trusted folder" not in run("install", "gemini", cwd=project).stderr


def test_codex_hooks_are_trusted_and_uninstall_keeps_the_users_trust(project: Path,
                                                                     home: Path) -> None:
    user_config = home / ".codex" / "config.toml"
    user_config.parent.mkdir()
    config_before = 'model = "gpt-5.5"\n'
    user_config.write_text(config_before)
    project_config = project / ".codex" / "config.toml"
    project_config.parent.mkdir()
    p_before = 'model = "gpt-5-codex"\n\n[mcp_servers.acme]\ncommand = "npx"\nargs = ["x"]\n'
    project_config.write_text(p_before)
    out = run("install", "codex", cwd=project)
    assert "trusted project" in out.stderr  # project trust is the user's to give: only said
    hooks_json = project / ".codex" / "hooks.json"
    hooks = json.loads(hooks_json.read_text())["hooks"]
    assert hooks["PreToolUse"][0]["matcher"] == "apply_patch|Bash"
    data = tomllib.loads(project_config.read_text())
    assert set(data["mcp_servers"]) == {"acme", "ctrlz"}
    state = tomllib.loads(user_config.read_text())["hooks"]["state"]
    assert set(state) == {f"{hooks_json}:{e}:0:0" for e in
                          ("session_start", "user_prompt_submit", "pre_tool_use",
                           "post_tool_use")}
    pre = hooks["PreToolUse"][0]
    assert state[f"{hooks_json}:pre_tool_use:0:0"]["trusted_hash"] == codex_trust.hook_hash(
        "PreToolUse", pre["matcher"], pre["hooks"][0])
    # the user adds a hook after ours and trusts it in /hooks (the entry Codex writes)
    doc = json.loads(hooks_json.read_text())
    theirs = {"matcher": "Bash", "hooks": [{"type": "command", "command": "audit", "timeout": 5}]}
    doc["hooks"]["PreToolUse"].append(theirs)
    hooks_json.write_text(json.dumps(doc, indent=2) + "\n")
    their_hash = codex_trust.hook_hash("PreToolUse", "Bash", theirs["hooks"][0])
    with user_config.open("a") as f:
        f.write("\n" + codex_trust.block(f"{hooks_json}:pre_tool_use:1:0", their_hash))
    run("uninstall", "codex", cwd=project)
    assert project_config.read_text() == p_before
    left = json.loads(hooks_json.read_text())["hooks"]
    assert left == {"PreToolUse": [theirs]}  # theirs moved from group 1 to group 0 ...
    state = tomllib.loads(user_config.read_text())["hooks"]["state"]
    assert state == {f"{hooks_json}:pre_tool_use:0:0": {"trusted_hash": their_hash}}  # ... and
    assert user_config.read_text().startswith(config_before)  # its trust moved with it


def test_codex_hash_matches_codex_for_a_known_hook() -> None:
    """A hash computed by Codex's own normalization for a plain hook (canonical JSON of
    {event_name, hooks:[{async, command, timeout, type}]}, SHA-256): the shape ctrlz writes."""
    handler = {"type": "command", "command": "echo hi", "timeout": 5}
    expected = "sha256:" + __import__("hashlib").sha256(
        b'{"event_name":"stop","hooks":[{"async":false,"command":"echo hi","timeout":5,'
        b'"type":"command"}]}').hexdigest()
    from ctrlz.installers.specs import CODEX_EVENTS

    CODEX_EVENTS.setdefault("Stop", "stop")
    try:
        assert codex_trust.hook_hash("Stop", None, handler) == expected
    finally:
        CODEX_EVENTS.pop("Stop")


def test_cursor_copilot_opencode_formats(project: Path, home: Path) -> None:
    run("install", "cursor", cwd=project)
    cursor = json.loads((project / ".cursor" / "hooks.json").read_text())
    assert cursor["version"] == 1
    assert set(cursor["hooks"]) == {"sessionStart", "beforeSubmitPrompt", "preToolUse",
                                    "postToolUse", "postToolUseFailure"}
    assert cursor["hooks"]["preToolUse"][0]["matcher"] == (
        "Write|StrReplace|Delete|EditNotebook|Shell")
    assert json.loads((project / ".cursor" / "mcp.json").read_text())["mcpServers"]["ctrlz"]

    run("install", "copilot", cwd=project)
    local = json.loads((project / ".github" / "copilot" / "settings.local.json").read_text())
    pre = local["hooks"]["preToolUse"][0]
    assert pre["type"] == "command" and pre["timeoutSec"] == 30
    assert "exec ctrlz-hook copilot preToolUse" in pre["bash"]
    run("install", "copilot", "--user", cwd=project)
    user = json.loads((home / ".copilot" / "hooks" / "ctrlz.json").read_text())
    assert user["version"] == 1 and "postToolUseFailure" in user["hooks"]
    server = json.loads((home / ".copilot" / "mcp-config.json").read_text())["mcpServers"]
    assert server["ctrlz"]["tools"] == ["*"]

    run("install", "opencode", cwd=project)
    plugin = project / ".opencode" / "plugins" / "ctrlz.js"
    assert '"tool.execute.before"' in plugin.read_text()
    assert json.loads((project / "opencode.json").read_text())["mcp"]["ctrlz"] == {
        "type": "local", "command": ["ctrlz", "mcp"], "enabled": True}
    plugin.write_text(plugin.read_text() + "// mine now\n")  # the user changed our plugin
    out = run("uninstall", "opencode", cwd=project)
    assert "changed since ctrlz wrote it; left as it is" in out.stderr and plugin.exists()
    assert not (project / "opencode.json").exists()


def test_detect_installs_into_the_agents_found(project: Path, home: Path,
                                               tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "codex").write_text("#!/bin/sh\n")
    (bindir / "codex").chmod(0o755)
    (project / ".gemini").mkdir()
    path = f"{BIN}:{bindir}:/usr/bin:/bin"
    data = json.loads(run("install", "--detect", "--json", cwd=project, path=path).stdout)
    assert data["detected"] == {"gemini": str(project / ".gemini"), "codex": "codex on PATH"}
    assert [i["agent"] for i in data["installs"]] == ["gemini", "codex"]
    assert (project / ".gemini" / "settings.json").exists()
    assert (project / ".codex" / "hooks.json").exists()
    assert not (project / ".claude").exists()
    proc = run("install", cwd=project, ok=False)
    assert proc.returncode == 2 and "AGENT or --detect" in proc.stderr


def test_installed_hook_runs_from_path_and_is_harmless_without_ctrlz(project: Path) -> None:
    run("install", "claude", cwd=project)
    doc = json.loads((project / ".claude" / "settings.local.json").read_text())
    command = doc["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    (project / "f.txt").write_text("x")
    payload = json.dumps({
        "session_id": "s", "cwd": str(project), "hook_event_name": "PreToolUse",
        "transcript_path": "/t", "tool_name": "Write", "tool_use_id": "toolu_1",
        "tool_input": {"file_path": str(project / "f.txt"), "content": "y"}})
    env = os.environ | {"PATH": f"{BIN}:/usr/bin:/bin"}
    proc = subprocess.run(["sh", "-c", command], input=payload, text=True, capture_output=True,
                          cwd="/", env=env)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    from ctrlz import toolcalls

    assert toolcalls.list_snapshots("s", workspace=project)[0]["captured_paths"] == ["f.txt"]
    # a teammate without ctrlz: the hook says so and lets the tool run (exit 0, no stdout)
    env = os.environ | {"PATH": "/usr/bin:/bin"}
    proc = subprocess.run(["sh", "-c", command], input=payload, text=True, capture_output=True,
                          cwd="/", env=env)
    assert proc.returncode == 0 and proc.stdout == ""
    assert "ctrlz-hook is not on PATH" in proc.stderr
    out = run("install", "gemini", cwd=project, path="/usr/bin:/bin")
    assert "ctrlz-hook is not on PATH" in out.stderr


def test_unparseable_settings_are_left_alone(project: Path) -> None:
    settings = project / ".claude" / "settings.local.json"
    settings.parent.mkdir()
    settings.write_text("{ // a comment\n  \"a\": 1 \"b\": 2}")
    proc = run("install", "claude", cwd=project, ok=False)
    assert proc.returncode == 2 and "is not JSON" in proc.stderr and "line 2" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert settings.read_text() == "{ // a comment\n  \"a\": 1 \"b\": 2}"


def test_symlinked_settings_are_written_through(project: Path, home: Path) -> None:
    dotfiles = home / "dotfiles" / "gemini.json"
    dotfiles.parent.mkdir()
    before = write_json(dotfiles, {"general": {}})
    (home / ".gemini").mkdir()
    (home / ".gemini" / "settings.json").symlink_to(dotfiles)
    run("install", "gemini", "--user", cwd=project)
    assert (home / ".gemini" / "settings.json").is_symlink()
    assert "ctrlz" in json.loads(dotfiles.read_text())["mcpServers"]
    run("uninstall", "gemini", "--user", cwd=project)
    assert dotfiles.read_text() == before


def test_uninstall_leaves_an_entry_the_user_changed(project: Path) -> None:
    settings = project / ".claude" / "settings.local.json"
    run("install", "claude", cwd=project)
    doc = json.loads(settings.read_text())
    doc["hooks"]["SessionStart"][0]["hooks"][0]["timeout"] = 99  # the user tuned our hook
    settings.write_text(json.dumps(doc, indent=2) + "\n")
    out = run("uninstall", "claude", cwd=project)
    assert "SessionStart was changed or removed since" in out.stderr
    left = json.loads(settings.read_text())["hooks"]
    assert list(left) == ["SessionStart"] and left["SessionStart"][0]["hooks"][0]["timeout"] == 99


def test_uninstall_removes_what_an_older_ctrlz_put_in_shared_files(project: Path,
                                                                  home: Path) -> None:
    """Earlier versions wrote absolute venv paths into .claude/settings.json and .mcp.json;
    their install records still let `ctrlz uninstall claude` take them out."""
    shared = project / ".claude" / "settings.json"
    old_hook = {"matcher": "Bash", "hooks": [{"type": "command",
                                              "command": "/old/venv/bin/python -m ctrlz.hooks "
                                                         "claude", "timeout": 30}]}
    write_json(shared, {"hooks": {"PreToolUse": [THEIR_HOOK, old_hook]}})
    manifest = Path(os.environ["CTRLZ_HOME"]) / "installs.json"
    manifest.parent.mkdir(parents=True, exist_ok=True)
    manifest.write_text(json.dumps({str(shared): {
        "agent": "claude", "scope": "project", "hooks": [{"event": "PreToolUse",
                                                          "group": old_hook}],
        "servers": {}, "created": [], "created_file": False}}))
    run("uninstall", "claude", cwd=project)
    assert json.loads(shared.read_text()) == {"hooks": {"PreToolUse": [THEIR_HOOK]}}


@pytest.mark.parametrize("agent", AGENTS)
def test_every_agent_installs_twice_as_once_and_uninstalls_to_nothing(
        agent: str, project: Path, home: Path) -> None:
    before = tree(project, home)
    run("install", agent, cwd=project)
    once = tree(project, home)
    assert once != before
    run("install", agent, cwd=project)
    assert tree(project, home) == once
    run("uninstall", agent, cwd=project)
    assert tree(project, home) == before


CODEX_INLINE = {
    "project": (".codex/config.toml", 'mcp_servers = { other = { command = "x" } }\n',
                "mcp_servers as an inline table"),
    "user": (".codex/config.toml", 'model = "m"\nhooks = { state = {} }\n',
             "hooks as an inline table"),
}


@pytest.mark.parametrize("where", CODEX_INLINE)
def test_a_codex_config_whose_table_is_inline_is_refused_and_no_file_is_written(
        where: str, project: Path, home: Path) -> None:
    """TOML allows no [mcp_servers.ctrlz] or [hooks.state."…"] section after an inline
    mcp_servers / hooks table: appending one made a file Codex cannot load."""
    rel, text, said = CODEX_INLINE[where]
    config = (project if where == "project" else home) / rel
    config.parent.mkdir()
    config.write_text(text)
    before = tree(project, home)
    proc = run("install", "codex", cwd=project, ok=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert said in proc.stderr and "nothing was changed" in proc.stderr
    assert tree(project, home) == before  # hooks.json and the other config.toml too
    assert not (Path(os.environ["CTRLZ_HOME"]) / "installs.json").exists()


def test_an_install_refused_for_one_file_writes_none_of_the_others(project: Path,
                                                                   home: Path) -> None:
    (home / ".claude.json").write_text('{"numStartups": 3,\n')  # a truncated state file
    before = tree(project, home)
    proc = run("install", "claude", cwd=project, ok=False)
    assert proc.returncode == 2 and "is not JSON" in proc.stderr
    assert tree(project, home) == before  # no .claude/settings.local.json
    assert not (Path(os.environ["CTRLZ_HOME"]) / "installs.json").exists()


def test_an_install_whose_write_fails_midway_puts_back_the_files_it_wrote(
        project: Path, home: Path) -> None:
    """~/.claude.json, the last file, cannot be written (a file-size limit: EFBIG, as a full
    disk gives ENOSPC) after .claude/settings.local.json was: that one is taken back."""
    import resource
    import signal

    big = {"numStartups": 3, "cachedChangelog": "x" * 256 * 1024}  # it grows large in use
    write_json(home / ".claude.json", big)
    run("init", cwd=project)
    before = tree(project, home)

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a signal
        resource.setrlimit(resource.RLIMIT_FSIZE, (128 * 1024, 128 * 1024))

    env = os.environ | {"PATH": f"{BIN}:{os.environ['PATH']}"}
    proc = subprocess.run([CTRLZ, "install", "claude"], cwd=project, capture_output=True,
                          text=True, timeout=60, env=env, preexec_fn=limit)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert f"cannot write {home / '.claude.json'}" in proc.stderr
    assert "nothing was changed" in proc.stderr
    assert tree(project, home) == before  # no .claude/settings.local.json, no .claude/
    manifest = Path(os.environ["CTRLZ_HOME"]) / "installs.json"
    assert json.loads(manifest.read_text()) == {}
    run("install", "claude", cwd=project)  # without the limit, all of it goes in
    run("uninstall", "claude", cwd=project)
    assert tree(project, home) == before


def test_uninstall_keeps_a_codex_section_the_user_wrote_keys_under(project: Path,
                                                                  home: Path) -> None:
    """Taking our [mcp_servers.ctrlz] block out would move a key the user added below it into
    the table before it; the block stays, and is listed."""
    config = project / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text('model = "m"\n')
    run("install", "codex", cwd=project)
    config.write_text(config.read_text() + "startup_timeout_sec = 20\n")
    out = run("uninstall", "codex", cwd=project)
    assert "[mcp_servers.ctrlz] was changed since; left as it is" in out.stderr
    data = tomllib.loads(config.read_text())
    assert data == {"model": "m", "mcp_servers": {"ctrlz": {
        "command": "ctrlz", "args": ["mcp"], "startup_timeout_sec": 20}}}
