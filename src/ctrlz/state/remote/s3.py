"""A remote on any service that speaks the S3 API, through boto3.

Credentials, region and endpoint come from the standard AWS chain, which botocore implements
and ctrlz never duplicates or stores: ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/
``AWS_SESSION_TOKEN``, ``AWS_PROFILE`` and the shared ``~/.aws/config`` and
``~/.aws/credentials`` files, SSO and instance roles, and ``AWS_ENDPOINT_URL_S3`` /
``AWS_ENDPOINT_URL`` (or ``endpoint_url`` in a profile). An explicit ``--endpoint-url`` or
``--region`` saved with the remote wins, as it would on the aws command line.

Non-AWS endpoints get path-style addressing (``http://host/bucket/key``), which every
S3-compatible server accepts; checksums are computed only where the API requires them, since
ctrlz checks every object against its id anyway and some servers reject the newer trailers.
Conditional writes are ``IfNoneMatch="*"`` and ``IfMatch=<ETag>``: a 412 becomes
:class:`~.backend.Conflict`.
"""

from __future__ import annotations

import email.utils
import os
from collections.abc import Iterator
from typing import Any

from ...errors import RemoteError
from .backend import Conflict, Missing

#: the most one PUT may carry on S3; a bigger object goes up in parts (:meth:`put_new`)
MAX_PUT = 5 << 30
#: part size of a multipart upload (S3: 5 MiB to 5 GiB a part, at most 10,000 parts)
PART_SIZE = 64 << 20
MAX_PARTS = 10_000

_DENIED = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "InvalidToken",
           "ExpiredToken", "TokenRefreshRequired", "InvalidClientTokenId", "AllAccessDisabled"}


class S3Backend:
    def __init__(self, bucket: str, prefix: str, endpoint_url: str | None = None,
                 region: str | None = None, profile: str | None = None,
                 model_cache: str | None = None) -> None:
        # botocore, not boto3: boto3 is botocore plus resources and s3transfer, which ctrlz
        # does not use and which cost ~20 ms more to import; the credential chain is botocore's
        import botocore.exceptions as bexc
        import botocore.session
        from botocore.config import Config

        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.url = f"s3://{bucket}/{self.prefix}".rstrip("/")
        self._exc = bexc
        # One client. botocore already addresses a custom endpoint (``--endpoint-url`` or the
        # configured ``AWS_ENDPOINT_URL_S3``/profile one) path-style and signs for us-east-1
        # when no region is configured, which is what every S3-compatible server accepts.
        config = Config(request_checksum_calculation="when_required",
                        response_checksum_validation="when_required",
                        retries={"max_attempts": 3, "mode": "standard"},
                        connect_timeout=10, read_timeout=120, max_pool_connections=16)
        try:
            session = botocore.session.Session(profile=profile)
            session.register_component("data_loader", _quick_loader(
                session.get_config_variable("data_path"), model_cache))
            session.get_component("response_parser_factory").set_parser_defaults(
                timestamp_parser=_timestamp)
            client = session.create_client("s3", endpoint_url=endpoint_url or None,
                                           region_name=region or None, config=config)
        except bexc.ProfileNotFound as exc:
            raise RemoteError(f"{self.url}: {exc}") from None
        except (bexc.BotoCoreError, ValueError) as exc:
            raise RemoteError(f"{self.url}: cannot set up the S3 client: {exc}") from None
        self.client = client
        self.endpoint = client.meta.endpoint_url

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _error(self, exc: Exception, key: str) -> RemoteError:
        """One clear line for every way a request can fail."""
        bexc = self._exc
        where = f"{self.url} ({self.endpoint})"
        if isinstance(exc, bexc.NoCredentialsError):
            return RemoteError(f"{where}: no AWS credentials found; set AWS_ACCESS_KEY_ID and "
                               "AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or ~/.aws/credentials")
        if isinstance(exc, bexc.ClientError):
            err = exc.response.get("Error", {})
            code = str(err.get("Code", ""))
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in ("PreconditionFailed", "ConditionalRequestConflict") or status in (
                    412, 409):
                return Conflict(f"{where}: {key} changed meanwhile")
            if code == "NoSuchBucket":
                return RemoteError(f"{where}: the bucket {self.bucket!r} does not exist; "
                                   "create it first (ctrlz never creates buckets)")
            if code in ("NoSuchKey", "404", "NotFound"):
                return Missing(f"{where}: {key} does not exist")
            if code in _DENIED or status == 403:
                return RemoteError(f"{where}: the credentials were refused ({code or status}); "
                                   "check AWS_ACCESS_KEY_ID / AWS_PROFILE and the bucket policy")
            return RemoteError(f"{where}: {key}: {code or status}: {err.get('Message', exc)}")
        if isinstance(exc, (bexc.EndpointConnectionError, bexc.ConnectionClosedError,
                            bexc.ReadTimeoutError, bexc.ConnectTimeoutError)):
            return RemoteError(f"{where}: cannot reach the server ({type(exc).__name__}); "
                               "the push or pull can be run again and resumes")
        if isinstance(exc, bexc.BotoCoreError):
            return RemoteError(f"{where}: {exc}")
        return RemoteError(f"{where}: {type(exc).__name__}: {exc}")

    def _call(self, key: str, fn: Any, **kw: Any) -> Any:
        try:
            return fn(Bucket=self.bucket, **kw)
        except (self._exc.BotoCoreError, self._exc.ClientError) as exc:
            raise self._error(exc, key) from None
        except OSError as exc:  # a socket error botocore did not wrap
            raise self._error(exc, key) from None

    def get(self, key: str) -> tuple[bytes, str]:
        r = self._call(key, self.client.get_object, Key=self._key(key))
        try:
            return r["Body"].read(), r["ETag"]
        except (self._exc.BotoCoreError, OSError) as exc:
            raise self._error(exc, key) from None

    def get_range(self, key: str, start: int, length: int) -> bytes:
        if length <= 0:
            return b""
        r = self._call(key, self.client.get_object, Key=self._key(key),
                       Range=f"bytes={start}-{start + length - 1}")
        try:
            return r["Body"].read()
        except (self._exc.BotoCoreError, OSError) as exc:
            raise self._error(exc, key) from None

    def put_new(self, key: str, data: bytes) -> bool:
        if len(data) > MAX_PUT:
            return self._put_new_parts(key, data)
        try:
            self._call(key, self.client.put_object, Key=self._key(key), Body=data,
                       IfNoneMatch="*")
        except Conflict:
            return False
        return True

    def _put_new_parts(self, key: str, data: bytes) -> bool:
        """:meth:`put_new` for more than one PUT may carry (5 GiB on S3): a multipart upload
        whose completion is conditional (``If-None-Match: *``), so the key still appears
        whole or not at all and is never overwritten. Any failure aborts the upload, so no
        parts are left to bill (a killed process leaves them for the bucket's
        ``AbortIncompleteMultipartUpload`` lifecycle rule)."""
        size = max(PART_SIZE, -(-len(data) // MAX_PARTS))
        full = self._key(key)
        up = self._call(key, self.client.create_multipart_upload, Key=full)
        upload = up["UploadId"]
        try:
            parts = []
            view = memoryview(data)
            for number, start in enumerate(range(0, len(data), size), 1):
                r = self._call(key, self.client.upload_part, Key=full, UploadId=upload,
                               PartNumber=number, Body=bytes(view[start:start + size]))
                parts.append({"ETag": r["ETag"], "PartNumber": number})
            self._call(key, self.client.complete_multipart_upload, Key=full,
                       UploadId=upload, MultipartUpload={"Parts": parts}, IfNoneMatch="*")
        except BaseException as exc:
            try:
                self._call(key, self.client.abort_multipart_upload, Key=full,
                           UploadId=upload)
            except RemoteError:
                pass  # the first error is the one to report
            if isinstance(exc, Conflict):
                return False  # it exists: the same bytes, by its name
            raise
        return True

    def put_cas(self, key: str, data: bytes, etag: str | None) -> str:
        cond = {"IfMatch": etag} if etag is not None else {"IfNoneMatch": "*"}
        try:
            r = self._call(key, self.client.put_object, Key=self._key(key), Body=data, **cond)
        except Missing:  # If-Match on a key someone deleted
            raise Conflict(f"{self.url}: {key} changed meanwhile") from None
        return str(r["ETag"])

    def delete(self, key: str) -> None:
        self._call(key, self.client.delete_object, Key=self._key(key))

    def list(self, prefix: str) -> Iterator[tuple[str, int, float]]:
        full = self._key(prefix)
        cut = len(self.prefix) + 1 if self.prefix else 0
        token: str | None = None
        while True:
            kw: dict[str, Any] = {"Prefix": full}
            if token:
                kw["ContinuationToken"] = token
            r = self._call(prefix, self.client.list_objects_v2, **kw)
            for o in r.get("Contents", []):
                yield o["Key"][cut:], int(o["Size"]), o["LastModified"].timestamp()
            if not r.get("IsTruncated"):
                return
            token = r.get("NextContinuationToken")

    def _head_bucket(self) -> Any:
        try:
            return self._call("", self.client.head_bucket)
        except Missing:
            raise RemoteError(f"{self.url} ({self.endpoint}): the bucket {self.bucket!r} does "
                              "not exist; create it first (ctrlz never creates buckets)") from None

    def server_time(self) -> float:
        r = self._head_bucket()
        date = r.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
        if not date:
            import time

            return time.time()
        return email.utils.parsedate_to_datetime(date).timestamp()

    def check(self) -> None:
        self._head_bucket()


def parse_s3_url(url: str) -> tuple[str, str]:
    """``s3://bucket/prefix`` → (bucket, prefix)."""
    rest = url[len("s3://"):]
    bucket, _, prefix = rest.partition("/")
    if not bucket or not _valid_bucket(bucket):
        raise ValueError(f"{url!r} does not name a valid bucket (s3://BUCKET/PREFIX)")
    return bucket, prefix.strip("/")


def _valid_bucket(name: str) -> bool:
    ok = set("abcdefghijklmnopqrstuvwxyz0123456789.-_")
    return 3 <= len(name) <= 63 and set(name) <= ok and name[0].isalnum() and \
        name[-1].isalnum()


def _timestamp(value: Any) -> Any:
    """A listing's ``LastModified`` (``2026-11-24T01:34:11.000Z``) parsed by the standard
    library; botocore's default goes through dateutil at ~0.1 ms a key, which a push pays
    for every pack and index it lists. Anything else goes to botocore's own parser."""
    from datetime import datetime

    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
            if parsed.tzinfo is not None:
                return parsed
        except ValueError:
            pass
    from botocore.utils import parse_timestamp

    return parse_timestamp(value)


def _quick_loader(data_path: str | None, model_cache: str | None = None) -> Any:
    """botocore's data loader, except that checking that a service exists looks at that
    service's directory only. botocore lists every service's directory (about 400, ~35 ms on
    these machines) before loading one model; a remote command pays that on every start.
    With ``model_cache`` (a directory), the JSON files it parses are kept there as marshal
    copies (:func:`_cached_files`)."""
    from botocore.loaders import Loader, create_loader

    class Known(list):  # type: ignore[type-arg]
        """The services botocore knows, listed only if something needs more than ``in``."""

        def __init__(self, loader: Loader, type_name: str) -> None:
            super().__init__()
            self.loader, self.type_name, self.full = loader, type_name, False

        def _fill(self) -> None:
            if not self.full:
                self.full = True
                self.extend(Loader.list_available_services(self.loader, self.type_name))

        def __contains__(self, name: object) -> bool:
            try:
                if isinstance(name, str) and self.loader.list_api_versions(name,
                                                                           self.type_name):
                    return True
            except Exception:  # noqa: BLE001 - unknown here: ask botocore's full listing
                pass
            self._fill()
            return list.__contains__(self, name)

        def __iter__(self) -> Any:
            self._fill()
            return list.__iter__(self)

        def __len__(self) -> int:
            self._fill()
            return list.__len__(self)

    class QuickLoader(Loader):  # type: ignore[misc]
        def list_available_services(self, type_name: str) -> list[str]:
            return Known(self, type_name)

    # the same search path as botocore's own loader (``AWS_DATA_PATH`` first)
    return QuickLoader(extra_search_paths=list(create_loader(data_path).search_paths),
                       file_loader=_cached_files(model_cache) if model_cache else None,
                       include_default_search_paths=False)


def _cached_files(cache: str) -> Any:
    """botocore's JSON file loader, with a marshal copy of each file it parses kept in
    ``cache``. Making an S3 client parses ``endpoints.json``, the S3 model and its endpoint
    rules (about 1.7 MB of JSON, 30-50 ms here); reading marshal copies takes a tenth of that,
    on every remote command after the first. A copy is named by the source file's path,
    size and mtime and by the Python version, so an upgraded botocore (or Python) reads its
    own files again; a missing, unreadable or damaged copy (each starts with the SHA-256 of the
    rest, checked before marshal, which trusts its input, reads it) is parsed from the source,
    as without the cache. Only botocore's public data is cached, never anything about the
    user."""
    import hashlib
    import json
    import marshal
    import sys

    from botocore.loaders import JSONFileLoader

    from ..fsio.atomic import atomic_write_bytes

    class CachedFiles(JSONFileLoader):  # type: ignore[misc]
        def load_file(self, file_path: str) -> Any:
            for ext in (".json", ".json.gz"):
                try:
                    st = os.stat(file_path + ext)
                except OSError:
                    continue
                name = hashlib.sha256(
                    f"{file_path}{ext}\0{st.st_size}\0{st.st_mtime_ns}\0{sys.version}"
                    .encode()).hexdigest()[:40]
                copy = os.path.join(cache, name)
                try:
                    with open(copy, "rb") as f:
                        raw = f.read()  # whole: marshal.load(f) reads in small pieces
                    # marshal trusts its input: a copy damaged on disk must not reach it
                    if hashlib.sha256(raw[32:]).digest() == raw[:32]:
                        kept = marshal.loads(raw[32:])
                        if isinstance(kept, dict):  # every botocore data file is an object
                            return kept
                except (OSError, EOFError, ValueError, TypeError):
                    pass
                data = JSONFileLoader.load_file(self, file_path)
                if data is not None:
                    try:
                        os.makedirs(cache, exist_ok=True)
                        # plain dicts (marshal knows no OrderedDict; dicts keep order)
                        body = marshal.dumps(json.loads(json.dumps(data)))
                        atomic_write_bytes(copy, hashlib.sha256(body).digest() + body,
                                           durable=False)
                    except (OSError, ValueError):
                        pass  # only a copy: parsed again next time
                return data
            return JSONFileLoader.load_file(self, file_path)

    return CachedFiles()
