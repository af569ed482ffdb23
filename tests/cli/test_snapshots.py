"""init, snapshot, list, show, rm, pin, unpin."""

from __future__ import annotations

import os
from pathlib import Path

from .conftest import run


def test_init_is_idempotent_and_says_where_the_store_is(tmp_path: Path) -> None:
    root = tmp_path / "w"
    root.mkdir()
    first = run("init", str(root), cwd=tmp_path)
    assert f"Protecting {root}" in first.out
    assert str(tmp_path / "home") in first.out and "Excluded:" in first.out
    second = run("init", cwd=root)
    assert "Already protecting" in second.out
    data = run("init", "--json", cwd=root).json()
    assert data["created"] is False and data["workspace"] == str(root)
    assert data["excluded"]["use_gitignore"] is True


def test_commands_find_the_workspace_from_a_subdirectory(ws: Path) -> None:
    run("snapshot", cwd=ws / "src" / "pkg")
    assert len(run("list", "--json", cwd=ws / "docs").json()) == 1


def test_dash_c_selects_the_workspace(ws: Path, tmp_path: Path) -> None:
    run("-C", str(ws), "snapshot", "-m", "via -C", cwd=tmp_path)
    assert run("-C", str(ws), "list", "--json", cwd=tmp_path).json()[0]["label"] == "via -C"


def test_snapshot_prints_id_and_summary(ws: Path) -> None:
    r = run("snapshot", "-m", "first", cwd=ws)
    assert r.out.startswith("snap_") and '"first"' in r.out
    assert "+6 ~0 -0" in r.out and "added" in r.out
    (ws / "README.md").write_text("# changed\n")
    (ws / "new.txt").write_text("new\n")
    (ws / "docs" / "guide.txt").unlink()
    r = run("snapshot", cwd=ws)
    assert "+1 ~1 -1" in r.out


def test_snapshot_json_is_the_record(ws: Path) -> None:
    rec = run("snapshot", "-m", "x", "--pin", "--json", cwd=ws).json()
    assert rec["id"].startswith("snap_") and rec["label"] == "x" and rec["pinned"] is True
    assert rec["type"] == "manual" and rec["files"] == 5 and rec["symlinks"] == 1


def test_list_is_newest_first_with_footer(ws: Path) -> None:
    a = run("snapshot", "-m", "one", "--json", cwd=ws).json()
    b = run("snapshot", "-m", "two", "--json", cwd=ws).json()
    r = run("list", cwd=ws)
    lines = r.out.splitlines()
    assert lines[0].split() == ["ID", "TYPE", "LABEL", "SIZE", "FILES", "CREATED"]
    assert lines[1].startswith(b["id"]) and lines[2].startswith(a["id"])
    assert lines[-1].startswith("2 snapshots, store ") and " of cap 5.0 GiB" in lines[-1]
    records = run("list", "--json", cwd=ws).json()
    assert [x["id"] for x in records] == [b["id"], a["id"]]
    assert records[0]["parent"] == a["id"] and len(records[0]["root"]) == 64


def test_list_empty(ws: Path) -> None:
    assert run("list", "--json", cwd=ws).json() == []
    assert "0 snapshots" in run("list", cwd=ws).out


def test_show_by_id_prefix_label_number_and_latest(ws: Path) -> None:
    rec = run("snapshot", "-m", "base", "--json", cwd=ws).json()
    for ref in (rec["id"], rec["id"][:9], rec["id"][5:10], "base", "latest", str(rec["number"])):
        assert run("show", ref, "--json", cwd=ws).json()["id"] == rec["id"]
    text = run("show", "base", cwd=ws).out
    assert f"id:       {rec['id']}" in text and rec["root"] in text


def test_pin_unpin_and_rm(ws: Path) -> None:
    a = run("snapshot", "-m", "a", "--json", cwd=ws).json()
    run("snapshot", "-m", "b", cwd=ws)
    assert run("pin", "a", "--json", cwd=ws).json()["pinned"] is True
    assert "(pinned)" in run("list", cwd=ws).out
    assert "unpinned" in run("unpin", a["id"], cwd=ws).out
    assert run("show", "a", "--json", cwd=ws).json()["pinned"] is False
    r = run("rm", "a", "b", cwd=ws)
    assert "removed" in r.out and "ctrlz gc" in r.err
    assert run("list", "--json", cwd=ws).json() == []


def test_a_dry_run_leaves_alone_what_the_rollback_leaves_alone(ws: Path) -> None:
    """A file too big for max_bytes is left out of the rollback's safety snapshot, so the
    rollback does not touch it: the dry run plans exactly that (it planned a delete the
    rollback then did not do), and both say why the file was left alone."""
    base = run("snapshot", "--json", cwd=ws).json()["id"]
    (ws / "dataset.bin").write_bytes(os.urandom(3 << 20))
    env = {"CTRLZ_MAX_BYTES": "2MiB"}
    dry = run("rollback", base, "--dry-run", "--json", cwd=ws, env=env).json()
    real = run("rollback", base, "--json", cwd=ws, env=env).json()
    for result in (dry, real):
        assert not [a for a in result["actions"] if a["path"] == "dataset.bin"]
        assert [(k["path"], k["reason"].split(":")[0]) for k in result["skipped"]] == \
            [("dataset.bin", "not in the safety snapshot")]
    assert (ws / "dataset.bin").stat().st_size == 3 << 20
    text = run("rollback", base, "--dry-run", cwd=ws, env=env)
    assert "left alone: dataset.bin: not in the safety snapshot" in text.err


def test_a_workspace_over_max_bytes_is_still_snapshotted(ws: Path) -> None:
    """Over max_bytes the largest new file is left out and named in the output, in
    `ctrlz status` and in --json; refusing the snapshot instead is a setting."""
    run("snapshot", cwd=ws)
    (ws / "dataset.bin").write_bytes(b"\0" * (3 << 20))
    env = {"CTRLZ_MAX_BYTES": "2MiB"}
    r = run("snapshot", cwd=ws, env=env)
    assert "skipped dataset.bin: new or changed file of 3,145,728 bytes, left out" in r.err
    status = run("status", cwd=ws, env=env)
    assert "Skipped:   dataset.bin" in status.out and "max_bytes=2,097,152" in status.out
    data = run("snapshot", "--json", cwd=ws, env=env).json()
    assert [k["path"] for k in data["skipped"]] == ["dataset.bin"]  # workspace-relative
    shown = run("show", data["id"], cwd=ws).out
    assert "skipped:  dataset.bin: new or changed" in shown
    listed = run("list", "--json", cwd=ws).json()
    assert [k["path"] for k in listed[0]["skipped"]] == ["dataset.bin"]
    refused = run("snapshot", cwd=ws, env={**env, "CTRLZ_REFUSE_OVER_MAX_BYTES": "1"},
                  ok=False)
    assert "max_bytes=2,097,152" in refused.err and refused.code == 5


def test_max_entries_counts_files_not_folders(ws: Path) -> None:
    """The limit is the number of files (and symlinks) whatever the tree's shape, in a
    full scan and a cached one; past it the refusal is one line naming the setting."""
    (ws / "deep" / "er" / "est").mkdir(parents=True)  # folders: not counted
    files = sum(len(names) + sum(os.path.islink(os.path.join(top, d)) for d in dirs)
                for top, dirs, names in os.walk(ws))
    env = {"CTRLZ_MAX_ENTRIES": str(files)}
    run("snapshot", cwd=ws, env=env)
    run("snapshot", "-m", "again, from the stat cache", cwd=ws, env=env)
    (ws / "deep" / "er" / "est" / "one-more.txt").write_text("x\n")
    refused = run("snapshot", cwd=ws, env=env, ok=False)
    assert refused.code == 5
    assert [line for line in refused.err.splitlines() if line.strip()] == [
        f"ctrlz: error: the workspace has more than max_entries={files:,} files; exclude "
        "large generated folders (exclude_patterns in .ctrlz.toml) or raise the limit "
        "(max_entries in .ctrlz.toml, or CTRLZ_MAX_ENTRIES)"]
