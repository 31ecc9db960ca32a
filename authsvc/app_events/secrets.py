"""Apps' webhook signing secrets: generated once, kept sealed, opened only to sign.

Unlike an API key, a `whsec_` secret must be recoverable: the worker signs
every delivery with it. It is stored sealed with AES-256-GCM under a key
derived (HKDF-SHA256) from the first of AUTHSVC_SECRET_KEYS, with the app's
id as associated data, so a database dump or backup alone does not reveal it
and a sealed secret copied onto another app's row does not open. Opening
tries every configured key, so rotating AUTHSVC_SECRET_KEYS keeps working
while the old key stays in the list; `authsvc apps update ID
--new-webhook-secret` re-seals under the current first key (with a new secret).
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Sequence
from uuid import UUID

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

SECRET_PREFIX = "whsec_"  # noqa: S105  (the format's prefix, not a secret)
SECRET_BYTES = 32
_FORMAT = b"\x01"  # format byte, so a later scheme can be told apart
_NONCE_BYTES = 12
_INFO = b"authsvc webhook secret v1"


class SealedSecretError(Exception):
    """No configured key opens this sealed secret (keys rotated away, or tampered with)."""


def new_webhook_secret() -> str:
    """A fresh `whsec_<base64 of 32 random bytes>` secret, the Standard Webhooks form."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode("ascii")


def _cipher(secret_key: str) -> AESGCM:
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO)
    return AESGCM(hkdf.derive(secret_key.encode("utf-8")))


def seal_secret(secret_keys: Sequence[str], app_id: UUID, secret: str) -> bytes:
    """`secret` sealed under the first key, bound to `app_id`."""
    nonce = secrets.token_bytes(_NONCE_BYTES)
    sealed = _cipher(secret_keys[0]).encrypt(nonce, secret.encode("ascii"), app_id.bytes)
    return _FORMAT + nonce + sealed


def open_secret(secret_keys: Sequence[str], app_id: UUID, sealed: bytes) -> str:
    """The `whsec_` secret sealed for `app_id`; SealedSecretError if no key opens it."""
    if len(sealed) <= 1 + _NONCE_BYTES or sealed[:1] != _FORMAT:
        raise SealedSecretError("not a sealed webhook secret")
    nonce, body = sealed[1 : 1 + _NONCE_BYTES], sealed[1 + _NONCE_BYTES :]
    for key in secret_keys:
        try:
            return _cipher(key).decrypt(nonce, body, app_id.bytes).decode("ascii")
        except InvalidTag:
            continue
    raise SealedSecretError("no configured AUTHSVC_SECRET_KEYS key opens this webhook secret")
