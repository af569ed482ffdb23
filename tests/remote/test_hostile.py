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
