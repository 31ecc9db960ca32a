"""TOTP (RFC 6238) for operators who set one up: the console's code from an authenticator app.

Six digits, HMAC-SHA1, 30-second steps, one step either side accepted for
clock drift, the usual authenticator defaults. The shared secret must be
recoverable to check a code, so it is stored sealed (AES-256-GCM under a
key derived from the first of AUTHSVC_SECRET_KEYS, the operator's account id
as associated data), like apps' webhook secrets; opening tries every key.
A step is used once: the caller records the last step accepted.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import struct
from collections.abc import Sequence
from datetime import datetime
from urllib.parse import quote, urlencode

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

STEP_SECONDS = 30
DIGITS = 6
SECRET_BYTES = 20  # 160 bits, RFC 4226's recommendation for SHA-1
DRIFT_STEPS = 1
_FORMAT = b"\x01"
_NONCE_BYTES = 12
_INFO = b"authsvc operator totp v1"


class SealedTotpError(Exception):
    """No configured key opens this sealed TOTP secret."""


def new_secret() -> bytes:
    return secrets.token_bytes(SECRET_BYTES)


def base32(secret: bytes) -> str:
    """The secret as authenticator apps take it typed: base32, no padding."""
    return base64.b32encode(secret).decode("ascii").rstrip("=")


def provisioning_uri(secret: bytes, account: str, issuer: str = "authsvc console") -> str:
    """The otpauth:// URI an authenticator app reads (from a QR code made of it)."""
    label = quote(f"{issuer}:{account}")
    query = urlencode({"secret": base32(secret), "issuer": issuer, "algorithm": "SHA1",
                       "digits": DIGITS, "period": STEP_SECONDS})
    return f"otpauth://totp/{label}?{query}"


def step_of(moment: datetime) -> int:
    return int(moment.timestamp()) // STEP_SECONDS


def code_at(secret: bytes, step: int) -> str:
    """RFC 6238's code for one time step (RFC 4226's HOTP of the step counter)."""
    digest = hmac.new(secret, struct.pack(">Q", step), hashlib.sha1).digest()
    offset = digest[-1] & 0x0F
    number = struct.unpack(">I", digest[offset:offset + 4])[0] & 0x7FFFFFFF
    return str(number % 10**DIGITS).zfill(DIGITS)


def matching_step(secret: bytes, code: str, now: datetime) -> int | None:
    """The step `code` belongs to, within the drift either side of now; None if none.

    Every candidate step is compared, whatever matched, so the time taken
    does not say which.
    """
    current = step_of(now)
    found = None
    presented = code.encode("ascii", "replace")
    for step in range(current - DRIFT_STEPS, current + DRIFT_STEPS + 1):
        if hmac.compare_digest(code_at(secret, step).encode(), presented):
            found = step
    return found


def _cipher(secret_key: str) -> AESGCM:
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO)
    return AESGCM(hkdf.derive(secret_key.encode("utf-8")))


def _bound_to(user_id: int) -> bytes:
    return struct.pack(">q", user_id)


def seal(secret_keys: Sequence[str], user_id: int, secret: bytes) -> bytes:
    nonce = secrets.token_bytes(_NONCE_BYTES)
    return _FORMAT + nonce + _cipher(secret_keys[0]).encrypt(nonce, secret, _bound_to(user_id))


def open_sealed(secret_keys: Sequence[str], user_id: int, sealed: bytes) -> bytes:
    if len(sealed) <= 1 + _NONCE_BYTES or sealed[:1] != _FORMAT:
        raise SealedTotpError("not a sealed TOTP secret")
    nonce, body = sealed[1:1 + _NONCE_BYTES], sealed[1 + _NONCE_BYTES:]
    for key in secret_keys:
        try:
            return _cipher(key).decrypt(nonce, body, _bound_to(user_id))
        except InvalidTag:
            continue
    raise SealedTotpError("no configured AUTHSVC_SECRET_KEYS key opens this TOTP secret")
