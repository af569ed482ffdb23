"""diff, changes, history, status, config."""

from __future__ import annotations

import os
from pathlib import Path

from .conftest import run


def damage(ws: Path) -> None:
    (ws / "README.md").write_text("# demo\nmore\n")
    (ws / "logo.bin").write_bytes(b"\x89PNG\0\x09")
    (ws / "docs" / "guide.txt").unlink()
    (ws / "new.txt").write_text("new\n")
    os.chmod(ws / "src" / "app.py", 0o755)


def test_diff_default_is_latest_against_the_working_tree(ws: Path) -> None:
    run("snapshot", "-m", "base", cwd=ws)
    assert run("diff", cwd=ws).out == ""
    damage(ws)
    r = run("diff", cwd=ws)
    assert "--- a/README.md\n+++ b/README.md\n" in r.out and "+more\n" in r.out
    assert "Binary files a/logo.bin and b/logo.bin differ" in r.out
    assert "+++ /dev/null" in r.out and "-guide" in r.out
    assert "mode change 644 => 755 src/app.py" in r.out
    assert "\x1b[" not in r.out  # no colour when not a terminal


def test_diff_name_status_and_stat(ws: Path) -> None:
    run("snapshot", cwd=ws)
    damage(ws)
    lines = run("diff", "--name-status", cwd=ws).out.splitlines()
    assert lines == ["M\tREADME.md", "D\tdocs/guide.txt", "M\tlogo.bin", "A\tnew.txt",
                     "P\tsrc/app.py"]
    stat = run("diff", "--stat", cwd=ws).out
    assert " README.md | modified (+5 B)" in stat and "+1 ~2 -1, 1 mode changes" in stat
    assert " src/app.py | mode 644 => 755" in stat


def test_diff_by_content_not_size(ws: Path) -> None:
    run("snapshot", cwd=ws)
    st = os.stat(ws / "src" / "app.py")
    (ws / "src" / "app.py").write_text("print('HELLO')\n")
    os.utime(ws / "src" / "app.py", ns=(st.st_atime_ns, st.st_mtime_ns))
    assert run("diff", "--name-status", cwd=ws).out == "M\tsrc/app.py\n"


def test_diff_between_snapshots_and_paths(ws: Path) -> None:
    run("snapshot", "-m", "one", cwd=ws)
    damage(ws)
    run("snapshot", "-m", "two", cwd=ws)
    assert run("diff", "one", "two", "--name-status", "docs", cwd=ws).out == \
        "D\tdocs/guide.txt\n"
    assert run("diff", "one", "README.md", "--name-status", cwd=ws).out == "M\tREADME.md\n"
    data = run("diff", "one", "two", "--json", cwd=ws).json()
    assert {c["path"] for c in data["changes"]} >= {"README.md", "new.txt"}


def test_changes_since(ws: Path) -> None:
    run("snapshot", "-m", "base", cwd=ws)
    (ws / "new.txt").write_text("n\n")
    run("snapshot", cwd=ws)
    (ws / "README.md").unlink()
    assert run("changes", cwd=ws).out.splitlines()[0] == "D\tREADME.md"
    r = run("changes", "--since", "base", cwd=ws)
    assert "A\tnew.txt" in r.out and "D\tREADME.md" in r.out and "+1 ~0 -1 since" in r.out


def test_history_lists_versions_by_content(ws: Path) -> None:
    f = ws / "src" / "app.py"
    run("snapshot", cwd=ws)
    run("snapshot", cwd=ws)  # same content: same version
    f.write_text("print('HELLO')\n")  # same size, other content
    run("snapshot", cwd=ws)
    f.unlink()
    run("snapshot", cwd=ws)
    f.write_text("print('hello')\n")  # back to the first content
    run("snapshot", cwd=ws)
    h = run("history", "src/app.py", "--json", cwd=ws).json()
    kinds = [v["kind"] for v in h["versions"]]
    assert kinds == ["file", "file", "absent", "file"]
    assert [len(v["snapshots"]) for v in h["versions"]] == [2, 1, 1, 1]
    assert h["versions"][0]["oid"] == h["versions"][3]["oid"] != h["versions"][1]["oid"]
    text = run("history", "app.py", cwd=ws / "src").out
    assert "absent" in text and text.splitlines()[0].split()[:3] == ["#", "KIND", "SIZE"]


def test_status_reports_protection_store_and_health(ws: Path) -> None:
    r = run("status", cwd=ws)
    assert f"Workspace: {ws}" in r.out and "Problem:   no snapshots yet" in r.out
    (ws / ".gitignore").write_text("*.log\n")
    run("snapshot", "-m", "s", cwd=ws)
    r = run("status", cwd=ws)
    assert "Health:    ok" in r.out and 'Last:      snap_' in r.out and "of cap 5.0 GiB" in r.out
    data = run("status", "--json", cwd=ws).json()
    assert data["snapshots"] == 1 and data["store_bytes"] > 0 and data["problems"] == []


def test_config_shows_values_and_sources(ws: Path, tmp_path: Path) -> None:
    (ws / ".ctrlz.toml").write_text("auto_max = 3\n")
    data = run("config", "--json", cwd=ws, env={"CTRLZ_MANUAL_MAX": "2"}).json()["values"]
    assert data["manual_max"] == {"value": 2, "source": "$CTRLZ_MANUAL_MAX"}
    assert data["auto_max"] == {"value": 3, "source": str(ws / ".ctrlz.toml")}
    assert data["store_cap"]["source"] == "default"
    text = run("config", cwd=ws).out
    assert "auto_max" in text and str(ws / ".ctrlz.toml") in text


def test_bad_config_names_key_and_file(ws: Path, tmp_path: Path) -> None:
    user = tmp_path / "config" / "ctrlz" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text('manual_max = "lots"\n')
    r = run("snapshot", cwd=ws, ok=False)
    assert r.code == 2 and "manual_max" in r.err and str(user) in r.err
    user.write_text("manual_max = [\n")
    r = run("config", cwd=ws, ok=False)
    assert str(user) in r.err and "not valid TOML" in r.err


def test_diff_is_coloured_on_a_terminal(ws: Path) -> None:
    import subprocess

    from .conftest import CTRLZ

    run("snapshot", cwd=ws)
    (ws / "README.md").write_text("# changed\n")
    leader, follower = os.openpty()
    try:
        proc = subprocess.run([CTRLZ, "diff"], cwd=ws, stdout=follower, stderr=subprocess.PIPE,
                              timeout=60)
        os.close(follower)
        data = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            data += chunk
    finally:
        os.close(leader)
    assert proc.returncode == 0
    assert b"\x1b[32m+# changed" in data and b"\x1b[31m-# demo" in data


def test_diff_refuses_a_name_that_is_neither_snapshot_nor_path(ws: Path) -> None:
    """`ctrlz diff base nope2` (a mistyped second snapshot) was taken for a path that
    matched nothing: "no changes", exit 0. Like git, it is an error; a path that exists only
    in the snapshot (deleted since) still works."""
    run("snapshot", "-m", "base", cwd=ws)
    r = run("diff", "base", "nope2", cwd=ws, ok=False)
    assert r.code == 2 and "'nope2' is neither a snapshot nor a path" in r.err
    (ws / "README.md").unlink()
    assert run("diff", "base", "README.md", "--name-status", cwd=ws).out == "D\tREADME.md\n"
    assert run("diff", "README.md", "--name-status", cwd=ws).out == "D\tREADME.md\n"


def test_a_path_with_a_newline_is_quoted_on_its_line(ws: Path) -> None:
    """Line-based output stays one path per line: a name holding a newline or a tab is
    quoted as git quotes it; --json carries it as it is."""
    run("snapshot", cwd=ws)
    (ws / "nl\ndir").mkdir()
    (ws / "nl\ndir" / "f").write_text("x")
    (ws / "tab\tname").write_text("x")
    lines = run("diff", "--name-status", cwd=ws).out.splitlines()
    assert 'A\t"nl\\ndir/f"' in lines and 'A\t"tab\\tname"' in lines
    paths = {c["path"] for c in run("diff", "--json", cwd=ws).json()["changes"]}
    assert "nl\ndir/f" in paths
