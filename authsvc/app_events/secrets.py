"""Apps' webhook signing secrets: generated once, kept sealed, opened only to sign.

Unlike an API key, a `whsec_` secret must be recoverable: the worker signs
every delivery with it. It is stored sealed (authsvc/sealing.py: AES-256-GCM
under a key derived from the first of AUTHSVC_SECRET_KEYS), with the app's
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

from authsvc.sealing import Sealer

SECRET_PREFIX = "whsec_"  # noqa: S105  (the format's prefix, not a secret)
SECRET_BYTES = 32


class SealedSecretError(Exception):
    """No configured key opens this sealed secret (keys rotated away, or tampered with)."""


_SEALER = Sealer(b"authsvc webhook secret v1", "webhook secret", SealedSecretError)


def new_webhook_secret() -> str:
    """A fresh `whsec_<base64 of 32 random bytes>` secret, the Standard Webhooks form."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode("ascii")


def seal_secret(secret_keys: Sequence[str], app_id: UUID, secret: str) -> bytes:
    """`secret` sealed under the first key, bound to `app_id`."""
    return _SEALER.seal(secret_keys, secret.encode("ascii"), app_id.bytes)


def open_secret(secret_keys: Sequence[str], app_id: UUID, sealed: bytes) -> str:
    """The `whsec_` secret sealed for `app_id`; SealedSecretError if no key opens it."""
    return _SEALER.open(secret_keys, sealed, app_id.bytes).decode("ascii")
