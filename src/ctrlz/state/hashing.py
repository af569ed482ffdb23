"""Content hashing: the one place that knows which algorithms ids are made with.

A repository picks its algorithm once, at creation, and records it in the catalog; every object
id in that repository is the digest of the object's raw bytes under that algorithm. BLAKE3 is
the default because it is several times faster than SHA-256 on large inputs and releases the
GIL; SHA-256 exists because the SnapshotManager API documents ``ContentHash`` as SHA-256.
"""

from __future__ import annotations

from collections.abc import Callable

import blake3

ALGORITHMS = ("blake3", "sha256")
DEFAULT_ALGORITHM = "blake3"
DIGEST_SIZE = 32  # both algorithms give 32 bytes, so ids have one width everywhere

# Above this size BLAKE3 is allowed to use its own thread pool for one buffer.
_BLAKE3_THREADED_MIN = 1 << 20


TYPE_CHECKING = False
if TYPE_CHECKING:  # a type for checkers only: ``typing`` costs every agent hook milliseconds
    from typing import Protocol

    class Hasher(Protocol):
        def update(self, data: bytes | memoryview, /) -> object: ...

        def digest(self) -> bytes: ...


def hasher_factory(algorithm: str) -> Callable[[], Hasher]:
    """A zero-argument constructor for incremental hashers of ``algorithm``."""
    if algorithm == "blake3":
        return lambda: blake3.blake3(max_threads=blake3.blake3.AUTO)
    if algorithm == "sha256":
        import hashlib  # loads OpenSSL: only stores that use SHA-256 pay for it

        return hashlib.sha256
    raise ValueError(f"unknown hash algorithm {algorithm!r}; choose one of {', '.join(ALGORITHMS)}")


def digest_function(algorithm: str) -> Callable[[bytes], bytes]:
    """A one-shot digest function; faster than the factory for small buffers."""
    if algorithm == "blake3":

        def _b3(data: bytes) -> bytes:
            if len(data) >= _BLAKE3_THREADED_MIN:
                return blake3.blake3(data, max_threads=blake3.blake3.AUTO).digest()
            return blake3.blake3(data).digest()

        return _b3
    if algorithm == "sha256":
        import hashlib

        return lambda data: hashlib.sha256(data).digest()
    raise ValueError(f"unknown hash algorithm {algorithm!r}; choose one of {', '.join(ALGORITHMS)}")
