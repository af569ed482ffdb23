"""Hostile input to the new commands: one line on stderr, a non-zero exit, never a traceback."""

from __future__ import annotations

from pathlib import Path

from .conftest import ctrlz, make_ws


def test_bad_input_is_one_line_each(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ws = make_ws(tmp_path / "ws", {"a": "1\n"}, home)
    ctrlz("snapshot", cwd=ws, home=home)
    bad = [
        ["remote", "add", "x", "http://example.com/bucket"],
        ["remote", "add", "x", "s3://"],
        ["remote", "add", "x", "s3://Bad_Bucket/x"],
        ["remote", "add", "x", "file://relative/path"],
        ["remote", "add", "bad name", "file:///tmp/x"],
        ["remote", "add", "-", "file:///tmp/x"],
        ["remote", "add", "x", "file:///tmp/x", "--encrypt"],
        ["remote", "add", "x", "file:///tmp/x", "--key-env", "K"],
        ["remote", "add", "x", "file:///tmp/x", "--encrypt", "--key-file", "/nonexistent"],
        ["remote", "add", "x", "s3://b-ok/x", "--endpoint-url", "ftp://h"],
        ["remote", "add", "x", "s3://b\udcff/x"],
        ["remote", "remove", "nope"],
        ["remote", "forget", "nope", "snap_x"],
        ["push"],
        ["push", "nope"],
        ["pull", "nope"],
        ["list", "--remote", "nope"],
        ["verify", "--remote", "nope"],
        ["gc", "--remote", "nope"],
        ["export", "nope", "-o", str(tmp_path / "x.ctrlz")],
        ["export", "latest", "-o", str(tmp_path)],
        ["export", "latest", "-o", str(tmp_path / "missing-dir" / "x.ctrlz")],
        ["import", str(tmp_path / "missing.ctrlz")],
        ["import", str(ws / "a")],
        ["clone", "s3://", str(tmp_path / "c")],
        ["clone", "file:///nonexistent-ctrlz-remote", str(tmp_path / "c")],
        ["clone", f"file://{tmp_path}", str(ws)],
        ["restore", "snap_nope", "--to", str(tmp_path / "r")],
    ]
    for args in bad:
        r = ctrlz(*args, cwd=ws, home=home, ok=False)
        assert r.code in (1, 2, 3, 4, 8), (args, r.code, r.err)
    ctrlz("remote", "add", "x", f"file://{tmp_path}/r", cwd=ws, home=home)
    r = ctrlz("remote", "add", "x", f"file://{tmp_path}/r2", cwd=ws, home=home, ok=False)
    assert "exists already" in r.err
    r = ctrlz("pull", "x", cwd=ws, home=home, ok=False)  # nothing pushed there yet
    assert "holds no ctrlz remote yet" in r.err
    r = ctrlz("clone", f"file://{tmp_path}/r", str(tmp_path / "c"), cwd=tmp_path, home=home,
              ok=False)
    assert r.code == 8
    # non-UTF-8 bytes in a snapshot reference and a path
    r = ctrlz("export", "\udcff", "-o", "-", cwd=ws, home=home, ok=False)
    assert r.code == 4


def _crafted(path: Path, records: list[dict[str, object]], objects: object = None) -> None:
    """An archive written by ctrlz's own writer, with a crafted manifest."""
    import time

    from ctrlz.state.hashing import digest_function
    from ctrlz.state.interchange.archive import ArchiveWriter
    from ctrlz.state.trees import DIR, FILE, Entry, encode_tree

    h = digest_function("blake3")
    blob = b"one\n"
    t = encode_tree([Entry(b"a", FILE, 0o644, len(blob), 0, h(blob))])
    top = encode_tree([Entry(b"0", DIR, 0o755, 0, 0, h(t))])
    objs = [(h(blob), blob), (h(t), t), (h(top), top)]
    for r in records:
        r.setdefault("root", h(top).hex())
    with open(path, "wb") as out:
        w = ArchiveWriter(out, "blake3", {"created_ns": time.time_ns(), "since": None,
                                          "snapshots": records,
                                          "objects": len(objs) if objects is None else objects})
        for oid, data in objs:
            w.add(oid, len(data), 0, len(data), iter([data]))
        w.close()


def _rec(sid: str, **kw: object) -> dict[str, object]:
    import time

    return {"id": sid, "parent": None, "type": "manual", "label": "crafted", "pinned": False,
            "created_ns": time.time_ns(), "files": 1, "dirs": 0, "symlinks": 0, "bytes": 4,
            "rules": {}, "skipped": [], "roots": [], **kw}


def test_a_hostile_archive_manifest_is_refused_as_damaged_in_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ws = make_ws(tmp_path / "ws", {"x": "x\n"}, home)
    cases = {
        "dup": ([_rec("snap_dupdup01"), _rec("snap_dupdup01", label="other")], None),
        "count": ([_rec("snap_count001")], "abc"),
        "big_ns": ([_rec("snap_bigns001", created_ns=10**40)], None),
        "escape": ([_rec("snap_x\n\x1b[31mRED")], None),
    }
    for case, (records, objects) in cases.items():
        arc = tmp_path / f"{case}.ctrlz"
        _crafted(arc, records, objects)
        r = ctrlz("import", str(arc), cwd=ws, home=home, ok=False)
        assert r.code == 8 and "is damaged" in r.err, (case, r.err)
        assert "\x1b" not in r.err + r.out
    assert "snap_" not in ctrlz("list", cwd=ws, home=home).out


def test_a_failed_import_to_a_new_directory_leaves_no_store_behind(tmp_path: Path) -> None:
    home = tmp_path / "home"
    arc = tmp_path / "bad.ctrlz"
    arc.write_bytes(b"CTZARCH1 not really")
    ctrlz("import", str(arc), "--to", str(tmp_path / "dest"), cwd=tmp_path, home=home,
          ok=False)
    assert not (tmp_path / "dest").exists()
    assert not (home / "workspaces").exists() or not any((home / "workspaces").iterdir())
