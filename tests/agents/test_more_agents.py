"""Factory Droid and Augment Auggie: `ctrlz install` / `uninstall` round trips, their hook
payloads exactly as the agents' packages send them, and the written settings against the
agents' own hook schemas.

Where each shape comes from (the packages pinned in tests/agents/real/conftest.py):

- **Droid**: the ``droid`` binary of ``@factory/cli-linux-x64`` 0.225.2, a Bun executable whose
  JS is readable in it. The hook payloads are built in ``vs()`` (PreToolUse), the tool executor
  (PostToolUse, success only), ``buildSessionHookInput`` (SessionStart) and
  ``executeUserPromptSubmitHooks``; the settings schema is the zod ``xl`` / ``Ye`` / ``We``; the
  files per folder are read by ``loadHooks`` (``hooks.json`` merged over ``settings.json``'s
  ``hooks``, event by event; ``hooks/hooks.json`` while ``hooks.json`` is missing).
- **Auggie**: ``augment.mjs`` of ``@augmentcode/auggie`` 0.36.0. Payloads: ``B7n`` (tool events),
  ``T7n`` (SessionStart/End), ``k7n`` (PromptSubmit); schema: the zod ``jnt`` (strict),
  ``znt``, ``O6``, ``Hnt``; files: ``cle()`` (``~/.augment/settings.json``,
  ``.augment/settings.local.json``, ``.augment/settings.json``).

The real binaries run in tests/agents/real (test_droid.py, test_auggie.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from ctrlz.hooks import auggie as auggie_reader
from ctrlz.hooks import droid as droid_reader
from ctrlz.installers import jsonc
from ctrlz.workspace import Workspace

BIN = Path(sys.executable).parent
CTRLZ = str(BIN / "ctrlz")
CACHE = Path(__file__).resolve().parents[2] / ".cache" / "agents"
DROID_BINARY = CACHE / "droid" / "node_modules" / "@factory" / "cli-linux-x64" / "bin" / "droid"
AUGGIE_BUNDLE = CACHE / "auggie" / "node_modules" / "@augmentcode" / "auggie" / "augment.mjs"

THEIR_SERVER = {"command": "npx", "args": ["-y", "@acme/mcp"]}


# -- helpers -----------------------------------------------------------------------------------


def run(*args: str, cwd: Path, ok: bool = True, path: str | None = None
        ) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"PATH": path if path is not None else f"{BIN}:{os.environ['PATH']}"}
    proc = subprocess.run([CTRLZ, *args], cwd=cwd, capture_output=True, text=True, timeout=60,
                          env=env)
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def tree(*roots: Path) -> dict[str, bytes]:
    """Every file and directory under ``roots``, for before/after comparisons."""
    out = {}
    for root in roots:
        for dirpath, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d != ".git"]
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
    monkeypatch.delenv("FACTORY_HOME_OVERRIDE", raising=False)
    return h


@pytest.fixture
def project(ws_dir: Path, home: Path) -> Path:
    return ws_dir


def command_of(group: dict) -> str:
    return group["hooks"][0]["command"]


# -- the agents' own hook schemas --------------------------------------------------------------

# Droid 0.225.2, transcribed from its zod schema (text found in the binary, checked below when
# the package is cached): handler ``We``, group ``Ye``, hooks object ``xl``. zod drops unknown
# keys without a word, so a misspelt event or field would be a hook that never runs: here they
# are errors (additionalProperties false). Timeout: seconds (``setTimeout(..., r*1000)``).
DROID_SOURCE = ('We=n({type:f("command"),command:H(),timeout:l().optional(),'
                'preserveRiskLevel:E().optional()}),Ye=n({matcher:H().optional(),'
                'commandRegex:H().optional(),hooks:c(We)}),m=c(Ye),'
                'xl=n({[VL.enum.PreToolUse]:m.optional(),[VL.enum.PostToolUse]:m.optional(),'
                '[VL.enum.Notification]:m.optional(),[VL.enum.UserPromptSubmit]:m.optional(),'
                '[VL.enum.Stop]:m.optional(),[VL.enum.SubagentStop]:m.optional(),'
                '[VL.enum.PreCompact]:m.optional(),[VL.enum.SessionStart]:m.optional(),'
                '[VL.enum.SessionEnd]:m.optional(),hooksDisabled:E().optional(),'
                'showHookOutput:E().optional()})')
_DROID_HANDLER = {"type": "object", "additionalProperties": False, "required": ["type", "command"],
                  "properties": {"type": {"const": "command"}, "command": {"type": "string"},
                                 "timeout": {"type": "number"},
                                 "preserveRiskLevel": {"type": "boolean"}}}
_DROID_GROUP = {"type": "object", "additionalProperties": False, "required": ["hooks"],
                "properties": {"matcher": {"type": "string"}, "commandRegex": {"type": "string"},
                               "hooks": {"type": "array", "items": _DROID_HANDLER}}}
DROID_HOOKS_SCHEMA = {
    "type": "object", "additionalProperties": False,
    "properties": {**{e: {"type": "array", "items": _DROID_GROUP} for e in (
        "PreToolUse", "PostToolUse", "Notification", "UserPromptSubmit", "Stop", "SubagentStop",
        "PreCompact", "SessionStart", "SessionEnd")},
        "hooksDisabled": {"type": "boolean"}, "showHookOutput": {"type": "boolean"}}}
# Droid's MCP server entry (``_t``, stdio)
DROID_MCP_SOURCE = ('_t=n({type:f("stdio").optional().default("stdio"),command:H(),'
                    'args:c(H()).optional().default([]),env:U(H(),H()).optional()})')
DROID_MCP_SCHEMA = {"type": "object", "required": ["command"], "properties": {
    "type": {"const": "stdio"}, "command": {"type": "string"},
    "args": {"type": "array", "items": {"type": "string"}}}}

# Auggie 0.36.0 (augment.mjs): ``jnt`` is ``.strict()`` (an unknown event fails the file);
# unknown keys of a group or handler are warned about and ignored (``Sgi``): errors here.
# Tool events take a regex ``matcher``; lifecycle events none. Timeout: ms (``xao(r,
# t.timeout||6e4)``).
AUGGIE_SOURCE = ('Hnt=te.object({type:te.literal("command"),command:te.string().min(1,'
                 '"Command must be a non-empty string"),args:te.array(te.string()).optional(),'
                 'timeout:te.number().positive("Timeout must be a positive number").optional()})')
AUGGIE_EVENTS_SOURCE = ('jnt=te.object({PreToolUse:te.array(znt).optional(),'
                        'PostToolUse:te.array(znt).optional(),SessionStart:te.array(O6).optional(),'
                        'SessionEnd:te.array(O6).optional(),Stop:te.array(O6).optional(),'
                        'Notification:te.array(O6).optional(),'
                        'PromptSubmit:te.array(O6).optional()}).strict()')
_AUGGIE_HANDLER = {"type": "object", "additionalProperties": False,
                   "required": ["type", "command"],
                   "properties": {"type": {"const": "command"},
                                  "command": {"type": "string", "minLength": 1},
                                  "args": {"type": "array", "items": {"type": "string"}},
                                  "timeout": {"type": "number", "exclusiveMinimum": 0}}}
_AUGGIE_META = {"type": "object", "additionalProperties": False, "properties": {
    k: {"type": "boolean"} for k in ("includeConversationData", "includeMCPMetadata",
                                     "includeUserContext")}}
_AUGGIE_TOOL_GROUP = {"type": "object", "additionalProperties": False, "required": ["hooks"],
                      "properties": {"matcher": {"type": "string"}, "metadata": _AUGGIE_META,
                                     "hooks": {"type": "array", "items": _AUGGIE_HANDLER}}}
_AUGGIE_GROUP = {"type": "object", "additionalProperties": False, "required": ["hooks"],
                 "properties": {"metadata": _AUGGIE_META,
                                "hooks": {"type": "array", "items": _AUGGIE_HANDLER}}}
AUGGIE_HOOKS_SCHEMA = {
    "type": "object", "additionalProperties": False,
    "properties": {"PreToolUse": {"type": "array", "items": _AUGGIE_TOOL_GROUP},
                   "PostToolUse": {"type": "array", "items": _AUGGIE_TOOL_GROUP},
                   **{e: {"type": "array", "items": _AUGGIE_GROUP} for e in (
                       "SessionStart", "SessionEnd", "Stop", "Notification", "PromptSubmit")}}}
AUGGIE_MCP_SOURCE = ('QI=te.object({name:te.string().optional(),title:te.string().optional(),'
                     'type:te.enum(["stdio","http","sse"]).optional(),'
                     'command:te.string().optional(),')
AUGGIE_MCP_SCHEMA = {"type": "object", "properties": {
    "type": {"enum": ["stdio", "http", "sse"]}, "command": {"type": "string"},
    "args": {"type": "array", "items": {"type": "string"}}}}


def test_droid_settings_match_droids_hook_schema(project: Path, home: Path) -> None:
    run("install", "droid", cwd=project)
    settings = json.loads((project / ".factory" / "settings.json").read_text())
    jsonschema.validate(settings["hooks"], DROID_HOOKS_SCHEMA)
    for group in settings["hooks"]["PreToolUse"] + settings["hooks"]["PostToolUse"]:
        assert group["hooks"][0]["timeout"] == 30  # seconds
    servers = json.loads((project / ".factory" / "mcp.json").read_text())["mcpServers"]
    jsonschema.validate(servers["ctrlz"], DROID_MCP_SCHEMA)
    bad = {"PostToolUseFailure": settings["hooks"]["PostToolUse"]}  # Claude's, not Droid's
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, DROID_HOOKS_SCHEMA)


def test_auggie_settings_match_auggies_hook_schema(project: Path, home: Path) -> None:
    run("install", "auggie", cwd=project)
    settings = json.loads((project / ".augment" / "settings.local.json").read_text())
    jsonschema.validate(settings["hooks"], AUGGIE_HOOKS_SCHEMA)
    for groups in settings["hooks"].values():
        assert groups[0]["hooks"][0]["timeout"] == 30000  # ms
    jsonschema.validate(settings["mcpServers"]["ctrlz"], AUGGIE_MCP_SCHEMA)
    bad = {"UserPromptSubmit": settings["hooks"]["PromptSubmit"]}  # Claude's name, not Auggie's
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, AUGGIE_HOOKS_SCHEMA)


# -- installers ----------------------------------------------------------------------------------

DROID_SETTINGS = """{
  // my Droid settings: the comments stay
  "model": "claude-sonnet-4-5",
  "hooks": {
    "PreToolUse": [
      {"matcher": "Execute", "hooks": [{"type": "command", "command": "./audit.sh"}]},
    ],
  },
}
"""


def test_droid_project_install_round_trip(project: Path, home: Path) -> None:
    settings = project / ".factory" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(DROID_SETTINGS)
    mcp = project / ".factory" / "mcp.json"
    mcp.write_text(json.dumps({"mcpServers": {"acme": THEIR_SERVER}}, indent=2) + "\n")
    mcp_before = mcp.read_text()
    before = tree(project, home)

    out = run("install", "droid", "--dry-run", cwd=project)
    assert f"+++ {settings}" in out.stdout and "dry run" in out.stderr
    assert tree(project, home) == before
    data = json.loads(run("install", "droid", "--dry-run", "--json", cwd=project).stdout)
    assert data["dry_run"] and {f["path"] for f in data["files"]} == {str(settings), str(mcp)}
    assert all(f["changed"] and not f["created"] for f in data["files"])
    assert tree(project, home) == before

    data = json.loads(run("install", "droid", "--json", cwd=project).stdout)
    assert data["action"] == "install" and data["agent"] == "droid"
    assert any("usually committed" in n for n in data["notes"])
    text = settings.read_text()
    assert "// my Droid settings: the comments stay" in text
    doc = jsonc.loads(text)
    pre = doc["hooks"]["PreToolUse"]
    assert pre[0]["hooks"][0]["command"] == "./audit.sh"  # theirs first, ours appended
    assert pre[1]["matcher"] == "^(Create|Edit|MultiEdit|ApplyPatch|Execute|Script)$"
    assert "exec ctrlz-hook droid" in command_of(pre[1])
    assert doc["hooks"]["PostToolUse"][0]["matcher"] == "^(Create|Edit|MultiEdit|ApplyPatch)$"
    assert "matcher" not in doc["hooks"]["SessionStart"][0]
    assert set(doc["hooks"]) == {"PreToolUse", "PostToolUse", "SessionStart",
                                 "UserPromptSubmit"}
    assert sys.prefix not in text and str(home) not in text
    servers = json.loads(mcp.read_text())["mcpServers"]
    assert servers == {"acme": THEIR_SERVER,
                       "ctrlz": {"type": "stdio", "command": "ctrlz", "args": ["mcp"]}}
    first = tree(project, home)
    assert "Nothing to change" in run("install", "droid", cwd=project).stderr
    assert tree(project, home) == first  # installing twice changes nothing

    run("uninstall", "droid", cwd=project)
    assert settings.read_text() == DROID_SETTINGS and mcp.read_text() == mcp_before


def test_droid_hooks_go_where_droid_reads_them(project: Path, home: Path) -> None:
    """A folder's ``hooks.json`` overrides ``settings.json``'s hooks event by event in Droid:
    ours join the user's ``hooks.json`` (events at its root), the older ``hooks/hooks.json``
    while there is no ``hooks.json``, and no new ``hooks.json`` is ever made."""
    factory = project / ".factory"
    legacy = factory / "hooks" / "hooks.json"
    legacy.parent.mkdir(parents=True)
    legacy_before = json.dumps({"Stop": [{"hooks": [{"type": "command",
                                                     "command": "say done"}]}]}, indent=2)
    legacy.write_text(legacy_before)
    run("install", "droid", cwd=project)
    doc = json.loads(legacy.read_text())
    assert set(doc) == {"Stop", "SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse"}
    jsonschema.validate(doc, DROID_HOOKS_SCHEMA)
    assert not (factory / "settings.json").exists() and not (factory / "hooks.json").exists()
    run("uninstall", "droid", cwd=project)
    assert legacy.read_text() == legacy_before and not (factory / "mcp.json").exists()

    hooks_json = factory / "hooks.json"
    hooks_before = "{\n  \"hooksDisabled\": false\n}\n"
    hooks_json.write_text(hooks_before)
    run("install", "droid", cwd=project)
    doc = json.loads(hooks_json.read_text())
    assert doc["hooksDisabled"] is False and "PreToolUse" in doc and "hooks" not in doc
    assert json.loads(legacy.read_text()) == json.loads(legacy_before)  # not read any more
    assert "Nothing to change" in run("install", "droid", cwd=project).stderr
    run("uninstall", "droid", cwd=project)
    assert hooks_json.read_text() == hooks_before


def test_droid_user_install_and_trust(project: Path, home: Path, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    run("install", "droid", "--user", cwd=project)
    assert (home / ".factory" / "settings.json").is_file()
    assert (home / ".factory" / "mcp.json").is_file() and not (project / ".factory").exists()
    run("uninstall", "droid", "--user", cwd=project)
    assert not (home / ".factory").exists()

    override = tmp_path / "factory-home"  # Droid's own FACTORY_HOME_OVERRIDE moves ~/.factory
    monkeypatch.setenv("FACTORY_HOME_OVERRIDE", str(override))
    run("install", "droid", "--user", cwd=project)
    assert (override / ".factory" / "settings.json").is_file()
    run("uninstall", "droid", "--user", cwd=project)
    assert not (override / ".factory").exists()
    monkeypatch.delenv("FACTORY_HOME_OVERRIDE")

    # the trust Droid's interactive start asks for, kept in the user's settings (flat, JSONC)
    assert "Droid asks" in run("install", "droid", "--dry-run", cwd=project).stderr
    user = home / ".factory" / "settings.json"
    user.parent.mkdir()
    trusted = json.dumps({str(project.parent): {"trustedAt": "x"}})
    user.write_text(f'{{\n  // trusted by droid\n  "trustedFolders": {trusted}\n}}\n')
    assert "Droid asks" not in run("install", "droid", "--dry-run", cwd=project).stderr


def test_auggie_project_install_round_trip(project: Path, home: Path) -> None:
    local = project / ".augment" / "settings.local.json"
    shared = project / ".augment" / "settings.json"
    shared.parent.mkdir()
    shared_before = json.dumps({"hooks": {"Stop": [{"hooks": [
        {"type": "command", "command": "notify"}]}]}}, indent=2) + "\n"
    shared.write_text(shared_before)
    before = tree(project, home)
    data = json.loads(run("install", "auggie", "--dry-run", "--json", cwd=project).stdout)
    assert [(f["path"], f["created"]) for f in data["files"]] == [(str(local), True)]
    assert tree(project, home) == before

    out = run("install", "auggie", cwd=project)
    assert f"+++ {local}" in out.stdout and "enableHooks" in out.stderr
    assert shared.read_text() == shared_before  # the committed file is not touched
    doc = json.loads(local.read_text())
    hooks = doc["hooks"]
    assert set(hooks) == {"SessionStart", "PromptSubmit", "PreToolUse", "PostToolUse", "Stop"}
    assert hooks["PreToolUse"][0]["matcher"] == (
        "^(save-file|str-replace-editor|remove-files|apply_patch|write|edit|launch-process|"
        "write-process|bash)$")
    assert "matcher" not in hooks["PromptSubmit"][0]
    assert "exec ctrlz-hook auggie" in command_of(hooks["PreToolUse"][0])
    assert doc["mcpServers"]["ctrlz"] == {"type": "stdio", "command": "ctrlz", "args": ["mcp"]}
    first = tree(project, home)
    assert "Nothing to change" in run("install", "auggie", cwd=project).stderr
    assert tree(project, home) == first
    run("uninstall", "auggie", cwd=project)
    assert tree(project, home) == before  # the local file and nothing else was ours


def test_auggie_user_install_keeps_the_users_settings(project: Path, home: Path) -> None:
    user = home / ".augment" / "settings.json"
    user.parent.mkdir()
    acme = json.dumps(THEIR_SERVER)
    user_before = ('{\n  "model": "sonnet",\n'
                   f'  "mcpServers": {{"acme": {acme}}},\n  "toolPermissions": []\n}}\n')
    user.write_text(user_before)
    run("install", "auggie", "--user", cwd=project)
    doc = json.loads(user.read_text())
    assert doc["model"] == "sonnet" and set(doc["mcpServers"]) == {"acme", "ctrlz"}
    jsonschema.validate(doc["hooks"], AUGGIE_HOOKS_SCHEMA)
    assert not (project / ".augment").exists()
    run("uninstall", "auggie", "--user", cwd=project)
    assert user.read_text() == user_before


def test_auggie_local_settings_gitignore_note(project: Path, home: Path) -> None:
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    out = run("install", "auggie", "--dry-run", cwd=project)
    assert "git does not ignore .augment/settings.local.json" in out.stderr
    (project / ".gitignore").write_text(".augment/settings.local.json\n")
    out = run("install", "auggie", "--dry-run", cwd=project)
    assert "git does not ignore" not in out.stderr


def test_detect_finds_droid_and_auggie(project: Path, home: Path) -> None:
    (project / ".factory").mkdir()
    (home / ".augment").mkdir()
    data = json.loads(run("install", "--detect", "--dry-run", "--json", cwd=project,
                          path=f"{BIN}:/usr/bin:/bin").stdout)
    assert data["detected"] == {"droid": str(project / ".factory"),
                                "auggie": str(home / ".augment")}
    assert [i["agent"] for i in data["installs"]] == ["droid", "auggie"]


def test_nothing_machine_specific_and_everything_goes(project: Path, home: Path) -> None:
    before = tree(project, home)
    for agent in ("droid", "auggie"):
        run("install", agent, cwd=project)
    written = {p: b for p, b in tree(project).items() if p not in before and b}
    assert len(written) == 3
    for path, body in written.items():
        assert sys.prefix.encode() not in body and str(home).encode() not in body, path
    for agent in ("droid", "auggie"):
        run("uninstall", agent, cwd=project)
    assert tree(project, home) == before


# -- payloads ------------------------------------------------------------------------------------


def hook(agent: str, payload: dict, cwd: str = "/") -> None:
    proc = subprocess.run([str(BIN / "ctrlz-hook"), agent], input=json.dumps(payload).encode(),
                          cwd=cwd, capture_output=True, timeout=60)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")


def ctrlz(*args: str, cwd: Path) -> str:
    return run(*args, cwd=cwd).stdout


def contents(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def hook_errors() -> list[dict]:
    found = []
    for path in Path(os.environ["CTRLZ_HOME"]).rglob("hook-errors.jsonl"):
        found += [json.loads(line) for line in path.read_text().splitlines()]
    return found


@pytest.fixture
def ws(ws_dir: Path) -> Path:
    for rel, text in {"src/app.py": "print('hello')\n", "README.md": "# demo\n",
                      "old.txt": "old\n", "notes/a.md": "a\n"}.items():
        (ws_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws_dir / rel).write_text(text)
    Workspace.init(ws_dir).close()
    return ws_dir


def listing(ws: Path) -> list[dict]:
    return json.loads(ctrlz("rewind", "--list", "--json", cwd=ws))["tool_calls"]


def test_droid_payloads(ws: Path) -> None:
    before = contents(ws)
    # every event: buildSessionHookInput / vs() / the executor's PostToolUse, as captured from
    # droid 0.225.2 exec (SessionStart adds source and CLAUDE_ENV_FILE)
    base = {"session_id": "ecdf08cb-aa33-4b7f-bfda-673d6c18833a",
            "transcript_path": "/home/u/.factory/sessions/-ws/ecdf08cb.jsonl", "cwd": str(ws),
            "permission_mode": "auto-high"}
    hook("droid", base | {"hook_event_name": "SessionStart", "source": "startup",
                          "CLAUDE_ENV_FILE": "/home/u/.factory/temp/env/droid-env.sh"})
    # executeUserPromptSubmitHooks: message_id, prompt, has_images (interactive mode only)
    hook("droid", base | {"hook_event_name": "UserPromptSubmit", "message_id": "m-1",
                          "prompt": "go", "has_images": False})
    create = {"file_path": str(ws / "src" / "new.py"), "content": "N = 1\n"}
    hook("droid", base | {"hook_event_name": "PreToolUse", "tool_name": "Create",
                          "tool_input": create})
    (ws / "src" / "new.py").write_text("N = 1\n")
    hook("droid", base | {"hook_event_name": "PostToolUse", "tool_name": "Create",
                          "tool_input": create, "tool_response": {"success": True}})
    edit = {"file_path": str(ws / "README.md"), "old_str": "# demo", "new_str": "# droid"}
    hook("droid", base | {"hook_event_name": "PreToolUse", "tool_name": "Edit",
                          "tool_input": edit})
    (ws / "README.md").write_text("# droid\n")
    # ApplyPatch: tool_input {input: the patch} (schema gT), Codex's headers; relative paths
    patch = ("*** Begin Patch\n*** Delete File: old.txt\n*** Update File: notes/a.md\n@@\n-a\n+b"
             "\n*** End Patch")
    hook("droid", base | {"hook_event_name": "PreToolUse", "tool_name": "ApplyPatch",
                          "tool_input": {"input": patch}})
    (ws / "old.txt").unlink()
    (ws / "notes" / "a.md").write_text("b\n")
    hook("droid", base | {"hook_event_name": "PreToolUse", "tool_name": "Execute",
                          "tool_input": {"command": "rm -rf src", "riskLevel": "medium",
                                         "riskLevelReason": "deletes src"}})
    shutil.rmtree(ws / "src")
    hook("droid", base | {"hook_event_name": "PreToolUse", "tool_name": "Read",
                          "tool_input": {"file_path": str(ws / "README.md")}})  # not ours
    calls = listing(ws)
    assert [(c["agent"], c["tool"], c["kind"], c["turn"]) for c in calls] == [
        ("droid", "Create", "files", 1), ("droid", "Edit", "files", 1),
        ("droid", "ApplyPatch", "files", 1), ("droid", "Execute", "bash", 1)]
    assert calls[2]["captured_paths"] == ["notes/a.md", "old.txt"]
    assert calls[3]["command"] == "rm -rf src"
    assert all(c["tool_use_id"].startswith("droid-") for c in calls)
    after = contents(ws)
    ctrlz("rewind", calls[0]["tool_use_id"], cwd=ws)
    assert contents(ws) == before
    ctrlz("undo", cwd=ws)
    assert contents(ws) == after
    assert hook_errors() == []


def test_droid_reader_pairs_pre_and_post_by_their_input() -> None:
    tool_input = {"file_path": "/w/a.py", "content": "x"}
    pre = droid_reader.read({"hook_event_name": "PreToolUse", "session_id": "s",
                             "tool_name": "Create", "tool_input": tool_input})
    post = droid_reader.read({"hook_event_name": "PostToolUse", "session_id": "s",
                              "tool_name": "Create", "tool_input": tool_input,
                              "tool_response": "ok"})
    other = droid_reader.read({"hook_event_name": "PreToolUse", "session_id": "s",
                               "tool_name": "Create", "tool_input": {**tool_input, "content": "y"}})
    assert (pre.event, post.event) == ("pre", "post") and pre.tool_id == post.tool_id == ""
    assert pre.args_key == post.args_key != other.args_key
    script = droid_reader.read({"hook_event_name": "PreToolUse", "session_id": "s",
                                "tool_name": "Script",
                                "tool_input": {"input": '{"waitForMs": 0}\n\nawait tools.x()'}})
    assert (script.kind, script.command) == ("shell", "Script: await tools.x()")
    prompt = droid_reader.read({"hook_event_name": "UserPromptSubmit", "session_id": "s",
                                "message_id": "m-9", "prompt": "hi"})
    assert (prompt.event, prompt.turn_key) == ("prompt", "m-9")
    assert droid_reader.read({"hook_event_name": "Stop", "session_id": "s"}).event is None


def test_auggie_payloads(ws: Path) -> None:
    before = contents(ws)
    # T7n / k7n / B7n in augment.mjs: no cwd, no tool-call id; paths relative to the root
    base = {"conversation_id": "b40ab70c-d96d-43f3-ab2d-f804ce2c423e",
            "workspace_roots": [str(ws)]}
    hook("auggie", base | {"hook_event_name": "SessionStart"})
    hook("auggie", base | {"hook_event_name": "PromptSubmit", "user_prompt": "go"})
    tool = base | {"tool_output": "[undefined]", "tool_error": None, "is_mcp_tool": False}
    save = {"path": "src/new.py", "file_content": "N = 1\n"}
    hook("auggie", tool | {"hook_event_name": "PreToolUse", "tool_name": "save-file",
                           "tool_input": save})
    (ws / "src" / "new.py").write_text("N = 1\n")
    hook("auggie", tool | {"hook_event_name": "PostToolUse", "tool_name": "save-file",
                           "tool_input": save, "tool_output": "File saved.",
                           "file_changes": [{"path": "src/new.py", "changeType": "create",
                                             "content": "N = 1\n"}]})
    view = {"command": "view", "path": "README.md"}
    hook("auggie", tool | {"hook_event_name": "PreToolUse", "tool_name": "str-replace-editor",
                           "tool_input": view})  # changes nothing: not recorded
    edit = {"command": "str_replace", "path": "README.md", "str_replace_entries": [
        {"old_str": "# demo", "new_str": "# aug", "old_str_start_line_number": 1,
         "old_str_end_line_number": 1}]}
    hook("auggie", tool | {"hook_event_name": "PreToolUse", "tool_name": "str-replace-editor",
                           "tool_input": edit})
    (ws / "README.md").write_text("# aug\n")
    hook("auggie", tool | {"hook_event_name": "PreToolUse", "tool_name": "remove-files",
                           "tool_input": {"file_paths": ["old.txt", "notes/a.md"]}})
    (ws / "old.txt").unlink()
    (ws / "notes" / "a.md").unlink()
    hook("auggie", tool | {"hook_event_name": "PreToolUse", "tool_name": "launch-process",
                           "tool_input": {"command": "rm -rf src", "wait": True,
                                          "max_wait_seconds": 60, "cwd": str(ws)}})
    shutil.rmtree(ws / "src")
    calls = listing(ws)
    assert [(c["agent"], c["tool"], c["kind"]) for c in calls] == [
        ("auggie", "save-file", "files"), ("auggie", "str-replace-editor", "files"),
        ("auggie", "remove-files", "files"), ("auggie", "launch-process", "bash")]
    assert calls[0]["captured_paths"] == ["src/new.py"]
    assert calls[2]["captured_paths"] == ["notes/a.md", "old.txt"]
    assert {c["turn"] for c in calls} == {1}
    after = contents(ws)
    ctrlz("rewind", calls[0]["tool_use_id"], cwd=ws)
    assert contents(ws) == before
    ctrlz("undo", cwd=ws)
    assert contents(ws) == after
    assert hook_errors() == []


def test_auggie_turns_are_bounded_by_stop(ws: Path) -> None:
    """Auggie runs PromptSubmit alongside the model request, so a turn's first tool call may
    come first (CI saw it); the Stop that ends each turn keeps both in the one turn."""
    base = {"conversation_id": "c0ffee00-d96d-43f3-ab2d-f804ce2c423e",
            "workspace_roots": [str(ws)]}
    tool = base | {"tool_output": "[undefined]", "tool_error": None, "is_mcp_tool": False}
    prompt = base | {"hook_event_name": "PromptSubmit", "user_prompt": "go"}
    # N7n: Stop sends the cause and the exchange
    stop = base | {"hook_event_name": "Stop", "agent_stop_cause": "end_turn",
                   "_exchange": {"exchange": {"request_message": "go"}, "changedFiles": []}}

    def save(path: str) -> None:
        hook("auggie", tool | {"hook_event_name": "PreToolUse", "tool_name": "save-file",
                               "tool_input": {"path": path, "file_content": "x\n"}})
        (ws / path).write_text("x\n")

    hook("auggie", base | {"hook_event_name": "SessionStart"})
    save("first.txt")        # the first tool call overtakes its prompt
    hook("auggie", prompt)
    save("second.txt")
    hook("auggie", stop)
    hook("auggie", prompt)   # the next turn, in the usual order
    save("third.txt")
    hook("auggie", stop)
    save("fourth.txt")       # overtaking again
    hook("auggie", prompt)
    hook("auggie", prompt)   # no Stop before it (Auggie was killed): still a new turn
    save("fifth.txt")
    assert [(c["captured_paths"], c["turn"]) for c in listing(ws)] == [
        (["first.txt"], 1), (["second.txt"], 1), (["third.txt"], 2), (["fourth.txt"], 3),
        (["fifth.txt"], 4)]
    assert hook_errors() == []


def test_auggie_reader_tools_and_pairing() -> None:
    def read(tool: str, tool_input: dict, event: str = "PreToolUse") -> object:
        return auggie_reader.read({"hook_event_name": event, "conversation_id": "c",
                                   "workspace_roots": ["/w"], "tool_name": tool,
                                   "tool_input": tool_input, "is_mcp_tool": False})

    patch = "*** Begin Patch\n*** Add File: a.py\n+x\n*** Update File: b.py\n*** Move to: c.py\n"
    call = read("apply_patch", {"input": patch})
    assert (call.kind, call.paths) == ("files", ["a.py", "b.py", "c.py"])
    assert read("write", {"path": "w.txt", "content": "x"}).paths == ["w.txt"]
    assert read("edit", {"path": "e.txt", "edits": []}).paths == ["e.txt"]
    assert (read("bash", {"command": "make"}).kind, read("bash", {"command": "make"}).command
            ) == ("shell", "make")
    typed = read("write-process", {"terminal_id": 3, "input_text": "rm -rf x\n"})
    assert (typed.kind, typed.command) == ("shell", "rm -rf x\n")
    assert read("view", {"path": "a"}).kind is None
    pre = read("save-file", {"path": "a", "file_content": "1"})
    post = read("save-file", {"path": "a", "file_content": "1"}, "PostToolUse")
    assert pre.args_key == post.args_key and post.event == "post" and not post.tool_id
    assert auggie_reader.cwd({"workspace_roots": ["/w"]}) == "/w"
    stop = auggie_reader.read({"hook_event_name": "Stop", "conversation_id": "c",
                               "agent_stop_cause": "interrupted"})
    assert (stop.event, stop.session_id) == ("stop", "c")
    assert auggie_reader.cwd({"cwd": "/c", "workspace_roots": ["/w"]}) == "/c"
