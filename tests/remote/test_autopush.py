"""remote.auto_push: ``ctrlz run`` pushes its snapshots in the background, and a remote that
cannot be reached is retried and reported, never failing the run."""

from __future__ import annotations

from pathlib import Path

from .conftest import ctrlz, make_ws


def test_run_pushes_its_snapshots(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ws = make_ws(tmp_path / "ws", {"a.txt": "1\n"}, home)
    (ws / ".ctrlz.toml").write_text('remote.auto_push = "origin"\n')
    ctrlz("remote", "add", "origin", f"file://{tmp_path}/remote", cwd=ws, home=home)
    ctrlz("run", "--", "sh", "-c", "echo 2 > a.txt", cwd=ws, home=home)
    st = ctrlz("status", "--json", cwd=ws, home=home).json()
    assert st["remotes"] == {"origin": {"unpushed": 0}}
    listed = ctrlz("list", "--remote", "origin", "--json", cwd=ws, home=home).json()
    assert {e["type"] for e in listed} == {"pre-run", "post-run"}


def test_unreachable_remote_never_fails_the_run(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ws = make_ws(tmp_path / "ws", {"a.txt": "1\n"}, home)
    ctrlz("remote", "add", "origin", "s3://ctrlz-no-such-bucket/x", "--endpoint-url",
          "http://127.0.0.1:9", cwd=ws, home=home)
    r = ctrlz("run", "--", "true", cwd=ws, home=home,
              env={"CTRLZ_AUTO_PUSH": "origin", "AWS_ACCESS_KEY_ID": "x",
                   "AWS_SECRET_ACCESS_KEY": "y"})
    assert r.code == 0 and "auto push to origin did not finish" in r.err
    st = ctrlz("status", "--json", cwd=ws, home=home).json()
    assert st["remotes"]["origin"]["unpushed"] == 2
