"""The API over the real Unix socket: every route, in the CLI's --json shapes.

Answers are validated against the same schemas that check the CLI's ``--json``
(tests/cli/schemas.py), and what a route did on disk is checked on disk.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import jsonschema

from ..cli.schemas import SCHEMAS
from ..conftest import watched
from .conftest import Service, wait_for


def check(name: str, data: object) -> None:
    jsonschema.validate(data, SCHEMAS[name])


def test_service_and_openapi(svc: Service) -> None:
    info = svc.ok("GET", "/v1/service")
    assert info["type"] == "service" and info["pid"] == svc.proc.pid  # type: ignore[union-attr]
    assert info["gateway"]["port"] == svc.port
    doc = svc.ok("GET", "/v1/openapi.json")
    assert doc["openapi"].startswith("3.")
    from ctrlz.service.routing import ENDPOINTS

    for ep in ENDPOINTS:
        assert ep.method.lower() in doc["paths"][ep.path], ep.path
    assert "/v1/events" in doc["paths"]


def test_snapshots_diff_history_shapes(svc: Service) -> None:
    root, ws = svc.workspace("shapes")
    base = f"/v1/workspaces/{ws}"
    snap = svc.ok("POST", f"{base}/snapshots", {"label": "baseline"})
    check("snapshot", snap)
    (root / "README.md").write_text("# changed\n")
    (root / "new.txt").write_text("new\n")
    (root / "blob.bin").write_bytes(b"\0\1\2" * 10)
    second = svc.ok("POST", f"{base}/snapshots", {"type": "auto"})
    listed = svc.ok("GET", f"{base}/snapshots")
    check("list", listed)
    assert [s["id"] for s in listed] == [second["id"], snap["id"]]  # newest first, as the CLI
    cli = json.loads(svc.ctrlz("list", "--json", cwd=root).stdout)
    assert [s["id"] for s in cli] == [s["id"] for s in listed]
    shown = svc.ok("GET", f"{base}/snapshots/baseline")
    check("show", shown)
    assert shown["id"] == snap["id"]
    d = svc.ok("GET", f"{base}/diff?old={snap['id']}&new={second['id']}")
    check("diff", d)
    assert {c["path"] for c in d["changes"]} == {"README.md", "new.txt", "blob.bin"}
    assert d == json.loads(svc.ctrlz("diff", snap["id"], second["id"], "--json", cwd=root).stdout)
    working = svc.ok("GET", f"{base}/diff?old={snap['id']}")
    assert working["new"] == "working tree"
    p = svc.ok("GET", f"{base}/patch?old={snap['id']}&path=README.md")
    assert p["type"] == "patch" and "-# hi" in p["patch"] and "+# changed" in p["patch"]
    b = svc.ok("GET", f"{base}/patch?old={snap['id']}&path=blob.bin")
    assert b["binary"] is True and b["patch"] is None
    h = svc.ok("GET", f"{base}/history?path=README.md")
    check("history", h)
    assert len(h["versions"]) == 2
    pinned = svc.ok("POST", f"{base}/snapshots/{snap['id']}/pin", {})
    check("pin", pinned)
    assert pinned["pinned"] is True
    unpinned = svc.ok("POST", f"{base}/snapshots/{snap['id']}/pin", {"pinned": False})
    assert unpinned["pinned"] is False
    gone = svc.ok("DELETE", f"{base}/snapshots/{second['id']}")
    check("rm", gone)
    assert gone["removed"] == [second["id"]]
    check("gc", svc.ok("POST", f"{base}/gc"))
    v = svc.ok("POST", f"{base}/verify")
    check("verify", v)
    assert v["ok"] is True
    status = svc.ok("GET", base)
    check("status", {k: v for k, v in status.items() if k not in ("id", "registered", "watcher")})
    assert status["registered"] is True


def test_large_file_is_summarised(svc: Service) -> None:
    root, ws = svc.workspace("large", {"big.txt": "a\n" * 10})
    snap = svc.ok("POST", f"/v1/workspaces/{ws}/snapshots", {})
    (root / "big.txt").write_text("b\n" * 700_000)
    p = svc.ok("GET", f"/v1/workspaces/{ws}/patch?old={snap['id']}&path=big.txt")
    assert p["large"] is True and p["patch"] is None and p["new_size"] == 1_400_000


def test_rollback_undo_redo_revert_on_disk(svc: Service) -> None:
    root, ws = svc.workspace("restores", {"a.txt": "one\n", "b.txt": "bee\n"})
    base = f"/v1/workspaces/{ws}"
    snap = svc.ok("POST", f"{base}/snapshots", {"label": "good"})
    (root / "a.txt").write_text("two\n")
    (root / "b.txt").unlink()
    plan = svc.ok("GET", f"{base}/plan?snapshot=good")
    check("rollback", plan)
    assert plan["dry_run"] and plan["counts"]["created"] == 1 and plan["counts"]["modified"] == 1
    assert (root / "a.txt").read_text() == "two\n"  # a plan changes nothing
    dry = svc.ok("POST", f"{base}/rollback", {"snapshot": "good", "dry_run": True})
    assert dry["counts"] == plan["counts"]
    done = svc.ok("POST", f"{base}/rollback", {"snapshot": snap["id"]})
    check("rollback", done)
    assert done["safety_snapshot"] and not done["dry_run"]
    assert (root / "a.txt").read_text() == "one\n" and (root / "b.txt").read_text() == "bee\n"
    dry_undo = svc.ok("POST", f"{base}/undo", {"dry_run": True})
    check("undo", dry_undo)
    assert dry_undo["restore"]["dry_run"] and (root / "a.txt").read_text() == "one\n"
    undo = svc.ok("POST", f"{base}/undo")
    check("undo", undo)
    assert (root / "a.txt").read_text() == "two\n" and not (root / "b.txt").exists()
    redo = svc.ok("POST", f"{base}/redo")
    check("redo", redo)
    assert (root / "a.txt").read_text() == "one\n"
    (root / "a.txt").write_text("three\n")
    rev = svc.ok("POST", f"{base}/revert", {"path": "a.txt"})
    check("revert", rev)
    assert (root / "a.txt").read_text() == "one\n"
    ops = svc.ok("GET", f"{base}/operations")
    assert [o["kind"] for o in ops["operations"]][-1] == "revert"
    assert ops["next_undo"]["kind"] == "revert"
    only = svc.ok("POST", f"{base}/rollback", {"snapshot": "good", "paths": ["a.txt"],
                                               "dry_run": True})
    assert {a["path"] for a in only["actions"]} <= {"a.txt"}
    assert svc.ok("POST", f"{base}/verify")["ok"]


def test_paths_are_validated(svc: Service) -> None:
    root, ws = svc.workspace("paths")
    base = f"/v1/workspaces/{ws}"
    svc.ok("POST", f"{base}/snapshots", {})
    secret = root.parent / "secret.txt"
    secret.write_text("keep out\n")
    for bad in ("../secret.txt", "src/../../secret.txt", str(secret), "/etc/passwd", "", "a\0b",
                "."):
        for method, path, body in (
                ("GET", f"{base}/history", None), ("GET", f"{base}/patch", None),
                ("POST", f"{base}/revert", {"path": bad}),
                ("POST", f"{base}/rollback", {"snapshot": "latest", "paths": [bad]})):
            r = svc.api(method, path, body, params={"path": bad} if body is None else None)
            assert r.status_code == 400, (bad, path, r.text)
            err = r.json()
            assert err["type"] == "error" and err["message"] and err["exit_code"] == 2
    assert secret.read_text() == "keep out\n"
    assert svc.api("GET", f"{base}/history", params={"path": "a..b.txt"}).status_code == 200


def test_errors_are_json(svc: Service) -> None:
    _, ws = svc.workspace("errors")
    base = f"/v1/workspaces/{ws}"
    cases = [
        ("GET", "/v1/workspaces/nope-0000", None, 404),
        ("GET", f"{base}/snapshots/nope", None, 404),
        ("POST", f"{base}/rollback", {"snapshot": "nope"}, 404),
        ("POST", f"{base}/rollback", {}, 400),
        ("POST", f"{base}/snapshots", {"type": "weird"}, 400),
        ("POST", f"{base}/snapshots", {"bogus": 1}, 400),
        ("POST", f"{base}/undo", None, 400),  # nothing to undo
        ("GET", "/v1/nothing-here", None, 404),
        ("PUT", "/v1/workspaces", None, 405),
        ("POST", "/v1/workspaces", {"path": "relative/dir"}, 400),
    ]
    for method, path, body, status in cases:
        r = svc.api(method, path, body)
        assert r.status_code == status, (method, path, r.status_code, r.text)
        data = r.json()
        assert data["type"] == "error" and data["message"] and "\n" not in data["message"]
    r = svc.api("POST", f"{base}/snapshots", content=b"{not json",
                headers={"content-type": "application/json"})
    assert r.status_code == 400 and "not valid JSON" in r.json()["message"]
    for _ in range(2):
        svc.ok("POST", f"{base}/snapshots", {"type": "manual"})
    svc.ok("POST", f"{base}/snapshots", {})
    r = svc.api("GET", f"{base}/snapshots/snap_")
    assert r.status_code == 409 and r.json()["error"] == "AmbiguousSnapshot"


def test_bad_client_input_is_a_400_usage_error_never_a_500(svc: Service) -> None:
    """A body nested too deeply for json, a lone surrogate (JSON's ``\\ud800``, which names
    no bytes) in a path or a label, and a fractional or boolean count were answered 500
    "a bug in ctrlz", or silently truncated (``keep: 1.9`` kept 1)."""
    _, ws = svc.workspace("bad-input", {"a.txt": "a\n"})
    base = f"/v1/workspaces/{ws}"
    for i in range(3):
        svc.ok("POST", f"{base}/snapshots", {"label": f"s{i}"})
    lone = b'"\\ud800"'
    cases = [
        ("/rollback", b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        ("/rollback", b'{"snapshot": "s1", "dry_run": true, "paths": [' + lone + b"]}",
         "lone surrogate"),
        ("/revert", b'{"path": ' + lone + b"}", "lone surrogate"),
        ("/snapshots", b'{"label": ' + lone + b"}", "not UTF-8"),
        ("/prune", b'{"keep": 1.9, "dry_run": true}', "whole number"),
        ("/prune", b'{"keep": true, "dry_run": true}', "whole number"),
        ("/prune", b'{"keep": "1_0", "dry_run": true}', "whole number"),
    ]
    for route, body, said in cases:
        r = svc.api("POST", base + route, content=body,
                    headers={"content-type": "application/json"})
        assert r.status_code == 400, (route, body[:60], r.text)
        err = r.json()
        assert err["error"] == "UsageError" and said in err["message"], err
        assert "\n" not in err["message"]
    assert len(svc.ok("GET", f"{base}/snapshots")) == 3
    kept = svc.ok("POST", f"{base}/prune", {"keep": 2, "dry_run": True})
    assert len(kept["dropped"]) == 1
    assert "Traceback" not in (svc.base / "service.log").read_text()


def test_sessions_trace_events_toolcalls_rewind(svc: Service) -> None:
    root, ws = svc.workspace("agent", {"src/app.py": "x = 1\n", "notes.md": "n\n"})
    base = f"/v1/workspaces/{ws}"
    svc.ctrlz("run", "--no-trace", "--", "sh", "-c", "echo draft > draft.md", cwd=root)
    runs = svc.ok("GET", f"{base}/sessions")
    assert runs and runs[0]["command"][:2] == ["sh", "-c"]
    sid = runs[0]["id"]
    show = svc.ok("GET", f"{base}/sessions/{sid}")
    assert show["id"] == sid and any(i["kind"] == "snapshot" for i in show["timeline"])
    assert svc.ok("GET", f"{base}/sessions/latest/trace") == []  # untraced
    events = svc.ok("GET", f"{base}/sessions/{sid}/events")
    assert any(e["path"] == "draft.md" and e["action"] == "created" for e in events)
    assert svc.ok("GET", f"{base}/toolcalls") == {"tool_calls": [], "sessions": []}
    for event in ({"hook_event_name": "UserPromptSubmit", "prompt": "tidy up"},
                  {"hook_event_name": "PreToolUse", "tool_name": "Bash",
                   "tool_input": {"command": "rm -rf src"}, "tool_use_id": "toolu_01"}):
        payload = json.dumps({"session_id": "s1", "cwd": str(root), **event})
        svc.ctrlz("hook", "claude", cwd=root, input=payload)
    (root / "src" / "app.py").unlink()
    (root / "src").rmdir()
    calls = svc.ok("GET", f"{base}/toolcalls")
    assert [c["tool_use_id"] for c in calls["tool_calls"]] == ["toolu_01"]
    assert calls["sessions"][0]["session_id"] == "s1"
    plan = svc.ok("POST", f"{base}/rewind", {"target": "toolu_01", "dry_run": True})
    assert plan["dry_run"] and "src/app.py" in plan["changed_paths"]
    assert not (root / "src").exists()
    done = svc.ok("POST", f"{base}/rewind", {"target": "toolu_01"})
    assert done["safety_snapshot"] and (root / "src" / "app.py").read_text() == "x = 1\n"
    svc.ok("POST", f"{base}/undo")
    assert not (root / "src").exists()


def test_event_stream(svc: Service) -> None:
    root, ws = svc.workspace("events", {"f.txt": "1\n"})
    base = f"/v1/workspaces/{ws}"
    seen: list[dict] = []
    ready = threading.Event()

    def listen() -> None:
        import httpx2

        with httpx2.Client(transport=httpx2.HTTPTransport(uds=svc.socket),
                           base_url="http://ctrlz", timeout=30) as c, \
                c.stream("GET", f"/v1/events?workspace={ws}") as r:
            kind = None
            for line in r.iter_lines():
                if line.startswith("event:"):
                    kind = line.split(":", 1)[1].strip()
                    ready.set()
                elif line.startswith("data:") and kind:
                    seen.append(json.loads(line[5:]))
                    if sum(e["type"] == "restore" for e in seen) >= 1 and any(
                            e["type"] == "snapshot" and e["snapshot"].get("label") == "cli"
                            for e in seen):
                        return

    t = threading.Thread(target=listen, daemon=True)
    t.start()
    assert ready.wait(10)
    snap = svc.ok("POST", f"{base}/snapshots", {"label": "api"})
    (root / "f.txt").write_text("2\n")
    svc.ok("POST", f"{base}/rollback", {"snapshot": snap["id"]})
    svc.ctrlz("snapshot", "-m", "cli", cwd=root)  # made outside the service: found by polling
    t.join(20)
    assert not t.is_alive(), seen
    snaps = [e["snapshot"]["id"] for e in seen if e["type"] == "snapshot"]
    assert snap["id"] in snaps and len(snaps) == len(set(snaps))  # each announced once
    assert all(e["workspace"] == ws for e in seen if "workspace" in e)
    restore = next(e for e in seen if e["type"] == "restore")
    assert restore["action"] == "done" and restore["operation"]["target"] == snap["id"]


@watched
def test_register_unregister_and_watcher(svc: Service, tmp_path: Path) -> None:
    root, ws = svc.workspace("watched")
    w = wait_for(lambda: (lambda x: x if x["watcher"] and x["watcher"]["state"] == "running"
                          else None)(svc.ok("GET", f"/v1/workspaces/{ws}")),
                 what="the watcher to run")
    pid = w["watcher"]["pid"]
    daemon = svc.ctrlz("daemon", "status", "--json", cwd=root)
    assert json.loads(daemon.stdout)["pid"] == pid
    gone = svc.ok("DELETE", f"/v1/workspaces/{ws}")
    assert gone["registered"] is False
    wait_for(lambda: json.loads(svc.ctrlz("daemon", "status", "--json", cwd=root).stdout)[
        "running"] is False, what="the watcher to stop")
    listed = {x["id"]: x for x in svc.ok("GET", "/v1/workspaces")}
    assert listed[ws]["registered"] is False  # still known: its store is there


def test_a_directory_inside_the_store_home_is_refused_as_a_workspace(svc: Service) -> None:
    """A store (or anything under ``$CTRLZ_HOME``) protected as a workspace would have its
    rollbacks rewrite another workspace's catalog: the API and ``ctrlz init`` both refuse."""
    _, ws = svc.workspace("owner-of-a-store")
    store = svc.home / "workspaces" / ws
    before = {w["id"] for w in svc.ok("GET", "/v1/workspaces")}
    for inside in (store, store / "packs", svc.home / "workspaces"):
        if not inside.is_dir():
            continue
        r = svc.api("POST", "/v1/workspaces", {"path": str(inside)})
        assert r.status_code == 400, r.text
        msg = r.json()["message"]
        assert "inside the ctrlz store home" in msg and "\n" not in msg
        cli = svc.ctrlz("init", str(inside), ok=False)
        assert cli.returncode != 0 and "inside the ctrlz store home" in cli.stderr
        assert len(cli.stderr.strip().splitlines()) == 1, cli.stderr
    assert {w["id"] for w in svc.ok("GET", "/v1/workspaces")} == before


def test_timeline_rows_and_pages(svc: Service) -> None:
    """The compact timeline and the paged list name the same snapshots as the full list, in
    the same order; a page starts after the ``before`` it was given."""
    root, ws = svc.workspace("pages", {"a.txt": "0\n"})
    base = f"/v1/workspaces/{ws}"
    for i in range(7):
        (root / "a.txt").write_text(f"{i}\n")
        svc.ok("POST", f"{base}/snapshots", {"label": f"s{i}"})
    full = svc.ok("GET", f"{base}/snapshots")
    timeline = svc.ok("GET", f"{base}/timeline")
    assert timeline["type"] == "timeline" and timeline["count"] == len(full) == 7
    cols = timeline["columns"]
    rows = [dict(zip(cols, r, strict=True)) for r in timeline["rows"]]
    assert [r["id"] for r in rows] == [s["id"] for s in reversed(full)]  # oldest first
    newest = rows[-1]
    assert newest["label"] == "s6" and newest["type"] == "manual" and not newest["pinned"]
    assert newest["modified"] == full[0]["changes"]["modified"]
    assert newest["added_bytes"] == full[0]["added_bytes"]
    pages, before = [], None
    while True:
        page = svc.ok("GET", f"{base}/snapshots?limit=3" + (f"&before={before}" if before
                                                             else ""))
        pages.append(page)
        if len(page) < 3:
            break
        before = page[-1]["id"]
    assert [len(p) for p in pages] == [3, 3, 1]
    assert [s for p in pages for s in p] == full  # the same records, newest first
    r = svc.api("GET", f"{base}/snapshots?limit=3&before=snap_nothere")
    assert r.status_code == 404 and r.json()["error"] == "SnapshotNotFound"
    assert svc.api("GET", f"{base}/snapshots?limit=-1").status_code == 400
    one = svc.ok("GET", f"{base}/snapshots/{full[3]['id']}")
    assert {k: one[k] for k in full[3]} == full[3]


def test_rollback_names_what_it_does_to_git_and_takes_the_choice(svc: Service) -> None:
    """Issue 41 §6 through the API: the plan and the rollback carry ``git`` (the ref moves and
    the commits made unreachable); without a choice a rollback that drops commits is refused
    (400, nothing changed); ``git: keep`` leaves the history, ``git: restore`` puts it back and
    an undo brings the commits back."""
    import subprocess

    root, ws = svc.workspace("gitrepo", {"a.txt": "one\n"})
    base = f"/v1/workspaces/{ws}"
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "HOME": str(root),
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
           "PATH": "/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM": "1"}

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=root, env=env, check=True,
                              capture_output=True, text=True).stdout.strip()

    git("init", "-q", "-b", "main")
    git("add", "a.txt")
    git("commit", "-qm", "one")
    first = git("rev-parse", "HEAD")
    svc.ok("POST", f"{base}/snapshots", {"label": "A"})
    (root / "a.txt").write_text("two\n")
    git("commit", "-qam", "two")
    second = git("rev-parse", "HEAD")
    plan = svc.ok("GET", f"{base}/plan?snapshot=A")
    check("rollback", plan)
    [change] = plan["git"]
    assert change["refs"] == [{"ref": "refs/heads/main", "before": second, "after": first}]
    assert change["unreachable_commits"] == 1 and change["at_risk"]
    refused = svc.api("POST", f"{base}/rollback", {"snapshot": "A"})
    assert refused.status_code == 400 and "--git=keep" in refused.text
    assert git("rev-parse", "HEAD") == second and (root / "a.txt").read_text() == "two\n"
    kept = svc.ok("POST", f"{base}/rollback", {"snapshot": "A", "git": "keep"})
    assert [g["mode"] for g in kept["git"]] == ["keep"] and git("rev-parse", "HEAD") == second
    assert (root / "a.txt").read_text() == "one\n"
    svc.ok("POST", f"{base}/undo")
    done = svc.ok("POST", f"{base}/rollback", {"snapshot": "A", "git": "restore"})
    assert done["git"][0]["unreachable_commits"] == 1 and git("rev-parse", "HEAD") == first
    back = svc.ok("POST", f"{base}/undo", {"git": "auto"})
    assert back["restore"]["git"][0]["unreachable_commits"] == 0
    assert git("rev-parse", "HEAD") == second
    assert svc.api("POST", f"{base}/rollback", {"snapshot": "A", "git": "bogus"}
                   ).status_code == 400
