"""Remote stores: where snapshots go beyond one machine.

Terms (as in restic): a *remote* is a prefix in an object store (a bucket on any service
speaking the S3 API, or a local directory for ``file://``); a *pack* is an immutable,
content-addressed file of object blobs; an *index* says where each object sits in one pack; a
*ref* names one workspace's snapshots and who made each. Packs and indexes are written once and
never overwritten; refs and the gc state change only by compare-and-swap.

* :mod:`.backend` — the seam: get, ranged get, create-only put, compare-and-swap put, list,
  delete; :class:`~.backend.Limited` bounds upload bandwidth
* :mod:`.s3`, :mod:`.local` — the two backends
* :mod:`.crypto` — AES-256-GCM client-side encryption
* :mod:`.repo` — the remote format on top of a backend
* :mod:`.known` — the local cache of trees known complete on a remote (what a push skips)

What to push, pull or collect is decided in :mod:`ctrlz.engine.remote`; credentials are
never handled here beyond handing the AWS chain to boto3.
"""

from __future__ import annotations

from pathlib import Path

from ...errors import RemoteError
from .backend import Backend


def open_backend(url: str, endpoint_url: str | None = None, region: str | None = None,
                 profile: str | None = None, model_cache: str | None = None) -> Backend:
    """A backend for ``s3://bucket/prefix`` or ``file:///absolute/path``. ``model_cache``: a
    directory where an S3 backend may keep botocore's parsed models (:mod:`.s3`)."""
    if url.startswith("s3://"):
        from .s3 import S3Backend, parse_s3_url

        try:
            bucket, prefix = parse_s3_url(url)
        except ValueError as exc:
            raise RemoteError(str(exc)) from None
        return S3Backend(bucket, prefix, endpoint_url, region, profile, model_cache)
    if url.startswith("file://"):
        from .local import LocalBackend

        path = url[len("file://"):]
        if not path.startswith("/"):
            raise RemoteError(f"{url!r}: a file:// remote needs an absolute path "
                              "(file:///srv/ctrlz)")
        return LocalBackend(Path(path))
    raise RemoteError(f"{url!r} is not a remote URL; use s3://BUCKET/PREFIX or "
                      "file:///PATH")


def check_url(url: str) -> str:
    """``url`` if it is a remote URL ctrlz can use, else a :class:`RemoteError`."""
    if "\0" in url or any(ord(c) < 32 for c in url):
        raise RemoteError(f"{url!r} is not a remote URL")
    if url.startswith("s3://"):
        from .s3 import parse_s3_url

        try:
            parse_s3_url(url)
        except ValueError as exc:
            raise RemoteError(str(exc)) from None
        return url.rstrip("/")
    if url.startswith("file://"):
        if not url[len("file://"):].startswith("/"):
            raise RemoteError(f"{url!r}: a file:// remote needs an absolute path "
                              "(file:///srv/ctrlz)")
        return url.rstrip("/") if url != "file:///" else url
    raise RemoteError(f"{url!r} is not a remote URL; use s3://BUCKET/PREFIX or file:///PATH")
