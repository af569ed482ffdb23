"""What every ACP test here shares: the async backend, and the workspace the proxy serves."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import make_tree

ORIGINAL = {"existing.txt": "the original\n", "keep.txt": "never touched\n",
            "somedir": {"a.txt": "a\n", "sub": {"b.bin": b"\x00\xff binary\n"}}}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    make_tree(root, ORIGINAL)
    return root
