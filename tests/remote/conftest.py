"""A real S3 endpoint on loopback (moto's server mode) and helpers to drive ctrlz against it.

The server runs in this process for the whole session; the ``ctrlz`` processes under test reach
it over HTTP with credentials and endpoint from the environment, as on any machine
(``AWS_ENDPOINT_URL_S3``, ``AWS_ACCESS_KEY_ID``…). Each test gets its own bucket. moto keeps
objects in memory and in module-level state, so a test may stop the server and start a new one
on the same port: what was written survives, as it would on a real service.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

CTRLZ = str(Path(sys.executable).parent / "ctrlz")


@dataclass
class S3:
    endpoint: str
    port: int
    server: Any

    def client(self) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                            aws_access_key_id="test", aws_secret_access_key="test",
                            config=Config(s3={"addressing_style": "path"}))

    def bucket(self) -> str:
        name = "b-" + uuid.uuid4().hex[:16]
        self.client().create_bucket(Bucket=name)
        return name

    def restart(self) -> None:
        """Stop the server and start another on the same port (moto's data survives)."""
        from moto.server import ThreadedMotoServer

        self.server.stop()
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self.server.start()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3]:
    pytest.importorskip("moto.server")
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    s3 = S3(f"http://{host}:{port}", port, server)
    yield s3
    s3.server.stop()


@pytest.fixture
def s3(s3_server: S3, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> S3:
    """The server, with this process's AWS environment pointed at it (and nothing of the
    real user's AWS configuration in reach)."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3_server.endpoint)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "aws-credentials"))
    return s3_server


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        import json

        return json.loads(self.out)


def ctrlz(*args: str, cwd: Path | str, home: Path | None = None, ok: bool | None = True,
          env: dict[str, str] | None = None, stdin: bytes | None = None,
          timeout: float = 120) -> Result:
    """Run the real ``ctrlz`` (``home``: its CTRLZ_HOME, i.e. which machine it is)."""
    full = {**os.environ, **(env or {})}
    if home is not None:
        full["CTRLZ_HOME"] = str(home)
    proc = subprocess.run([CTRLZ, *args], cwd=cwd, capture_output=True, env=full,
                          input=stdin, timeout=timeout)
    out, err = proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace")
    assert "Traceback" not in err, err
    if ok is True:
        assert proc.returncode == 0, (args, out, err)
    elif ok is False:
        assert proc.returncode != 0, (args, out, err)
        lines = [x for x in err.splitlines() if x.strip()]
        assert len(lines) == 1 and lines[0].startswith(("ctrlz: error: ", "Error:")), err
    return Result(proc.returncode, out, err)


def make_ws(root: Path, files: dict[str, str | bytes], home: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data.encode() if isinstance(data, str) else data)
    ctrlz("init", cwd=root, home=home)
    return root
