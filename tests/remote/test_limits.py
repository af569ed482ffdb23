"""No single upload over the S3 API's one-PUT limit: a bigger pack goes up as a multipart
upload whose completion is conditional, so it is still create-only. The limit is lowered
here (moto's real multipart API still wants parts of 5 MiB) so no test moves 5 GiB."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ctrlz.session.remotes import cloning, remotes
from ctrlz.state.remote import open_backend
from ctrlz.state.remote import s3 as s3mod
from ctrlz.workspace import Workspace

from ..conftest import tree_state
from .conftest import S3

PART = 5 << 20  # S3's (and moto's) smallest part but the last


@pytest.fixture
def low_limit(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(s3mod, "MAX_PUT", PART + (1 << 20))
    monkeypatch.setattr(s3mod, "PART_SIZE", PART)
    return s3mod.MAX_PUT


def test_over_the_limit_a_key_goes_up_in_parts_and_is_still_create_only(
        s3: S3, low_limit: int) -> None:
    bucket = s3.bucket()
    backend = open_backend(f"s3://{bucket}/p")
    big = os.urandom(2 * PART + 12345)  # three parts
    assert backend.put_new("data/ab/big", big)
    assert not backend.put_new("data/ab/big", os.urandom(len(big)))  # never overwritten
    assert backend.get("data/ab/big")[0] == big
    client = s3.client()
    head = client.head_object(Bucket=bucket, Key="p/data/ab/big")
    assert head["ETag"].strip('"').endswith("-3")  # it was a multipart upload
    # the losing upload was aborted, not left as parts to pay for
    assert not client.list_multipart_uploads(Bucket=bucket).get("Uploads")
    small = b"under the limit"
    assert backend.put_new("data/ab/small", small)
    assert "-" not in client.head_object(Bucket=bucket, Key="p/data/ab/small")["ETag"]


def test_a_push_with_a_pack_over_the_limit_round_trips(s3: S3, tmp_path: Path,
                                                       low_limit: int) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "big.bin").write_bytes(os.urandom(3 * PART))  # incompressible: one big pack
    (root / "small.txt").write_text("small\n")
    ws = Workspace.init(root)
    ws.snapshot()
    bucket = s3.bucket()
    remotes.add_remote(ws, "origin", f"s3://{bucket}/p")
    report = remotes.push_snapshots(ws)
    assert report.bytes > low_limit
    client = s3.client()
    sizes = [o["Size"] for o in client.list_objects_v2(Bucket=bucket,
                                                       Prefix="p/data/")["Contents"]]
    assert max(sizes) > low_limit
    assert remotes.verify(ws, None).ok
    other, _pull, _restored = cloning.clone(f"s3://{bucket}/p", tmp_path / "clone")
    other.close()
    assert tree_state(tmp_path / "clone") == tree_state(root)
    ws.close()
