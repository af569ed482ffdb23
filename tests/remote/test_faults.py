"""Faults against the real server: it stops mid-push, a ref write loses a race (a real 412),
objects are damaged on the server, credentials are wrong, the bucket is missing, and gc
races pushes."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from ctrlz.errors import RemoteError
from ctrlz.session.remotes import cloning, remotes
from ctrlz.state.remote.backend import Backend
from ctrlz.workspace import Workspace

from ..conftest import tree_state
from .conftest import S3, ctrlz, make_ws


class Hooked:
    """The real backend with a hook before chosen calls (a seam of ctrlz's own, not a mock of
    the client library: every request still goes to the server)."""

    def __init__(self, inner: Backend, before: Any) -> None:
        self.inner = inner
        self.url = inner.url
        self.before = before

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self.inner, name)

        def call(*args: Any) -> Any:
            self.before(name, args)
            return fn(*args)

        return call


def _ws(tmp_path: Path, files: dict[str, str | bytes]) -> Workspace:
    root = tmp_path / "ws"
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data.encode() if isinstance(data, str) else data)
    return Workspace.init(root)


def _hook(monkeypatch: pytest.MonkeyPatch, before: Any) -> None:
    real = remotes.open_backend

    def open_hooked(*args: Any, **kw: Any) -> Backend:
        return Hooked(real(*args, **kw), before)  # type: ignore[return-value]

    monkeypatch.setattr(remotes, "open_backend", open_hooked)


def test_server_stopped_mid_push_then_resume_converges(s3: S3, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    ws = _ws(tmp_path, {f"f{i}.txt": f"file {i}\n" * 20 for i in range(50)})
    ws.snapshot()
    remotes.add_remote(ws, "origin", f"s3://{s3.bucket()}/p")
    puts = []

    def stop_after_first_pack(name: str, args: tuple[Any, ...]) -> None:
        if name == "put_new" and str(args[0]).startswith("data/"):
            puts.append(args[0])
            if len(puts) == 2:
                s3.server.stop()  # the server dies between the first and second pack

    with pytest.MonkeyPatch.context() as mp:
        _hook(mp, stop_after_first_pack)
        with pytest.raises(RemoteError, match="cannot reach the server"):
            remotes.push_snapshots(ws)
    s3.restart()
    report = remotes.push_snapshots(ws)
    assert len(report.pushed) == 1
    # what the first attempt uploaded was the same pack, by name: nothing twice
    bucket = ws_bucket(ws).partition("/")[0]
    packs = s3.client().list_objects_v2(Bucket=bucket, Prefix="p/data/").get("Contents", [])
    assert len(packs) == report.packs
    assert remotes.verify(ws, None).ok
    ws.close()


def test_a_412_on_the_ref_is_retried_and_merged(s3: S3, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"s3://{s3.bucket()}"
    home_a, home_b = tmp_path / "home-a", tmp_path / "home-b"
    a = make_ws(tmp_path / "a", {"x": "1\n"}, home_a)
    ctrlz("snapshot", cwd=a, home=home_a)
    ctrlz("remote", "add", "origin", url, cwd=a, home=home_a)
    ctrlz("push", cwd=a, home=home_a)
    b = tmp_path / "b"
    ctrlz("clone", url, str(b), cwd=tmp_path, home=home_b)
    (b / "y").write_text("from b\n")
    ctrlz("snapshot", "-m", "b", cwd=b, home=home_b)
    (a / "x").write_text("2\n")
    ctrlz("snapshot", "-m", "a", cwd=a, home=home_a)
    cas = []

    def b_pushes_first(name: str, args: tuple[Any, ...]) -> None:
        if name == "put_cas" and str(args[0]).startswith("refs/"):
            cas.append(args[0])
            if len(cas) == 1:  # B's push lands between A's read of the ref and its write
                ctrlz("push", cwd=b, home=home_b)

    monkeypatch.setenv("CTRLZ_HOME", str(home_a))
    _hook(monkeypatch, b_pushes_first)
    with Workspace.open(a) as ws:
        report = remotes.push_snapshots(ws)
    assert len(cas) == 2  # the first write got a real 412 from the server, the retry landed
    assert len(report.pushed) == 1
    labels = {e["label"] for e in ctrlz("list", "--remote", "origin", "--json", cwd=a,
                                         home=home_a).json()}
    assert {"a", "b"} <= labels


def test_damaged_objects_on_the_server_are_refused_by_name(s3: S3, tmp_path: Path) -> None:
    bucket = s3.bucket()
    home_a = tmp_path / "home-a"
    a = make_ws(tmp_path / "a", {"x.txt": "hello " * 1000, "y.txt": "world\n"}, home_a)
    ctrlz("snapshot", cwd=a, home=home_a)
    ctrlz("remote", "add", "origin", f"s3://{bucket}", cwd=a, home=home_a)
    ctrlz("push", cwd=a, home=home_a)
    client = s3.client()
    packs = [o["Key"] for o in client.list_objects_v2(Bucket=bucket, Prefix="data/")["Contents"]]
    # the data pack is the bigger one
    key = max(packs, key=lambda k: client.head_object(Bucket=bucket, Key=k)["ContentLength"])
    good = client.get_object(Bucket=bucket, Key=key)["Body"].read()
    flipped = good[:-3] + bytes([good[-3] ^ 0xFF]) + good[-2:]
    for what, body in (("corrupt", flipped), ("truncated", good[: len(good) - 5])):
        client.put_object(Bucket=bucket, Key=key, Body=body)
        r = ctrlz("clone", f"s3://{bucket}", str(tmp_path / what), cwd=tmp_path,
                  home=tmp_path / f"h-{what}", ok=False)
        assert r.code == 8 and key in r.err, r.err
        assert "truncated" in r.err if what == "truncated" else "does not match" in r.err
        v = ctrlz("verify", "--remote", "origin", "--json", cwd=a, home=home_a, ok=None)
        assert v.code == 8 and not v.json()["ok"] and any(key in e for e in v.json()["errors"])
    client.put_object(Bucket=bucket, Key=key, Body=good)
    assert ctrlz("verify", "--remote", "origin", "--json", cwd=a, home=home_a).json()["ok"]


def test_wrong_credentials_and_missing_bucket_are_one_line_each(s3: S3,
                                                                tmp_path: Path) -> None:
    import moto.settings

    home = tmp_path / "home"
    ws = make_ws(tmp_path / "ws", {"x": "1\n"}, home)
    ctrlz("snapshot", cwd=ws, home=home)
    ctrlz("remote", "add", "gone", "s3://no-such-bucket-here/x", cwd=ws, home=home)
    r = ctrlz("push", "gone", cwd=ws, home=home, ok=False)
    assert r.code == 8 and "bucket 'no-such-bucket-here' does not exist" in r.err
    ctrlz("remote", "add", "origin", f"s3://{s3.bucket()}", cwd=ws, home=home)
    old = moto.settings.INITIAL_NO_AUTH_ACTION_COUNT
    moto.settings.INITIAL_NO_AUTH_ACTION_COUNT = 0  # the server now checks signatures
    try:
        r = ctrlz("push", "origin", cwd=ws, home=home, ok=False,
                  env={"AWS_ACCESS_KEY_ID": "AKIAWRONGWRONGWRONG1"})
        assert r.code == 8 and "credentials were refused" in r.err
    finally:
        moto.settings.INITIAL_NO_AUTH_ACTION_COUNT = old
    r = ctrlz("push", "origin", cwd=ws, home=home, ok=False,
              env={"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""})
    assert "no AWS credentials found" in r.err


def test_gc_racing_pushes_never_removes_what_a_push_names(s3: S3, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTRLZ_REMOTE_GRACE", "1")
    ws = _ws(tmp_path, {"keep.txt": "keep\n"})
    remotes.add_remote(ws, "origin", f"s3://{s3.bucket()}")
    # garbage: snapshots pushed and forgotten, whose contents later pushes bring back
    for i in range(3):
        (ws.root / "payload.txt").write_text(f"payload {i}\n" * 100)
        snap = ws.snapshot(type="auto")
        remotes.push_snapshots(ws)
        remotes.forget(ws, None, [snap.id])
    import time

    time.sleep(1.5)  # only packs older than the grace period (1 s) may be condemned
    first = remotes.gc(ws, None)  # condemns the forgotten snapshots' packs
    assert first.condemned
    time.sleep(2.5)  # past the grace period: the next gc may delete them
    errors: list[BaseException] = []
    pushed: list[str] = []

    def pusher() -> None:
        try:
            with Workspace.open(ws.root) as w:
                for i in range(3):  # the same contents again: objects in condemned packs
                    (w.root / "payload.txt").write_text(f"payload {i}\n" * 100)
                    snap = w.snapshot(type="auto")
                    remotes.push_snapshots(w)
                    pushed.append(snap.id)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    def collector() -> None:
        try:
            with Workspace.open(ws.root) as w:
                for _ in range(4):
                    remotes.gc(w, None)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=pusher), threading.Thread(target=collector)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    import traceback

    assert not errors, "".join(traceback.format_exception(errors[0]))
    time.sleep(2.5)
    final = remotes.gc(ws, None)
    assert final.live_packs > 0
    report = remotes.verify(ws, None)
    assert report.ok, report.errors
    names = {e["id"] for e in remotes.remote_listing(ws, None)[1]}
    assert set(pushed) <= names
    dest = tmp_path / "clone"
    other, _pull, _restored = cloning.clone(f"s3://{ws_bucket(ws)}", dest)
    other.close()
    assert tree_state(dest) == tree_state(ws.root)
    ws.close()


def ws_bucket(ws: Workspace) -> str:
    return remotes.list_remotes(ws)[0].url[len("s3://"):]
