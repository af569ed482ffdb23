"""What ``ctrlz install`` writes, checked against the schemas the agents' own packages ship.

- **Gemini CLI** ships no ``settings.schema.json`` in its npm package; its bundle holds the
  source the published schema is generated from: ``getSettingsSchema()`` (exported by the bundle
  chunk that defines it) and ``SETTINGS_SCHEMA_DEFINITIONS`` (not exported: read from the same
  chunk's text, a plain object literal). :func:`gemini_json_schema` turns them into JSON Schema
  exactly as Gemini's own ``scripts/generate-settings-schema.ts`` does (``additionalProperties:
  false`` wherever a setting lists its properties, ``$ref`` to ``$defs`` for ``ref``), so an
  unknown hook event or a mistyped field fails validation.
- **Codex** is a native binary. It embeds JSON schemas for the hook *payloads* (stdin/stdout of
  each event); the test looks for one describing the hooks *file* (``hooks.json``) and skips,
  listing what it found, when there is none.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from .conftest import CACHE
from .test_gemini import trust_and_auth

# Node: import the chunk that defines the settings schema, call getSettingsSchema(), and
# evaluate the SETTINGS_SCHEMA_DEFINITIONS object literal from the same file's text with the
# chunk's own imports in scope.
GEMINI_EXTRACT = r"""
import fs from 'node:fs';
import path from 'node:path';
import url from 'node:url';
import vm from 'node:vm';

const [bundle, out] = process.argv.slice(1);
const emit = (doc) => { fs.writeFileSync(out, JSON.stringify(doc)); process.exit(0); };
const marker = 'var SETTINGS_SCHEMA_DEFINITIONS = {';
const file = fs.readdirSync(bundle).filter((f) => f.endsWith('.js'))
  .map((f) => path.join(bundle, f))
  .find((f) => fs.readFileSync(f, 'utf8').includes(marker));
if (!file) {
  emit({ error: `no "${marker}" in any ${bundle}/*.js` });
}
const src = fs.readFileSync(file, 'utf8');
const start = src.indexOf(marker) + marker.length - 1;
let depth = 0, i = start, quote = null;
for (; i < src.length; i++) {
  const c = src[i];
  if (quote) {
    if (c === '\\') i++;
    else if (c === quote) quote = null;
  } else if (c === '"' || c === "'" || c === '`') quote = c;
  else if (c === '/' && src[i + 1] === '*') i = src.indexOf('*/', i + 2) + 1;
  else if (c === '/' && src[i + 1] === '/') i = src.indexOf('\n', i);
  else if (c === '{') depth++;
  else if (c === '}' && --depth === 0) break;
}
// the literal may name the chunk's imports (e.g. AuthProviderType): give it those bindings
const scope = {};
for (const m of src.matchAll(/import\s*\{([^}]*)\}\s*from\s*["']([^"']+)["']/g)) {
  const dep = await import(new URL(m[2], url.pathToFileURL(file)).href);
  for (const name of m[1].split(',').map((n) => n.trim()).filter(Boolean)) {
    const [from, as] = name.split(/\s+as\s+/);
    scope[as ?? from] = dep[from];
  }
}
const defs = vm.runInNewContext('(' + src.slice(start, i + 1) + ')', scope);
const mod = await import(url.pathToFileURL(file).href);
if (typeof mod.getSettingsSchema !== 'function') {
  emit({ error: `${file} does not export getSettingsSchema` });
}
emit({ file, schema: mod.getSettingsSchema(), defs });
"""


def gemini_json_schema(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """``buildSchemaObject`` of gemini-cli's scripts/generate-settings-schema.ts, in Python
    (titles and descriptions left out: they do not constrain anything)."""
    used: dict[str, Any] = {}

    def ref(name: str) -> dict[str, Any]:
        used.setdefault(name, defs.get(name, {"description": f"Definition for {name}"}))
        return {"$ref": f"#/$defs/{name}"}

    def setting(d: dict[str, Any]) -> dict[str, Any]:
        base = {"default": d["default"]} if "default" in d else {}
        return base | (ref(d["ref"]) if d.get("ref") else of_type(d))

    def collection(c: dict[str, Any]) -> dict[str, Any]:
        return ref(c["ref"]) if c.get("ref") else of_type(c)

    def of_type(s: dict[str, Any]) -> dict[str, Any]:
        kind = s.get("type")
        if kind in ("boolean", "string", "number"):
            return {"type": kind}
        if kind == "enum":
            values = [o["value"] for o in s.get("options") or []]
            inferred = ("string" if values and all(isinstance(v, str) for v in values) else
                        "number" if values and all(isinstance(v, int | float) for v in values)
                        else None)
            return ({"type": inferred} if inferred else {}) | {"enum": values}
        if kind == "array":
            if "label" in s:  # a SettingDefinition
                items = collection(s["items"]) if s.get("items") else {}
            else:
                items = inline(s["properties"]) if s.get("properties") else {}
            return {"type": "array", "items": items}
        if kind == "object":
            if "label" not in s:  # a SettingCollectionDefinition
                return (inline(s["properties"]) if s.get("properties")
                        else {"type": "object", "additionalProperties": True})
            out: dict[str, Any] = {"type": "object"}
            props = {k: setting(v) for k, v in (s.get("properties") or {}).items()}
            if props:
                out["properties"] = props
            if s.get("additionalProperties"):
                out["additionalProperties"] = collection(s["additionalProperties"])
            else:
                out["additionalProperties"] = not s.get("properties")
            return out
        return {}

    def inline(props: dict[str, Any]) -> dict[str, Any]:
        return {"type": "object", "properties": {k: setting(v) for k, v in props.items()},
                "additionalProperties": False}

    root: dict[str, Any] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
        "additionalProperties": False,
        "properties": {"$schema": {"type": "string"}} | {
            k: setting(v) for k, v in schema.items()}}
    if used:
        root["$defs"] = used
    return root


@pytest.fixture(scope="module")
def gemini_schema(agent_bin, tmp_path_factory) -> dict[str, Any]:  # noqa: ANN001
    binary = agent_bin("gemini")
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH")
    bundle = binary.resolve().parent
    home = tmp_path_factory.mktemp("gemini-schema-home")
    out = home / "schema.json"
    proc = subprocess.run([node, "--input-type=module", "-e", GEMINI_EXTRACT, str(bundle),
                           str(out)], capture_output=True, text=True, timeout=120, cwd=home,
                          env={"PATH": str(Path(node).parent), "HOME": str(home)})
    assert proc.returncode == 0 and out.exists(), proc.stderr[-3000:]
    got = json.loads(out.read_text())
    assert "error" not in got, got["error"]
    assert "HookDefinitionArray" in got["defs"] and "hooks" in got["schema"], got["file"]
    schema = gemini_json_schema(got["schema"], got["defs"])
    jsonschema.Draft202012Validator.check_schema(schema)
    return schema


def errors(schema: dict[str, Any], doc: Any) -> list[str]:
    v = jsonschema.Draft202012Validator(schema)
    return [f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}"
            for e in v.iter_errors(doc)]


def test_the_extracted_gemini_schema_has_teeth(gemini_schema) -> None:  # noqa: ANN001
    """A control: the schema refuses what Gemini would not read."""
    assert errors(gemini_schema, {"hook": {}})  # not a setting
    assert errors(gemini_schema, {"hooks": {"BeforeTool": {"matcher": "x"}}})  # not a list
    assert errors(gemini_schema, {"hooks": {"BeforeTool": [
        {"matcher": "x", "hooks": [{"type": "command", "command": "x", "timeout": "30s"}]}]}})
    assert errors(gemini_schema, {"hooksConfig": {"enabled": "yes"}})
    assert not errors(gemini_schema, {"hooks": {"BeforeTool": [
        {"matcher": "x", "hooks": [{"type": "command", "command": "x", "timeout": 30000}]}]}})


@pytest.mark.parametrize("scope", ["project", "user"])
def test_gemini_install_writes_valid_settings(gemini_schema, sandbox, scope) -> None:  # noqa: ANN001
    sb = sandbox
    trust_and_auth(sb.home, sb.project)  # the user's own settings are there first
    sb.ctrlz("install", "gemini", f"--{scope}")
    base = sb.project if scope == "project" else sb.home
    settings = base / ".gemini" / "settings.json"
    doc = json.loads(settings.read_text())
    assert doc.get("hooks"), doc
    problems = errors(gemini_schema, doc)
    assert not problems, f"{settings}:\n" + "\n".join(problems) + "\n" + json.dumps(doc, indent=1)
    # Gemini's schema also lets a settings file name events of its own ("custom hook event
    # arrays"), which Gemini never fires: every event ctrlz registers must be one it does
    fired = set(gemini_schema["properties"]["hooks"]["properties"])
    assert set(doc["hooks"]) <= fired, (sorted(set(doc["hooks"]) - fired), sorted(fired))


# Codex -----------------------------------------------------------------------------------------


def embedded_schemas(binary: Path) -> list[dict[str, Any]]:
    """Every JSON document in the binary that starts with a ``"$schema"`` member."""
    data = binary.read_bytes()
    found = []
    for m in re.finditer(rb'\{\s*"\$schema"\s*:', data):
        depth, quote, i = 0, False, m.start()
        while i < len(data):
            c = data[i]
            if quote:
                if c == 0x5C:
                    i += 1
                elif c == 0x22:
                    quote = False
            elif c == 0x22:
                quote = True
            elif c == 0x7B:
                depth += 1
            elif c == 0x7D:
                depth -= 1
                if depth == 0:
                    break
            i += 1
        try:
            found.append(json.loads(data[m.start():i + 1]))
        except ValueError:
            pass
    return found


def codex_native_binary() -> Path | None:
    hits = sorted((CACHE / "codex" / "node_modules" / "@openai").glob("codex-*/vendor/*/bin/codex"))
    return hits[0] if hits else None


def test_codex_hooks_json_against_codex_schema(agent_bin, sandbox) -> None:  # noqa: ANN001
    agent_bin("codex")
    binary = codex_native_binary()
    if binary is None:
        pytest.skip("no native codex binary found under .cache/agents/codex")
    schemas = embedded_schemas(binary)
    for_file = [s for s in schemas if "hooks" in (s.get("properties") or {})
                and not str(s.get("title", "")).endswith((".input", ".output"))]
    if not for_file:
        titles = ", ".join(sorted(str(s.get("title")) for s in schemas))
        pytest.skip("the @openai/codex package ships no schema for hooks.json: its binary "
                    f"embeds only the hook payload schemas ({titles})")
    sb = sandbox
    sb.ctrlz("install", "codex")
    doc = json.loads((sb.project / ".codex" / "hooks.json").read_text())
    problems = errors(for_file[0], doc)
    assert not problems, "\n".join(problems) + "\n" + json.dumps(doc, indent=1)


# The transcriptions of Droid's and Auggie's hook schemas (tests/agents/test_more_agents.py)
# must still be the packages' own text; here, beside the real agents, so the packages are
# installed first (agent_bin) rather than skipped when this runs before the real-agent tests.

def test_droid_schema_transcription_is_the_packages(agent_bin) -> None:  # noqa: ANN001
    from tests.agents.test_more_agents import DROID_BINARY, DROID_MCP_SOURCE, DROID_SOURCE

    agent_bin("droid")
    data = DROID_BINARY.read_bytes()
    for source in (DROID_SOURCE, DROID_MCP_SOURCE):
        assert source.encode() in data, source


def test_auggie_schema_transcription_is_the_packages(agent_bin) -> None:  # noqa: ANN001
    from tests.agents.test_more_agents import (
        AUGGIE_BUNDLE,
        AUGGIE_EVENTS_SOURCE,
        AUGGIE_MCP_SOURCE,
        AUGGIE_SOURCE,
    )

    agent_bin("auggie")
    text = AUGGIE_BUNDLE.read_text()
    for source in (AUGGIE_SOURCE, AUGGIE_EVENTS_SOURCE, AUGGIE_MCP_SOURCE):
        assert source in text, source
