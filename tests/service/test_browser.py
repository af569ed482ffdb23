"""The dashboard in a real headless Chromium (Debian's, through Playwright): log in with a
one-time address, see the timeline of snapshots made here, open a diff, roll back through the
page and find the files on disk put back, then undo through the page.

Screenshots of the main views are written to the test's directory, and to ``docs/img/`` when
``CTRLZ_SCREENSHOTS=1`` (``make screenshots``), which the README shows.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import Service, needs_chromium, shoot, user_like_service, wait_for

pytestmark = [needs_chromium]


@pytest.fixture
def dev_svc(tmp_path: Path) -> Iterator[Service]:
    with user_like_service(tmp_path) as svc:
        yield svc


def _agent_history(svc: Service, root: Path) -> None:
    """Snapshots of several kinds, a `ctrlz run` session and an agent's tool calls."""
    svc.ctrlz("snapshot", "-m", "baseline", cwd=root)
    (root / "src" / "app.py").write_text("def main():\n    return 2\n\n\nprint(main())\n")
    (root / "src" / "util.py").write_text("def helper(x):\n    return x * 2\n")
    svc.ctrlz("snapshot", "-m", "refactor", "--pin", cwd=root)
    svc.ctrlz("run", "--no-trace", "--", "sh", "-c", "echo draft > notes.md; rm -rf docs",
              cwd=root)
    for event in ({"hook_event_name": "UserPromptSubmit", "prompt": "clean up"},
                  {"hook_event_name": "PreToolUse", "tool_name": "Bash",
                   "tool_input": {"command": "rm -f README.md"}, "tool_use_id": "toolu_01"}):
        svc.ctrlz("hook", "claude", cwd=root,
                  input=json.dumps({"session_id": "s1", "cwd": str(root), **event}))
    (root / "README.md").unlink()
    svc.ctrlz("snapshot", "--type", "auto", cwd=root)


def test_dashboard_end_to_end(browser: object, dev_svc: Service, tmp_path: Path) -> None:
    svc = dev_svc.start()
    root, ws = svc.workspace("projects/webapp", {
        "README.md": "# app\n\nA small project.\n",
        "src/app.py": "def main():\n    return 1\n\n\nprint(main())\n",
        "docs/guide.md": "# Guide\n\nStart here.\n"})
    _agent_history(svc, root)
    baseline = next(s for s in svc.ok("GET", f"/v1/workspaces/{ws}/snapshots")
                    if s["label"] == "baseline")
    login = svc.ok("POST", "/v1/ui/login")
    page = browser.new_page(viewport={"width": 1400, "height": 900})  # type: ignore
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(login["url"])
    # the timeline of this workspace: the picture and the table of snapshots made above
    page.wait_for_selector(f"[data-testid=workspace][data-id='{ws}']")
    page.wait_for_selector(f"#snap-table tr[data-id='{baseline['id']}']")
    assert page.locator("[data-testid=timeline] canvas").count() >= 1
    assert page.locator("#snap-table tbody tr").count() == len(
        svc.ok("GET", f"/v1/workspaces/{ws}/snapshots"))
    page.wait_for_selector("#live.on")
    page.wait_for_timeout(400)  # the chart's first animation
    shoot(page, tmp_path, "dashboard-timeline")
    # a diff: the baseline against the working tree, one file rendered by diff2html
    page.click(f"#snap-table tr[data-id='{baseline['id']}']")
    page.click("[data-testid=diff-working]")
    page.wait_for_selector("[data-testid=diff-files] li[data-path='src/app.py']")
    page.click("[data-testid=diff-files] li[data-path='src/app.py']")
    page.locator("[data-testid=patch]", has_text="return 2").wait_for()
    assert page.locator("[data-testid=patch] .d2h-wrapper").count() == 1
    shoot(page, tmp_path, "dashboard-diff")
    # the session view: the run's file events and the agent's tool calls by turn
    page.click("[data-testid=tab-sessions]")
    page.click("#session-list li[data-key='agent:s1']")
    page.wait_for_selector("[data-testid=turn]")
    shoot(page, tmp_path, "dashboard-sessions")
    # roll back to the baseline through the page: the dialog shows the dry-run plan first
    before = {p: (root / p).read_text() for p in ("src/app.py", "src/util.py", "notes.md")}
    page.click("text=Timeline")
    page.click(f"#snap-table tr[data-id='{baseline['id']}']")
    page.click("[data-testid=rollback]")
    page.wait_for_selector("[data-testid=plan-actions]")
    plan_text = page.inner_text("[data-testid=confirm]")
    assert "src/app.py" in plan_text and "README.md" in plan_text
    shoot(page, tmp_path, "dashboard-rollback-plan")
    assert (root / "src" / "app.py").read_text() == before["src/app.py"]  # nothing yet
    page.click("[data-testid=confirm-ok]")
    page.wait_for_selector("text=Rolled back to")
    assert (root / "src" / "app.py").read_text() == "def main():\n    return 1\n\n\nprint(main())\n"
    assert (root / "README.md").read_text() == "# app\n\nA small project.\n"
    assert (root / "docs" / "guide.md").exists()
    assert not (root / "src" / "util.py").exists() and not (root / "notes.md").exists()
    # undo through the page: everything as it was before the rollback
    page.wait_for_selector("[data-testid=undo]:not([disabled])")
    page.click("[data-testid=undo]")
    page.wait_for_selector("[data-testid=confirm][open]")
    page.click("[data-testid=confirm-ok]")
    page.wait_for_selector("text=Undid the rollback")
    assert {p: (root / p).read_text() for p in before} == before
    assert not (root / "README.md").exists()
    assert svc.ok("POST", f"/v1/workspaces/{ws}/verify")["ok"]
    assert not errors, errors
    page.close()


def test_the_rollback_dialog_names_the_git_consequences_and_asks(browser: object,
                                                                 dev_svc: Service) -> None:
    """Issue 41 §6 in the dashboard: over commits made since the snapshot, the confirmation
    names the branch move and the commits, and asks keep or restore (keep preselected); the
    rollback it sends keeps the history, and a second one with "restore" moves the branch."""
    import os
    import subprocess

    svc = dev_svc.start()
    root, ws = svc.workspace("projects/gitapp", {"a.txt": "one\n"})
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
           "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(root)}

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=root, env=env, check=True,
                              capture_output=True, text=True).stdout.strip()

    git("init", "-q", "-b", "main")
    git("add", "a.txt")
    git("commit", "-qm", "one")
    first = git("rev-parse", "HEAD")
    snap = svc.ok("POST", f"/v1/workspaces/{ws}/snapshots", {"label": "A"})
    (root / "a.txt").write_text("two\n")
    git("commit", "-qam", "two")
    second = git("rev-parse", "HEAD")
    login = svc.ok("POST", "/v1/ui/login")
    page = browser.new_page(viewport={"width": 1400, "height": 900})  # type: ignore
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(login["url"])
    page.click(f"[data-testid=workspace][data-id='{ws}']")

    def roll_back(choice: str) -> None:
        page.click(f"#snap-table tr[data-id='{snap['id']}']")
        page.click("[data-testid=rollback]")
        page.wait_for_selector("[data-testid=plan-git]")
        text = page.inner_text("[data-testid=plan-git]")
        assert f"branch main moves {second[:7]} → {first[:7]}" in text
        assert "1 commit made since becomes unreachable" in text
        assert page.is_checked("[data-testid=git-keep]")
        if choice == "restore":
            page.check("[data-testid=git-restore]")
        page.click("[data-testid=confirm-ok]")
        page.wait_for_selector("text=Rolled back to")

    page.wait_for_selector(f"#snap-table tr[data-id='{snap['id']}']")
    roll_back("keep")
    assert (root / "a.txt").read_text() == "one\n" and git("rev-parse", "HEAD") == second
    (root / "a.txt").write_text("two\n")  # as it was, so the next plan is the same one
    roll_back("restore")
    # the first rollback's toast may still be up: wait for the branch itself
    wait_for(lambda: git("rev-parse", "HEAD") == first, what="main back at the snapshot")
    assert (root / "a.txt").read_text() == "one\n"
    assert not errors, errors
    page.close()
