"""Client-side encryption of everything a remote holds: AES-256-GCM, from ``cryptography``.

With ``--encrypt``, the bucket holds nothing readable without the key: every object blob in a
pack is sealed on its own (so a restore can still fetch one object by range), and every index,
ref and gc state is sealed whole. Each seal is ``b"CZE1" | nonce (12 random bytes) |
ciphertext | tag (16)``. The associated data binds a sealed thing to its place (an object's id,
a key's name), so a server cannot swap one sealed thing for another unnoticed.

The key is derived from the user's key material (a key file or an environment variable; any
bytes, a passphrase too) with scrypt and the remote's random salt, which is stored in the
remote's ``config`` together with a sealed check value: a wrong key is refused up front with
one clear line instead of failing on the first object.
"""

from __future__ import annotations

import os
from typing import Any

from ...errors import RemoteError

MAGIC = b"CZE1"
NONCE = 12
TAG = 16
OVERHEAD = len(MAGIC) + NONCE + TAG
CHECK = b"ctrlz remote key check"
SCRYPT = {"n": 1 << 15, "r": 8, "p": 1}


class Sealer:
    """Seals and opens with one derived key."""

    def __init__(self, key: bytes) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self._aead = AESGCM(key)

    def seal(self, data: bytes, aad: bytes) -> bytes:
        nonce = os.urandom(NONCE)
        return MAGIC + nonce + self._aead.encrypt(nonce, data, aad)

    def open(self, sealed: bytes, aad: bytes, what: str) -> bytes:
        from cryptography.exceptions import InvalidTag

        if len(sealed) < OVERHEAD or not sealed.startswith(MAGIC):
            raise RemoteError(f"{what} is not encrypted with a ctrlz key, or is truncated")
        nonce = sealed[len(MAGIC):len(MAGIC) + NONCE]
        try:
            return self._aead.decrypt(nonce, sealed[len(MAGIC) + NONCE:], aad)
        except InvalidTag:
            raise RemoteError(f"{what} failed authentication: it was changed or truncated "
                              "on the server, or the key is wrong") from None


def derive_key(material: bytes, salt: bytes, params: dict[str, Any] | None = None) -> bytes:
    from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

    if not material.strip():
        raise RemoteError("the encryption key is empty")
    p = params or SCRYPT
    return Scrypt(salt=salt, length=32, n=int(p["n"]), r=int(p["r"]), p=int(p["p"])).derive(
        material.strip())


def new_encryption(material: bytes) -> tuple[dict[str, Any], Sealer]:
    """The ``encryption`` section of a new remote's config, and its sealer."""
    salt = os.urandom(16)
    sealer = Sealer(derive_key(material, salt))
    return {"cipher": "AES-256-GCM", "kdf": "scrypt", **SCRYPT, "salt": salt.hex(),
            "check": sealer.seal(CHECK, b"check").hex()}, sealer


def open_encryption(section: dict[str, Any], material: bytes, url: str) -> Sealer:
    """The sealer of an existing remote; a wrong key is refused here."""
    try:
        salt = bytes.fromhex(section["salt"])
        check = bytes.fromhex(section["check"])
    except (KeyError, ValueError, TypeError):
        raise RemoteError(f"{url}: its encryption settings are damaged") from None
    sealer = Sealer(derive_key(material, salt, section))
    try:
        if sealer.open(check, b"check", "the key check") != CHECK:
            raise RemoteError("bad check")
    except RemoteError:
        raise RemoteError(f"{url}: wrong encryption key (it does not open this remote's key "
                          "check)") from None
    return sealer
