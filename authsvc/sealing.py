"""Values kept sealed in the database under AUTHSVC_SECRET_KEYS, and opened again.

A sealed value is a format byte, a random 12-byte nonce and the AES-256-GCM
ciphertext, under a key derived (HKDF-SHA256) from the first configured key.
The `info` given to HKDF differs by kind of value, so one kind never opens as
another; the associated data binds a value to its row's owner, so a sealed
value copied onto another row does not open. Opening tries every configured
key, so rotating AUTHSVC_SECRET_KEYS keeps working while the old key stays
in the list.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

_FORMAT = b"\x01"  # format byte, so a later scheme can be told apart
_NONCE_BYTES = 12


@dataclass(frozen=True)
class Sealer:
    """Seals and opens one kind of value; `what` names it in `error`'s messages."""

    info: bytes
    what: str
    error: type[Exception]

    def _cipher(self, secret_key: str) -> AESGCM:
        hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=self.info)
        return AESGCM(hkdf.derive(secret_key.encode("utf-8")))

    def seal(self, secret_keys: Sequence[str], value: bytes, bound_to: bytes) -> bytes:
        """`value` sealed under the first key, opening only with the same `bound_to`."""
        nonce = secrets.token_bytes(_NONCE_BYTES)
        return _FORMAT + nonce + self._cipher(secret_keys[0]).encrypt(nonce, value, bound_to)

    def open(self, secret_keys: Sequence[str], sealed: bytes, bound_to: bytes) -> bytes:
        """The value sealed with `bound_to`; `error` if it is not one or no key opens it."""
        if len(sealed) <= 1 + _NONCE_BYTES or sealed[:1] != _FORMAT:
            raise self.error(f"not a sealed {self.what}")
        nonce, body = sealed[1:1 + _NONCE_BYTES], sealed[1 + _NONCE_BYTES:]
        for key in secret_keys:
            try:
                return self._cipher(key).decrypt(nonce, body, bound_to)
            except InvalidTag:
                continue
        raise self.error(f"no configured AUTHSVC_SECRET_KEYS key opens this {self.what}")
