"""One conformance suite for both backends (moto's real S3 endpoint, and file://), as restic
runs one suite against every backend: the two conditional writes are the contract."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from ctrlz.errors import RemoteError
from ctrlz.state.remote import open_backend
from ctrlz.state.remote.backend import Backend, Conflict, Limited, Missing

from .conftest import S3


@pytest.fixture(params=["s3", "file"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "s3":
        s3: S3 = request.getfixturevalue("s3")
        return open_backend(f"s3://{s3.bucket()}/pre/fix")
    return open_backend(f"file://{tmp_path}/remote")


def test_create_only_and_compare_and_swap(backend: Backend) -> None:
    backend.check()
    assert backend.put_new("data/ab/x", b"one")
    assert not backend.put_new("data/ab/x", b"two")  # never overwritten
    assert backend.get("data/ab/x")[0] == b"one"
    assert backend.get_range("data/ab/x", 1, 2) == b"ne"
    e1 = backend.put_cas("refs/w", b"v1", None)
    with pytest.raises(Conflict):
        backend.put_cas("refs/w", b"v1b", None)  # create-only on an existing key
    e2 = backend.put_cas("refs/w", b"v2", e1)
    with pytest.raises(Conflict):
        backend.put_cas("refs/w", b"stale", e1)
    assert backend.get("refs/w") == (b"v2", e2)
    with pytest.raises(Missing):
        backend.get("refs/none")
    with pytest.raises(Conflict):
        backend.put_cas("refs/none", b"x", e2)  # If-Match on a missing key
    keys = sorted(k for k, _, _ in backend.list("data/"))
    assert keys == ["data/ab/x"]
    backend.delete("data/ab/x")
    backend.delete("data/ab/x")  # deleting twice is fine
    assert list(backend.list("data/")) == []
    assert backend.server_time() > 1.7e9


def test_concurrent_compare_and_swap_loses_nothing(backend: Backend) -> None:
    backend.put_cas("ctr", b"0", None)
    done = []

    def bump() -> None:
        n = 0
        while n < 10:
            data, etag = backend.get("ctr")
            try:
                backend.put_cas("ctr", str(int(data) + 1).encode(), etag)
                n += 1
            except Conflict:
                continue
        done.append(n)

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert int(backend.get("ctr")[0]) == sum(done) == 40


def test_limited_backend_still_behaves(backend: Backend) -> None:
    limited = Limited(backend, 1 << 20)
    assert limited.put_new("k", b"x" * 1000)
    assert limited.get("k")[0] == b"x" * 1000


def test_missing_bucket_is_one_clear_line(s3: S3) -> None:
    with pytest.raises(RemoteError, match="bucket 'no-such-bucket' does not exist"):
        open_backend("s3://no-such-bucket/x").check()


def test_bad_urls() -> None:
    for url in ("http://x/y", "s3://", "s3://A_B/x", "file://relative/path", "nothing"):
        with pytest.raises(RemoteError):
            open_backend(url).check()
