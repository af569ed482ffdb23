"""Two machines (two CTRLZ_HOMEs, two directories) sharing one S3 remote, through the CLI."""

from __future__ import annotations

from pathlib import Path

from ..conftest import tree_state
from .conftest import S3, ctrlz, make_ws


def test_machine_a_pushes_machine_b_clones_rolls_back_pushes_a_pulls(s3: S3,
                                                                      tmp_path: Path) -> None:
    url = f"s3://{s3.bucket()}/team"
    home_a, home_b = tmp_path / "home-a", tmp_path / "home-b"
    a = make_ws(tmp_path / "a", {"README.md": "# app\n", "src/app.py": "v = 1\n"}, home_a)
    ctrlz("snapshot", "-m", "baseline", cwd=a, home=home_a)
    # an agent session on A: pre-run and post-run snapshots made by `ctrlz run`
    ctrlz("run", "--", "sh", "-c", "echo 'v = 2' > src/app.py && echo notes > notes.txt",
          cwd=a, home=home_a)
    ctrlz("remote", "add", "origin", url, cwd=a, home=home_a)
    assert "3 snapshots not pushed" in ctrlz("status", cwd=a, home=home_a).out
    pushed = ctrlz("push", "--json", cwd=a, home=home_a).json()
    assert len(pushed["pushed"]) == 3
    assert "everything pushed" in ctrlz("status", cwd=a, home=home_a).out
    listed = ctrlz("list", "--remote", "origin", "--json", cwd=a, home=home_a).json()
    assert len(listed) == 3 and all(e["origin"]["machine"] and e["origin"]["user"]
                                    for e in listed)
    assert {e["origin"]["agent"] for e in listed} >= {"sh"}  # the run's snapshots name it
    assert sum(1 for e in listed if e["origin"]["session"]) == 2

    # machine B: clone, same snapshots and diffs, roll back, push
    b = tmp_path / "b"
    cloned = ctrlz("clone", url, str(b), "--json", cwd=tmp_path, home=home_b).json()
    assert len(cloned["snapshots"]) == 3
    assert tree_state(b) == tree_state(a)
    ids_a = [s["id"] for s in ctrlz("list", "--json", cwd=a, home=home_a).json()]
    ids_b = [s["id"] for s in ctrlz("list", "--json", cwd=b, home=home_b).json()]
    assert ids_a == ids_b
    diff_a = ctrlz("diff", "baseline", ids_a[0], "--name-status", cwd=a, home=home_a).out
    assert diff_a == ctrlz("diff", "baseline", ids_b[0], "--name-status", cwd=b,
                           home=home_b).out
    assert "src/app.py" in diff_a and "notes.txt" in diff_a
    ctrlz("rollback", "baseline", cwd=b, home=home_b)
    assert (b / "src/app.py").read_text() == "v = 1\n" and not (b / "notes.txt").exists()
    ctrlz("snapshot", "-m", "rolled back on b", cwd=b, home=home_b)
    remote_b = ctrlz("list", "--remote", "origin", "--json", cwd=b, home=home_b).json()
    assert len(remote_b) == 3  # B's clone shares A's workspace on the remote
    ctrlz("push", cwd=b, home=home_b)

    # A pulls and sees B's snapshot, with B's provenance
    pulled = ctrlz("pull", "--json", cwd=a, home=home_a).json()
    assert len(pulled["pulled"]) == 2  # B's safety snapshot and its manual one
    mine = {s["id"]: s for s in ctrlz("list", "--json", cwd=a, home=home_a).json()}
    b_snap = next(s for s in mine.values() if s["label"] == "rolled back on b")
    ctrlz("rollback", b_snap["id"], cwd=a, home=home_a)
    assert tree_state(a) == tree_state(b)
    listed = ctrlz("list", "--remote", "origin", "--json", cwd=a, home=home_a).json()
    assert len(listed) == 5
    v = ctrlz("verify", "--remote", "origin", "--json", cwd=a, home=home_a).json()
    assert v["ok"] and v["snapshots"] == 5
    ctrlz("verify", cwd=a, home=home_a)


def test_restore_of_a_remote_only_snapshot_fetches_what_it_needs(s3: S3,
                                                                  tmp_path: Path) -> None:
    url = f"s3://{s3.bucket()}"
    home_a, home_b = tmp_path / "home-a", tmp_path / "home-b"
    a = make_ws(tmp_path / "a", {"big.bin": b"\x01" * 200_000, "x.txt": "x\n"}, home_a)
    ctrlz("snapshot", "-m", "one", cwd=a, home=home_a)
    ctrlz("remote", "add", "origin", url, cwd=a, home=home_a)
    ctrlz("push", cwd=a, home=home_a)
    b = tmp_path / "b"
    ctrlz("clone", url, str(b), cwd=tmp_path, home=home_b)
    (a / "x.txt").write_text("changed on a\n")
    snap = ctrlz("snapshot", "--json", cwd=a, home=home_a).json()["id"]
    ctrlz("push", cwd=a, home=home_a)
    out = tmp_path / "out"
    r = ctrlz("restore", snap, "--to", str(out), cwd=b, home=home_b)
    assert "Restored" in r.out
    assert (out / "x.txt").read_text() == "changed on a\n"
    assert (out / "big.bin").read_bytes() == b"\x01" * 200_000


def test_encrypted_remote_holds_nothing_readable(s3: S3, tmp_path: Path) -> None:
    bucket = s3.bucket()
    home = tmp_path / "home"
    secret = b"top secret content " * 100
    ws = make_ws(tmp_path / "ws", {"secret.txt": secret}, home)
    ctrlz("snapshot", cwd=ws, home=home)
    key = tmp_path / "key"
    key.write_text("correct horse battery staple\n")
    ctrlz("remote", "add", "enc", f"s3://{bucket}/e", "--encrypt", "--key-file", str(key),
          cwd=ws, home=home)
    ctrlz("push", "enc", cwd=ws, home=home)
    client = s3.client()
    for o in client.list_objects_v2(Bucket=bucket)["Contents"]:
        body = client.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
        assert b"top secret" not in body and b"secret.txt" not in body, o["Key"]
    # a clone with the wrong key is refused up front; the right one works
    wrong = tmp_path / "wrong"
    wrong.write_text("nope")
    r = ctrlz("clone", f"s3://{bucket}/e", str(tmp_path / "c1"), "--encrypt", "--key-file",
              str(wrong), cwd=tmp_path, home=tmp_path / "h2", ok=False)
    assert "wrong encryption key" in r.err
    r = ctrlz("clone", f"s3://{bucket}/e", str(tmp_path / "c2"), cwd=tmp_path,
              home=tmp_path / "h3", ok=False)
    assert "is encrypted" in r.err
    ctrlz("clone", f"s3://{bucket}/e", str(tmp_path / "c3"), "--encrypt", "--key-env", "K",
          cwd=tmp_path, home=tmp_path / "h4", env={"K": "correct horse battery staple"})
    assert (tmp_path / "c3" / "secret.txt").read_bytes() == secret
    assert ctrlz("verify", "--remote", "enc", "--json", cwd=ws, home=home).json()["ok"]


def test_file_remote_round_trip(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ws = make_ws(tmp_path / "ws", {"a": "1\n", "d/b": "2\n"}, home)
    ctrlz("snapshot", cwd=ws, home=home)
    ctrlz("remote", "add", "nas", f"file://{tmp_path}/nas", cwd=ws, home=home)
    ctrlz("push", "nas", cwd=ws, home=home)
    ctrlz("clone", f"file://{tmp_path}/nas", str(tmp_path / "c"), cwd=tmp_path,
          home=tmp_path / "h2")
    assert tree_state(tmp_path / "c") == tree_state(ws)
    remotes = ctrlz("remote", "list", "--json", cwd=ws, home=home).json()
    assert remotes[0]["name"] == "nas" and remotes[0]["unpushed"] == 0
    ctrlz("remote", "remove", "nas", cwd=ws, home=home)
    assert ctrlz("remote", "list", "--json", cwd=ws, home=home).json() == []
