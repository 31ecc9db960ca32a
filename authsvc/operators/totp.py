"""TOTP (RFC 6238) for operators who set one up: the console's code from an authenticator app.

Six digits, HMAC-SHA1, 30-second steps, one step either side accepted for
clock drift, the usual authenticator defaults. The shared secret must be
recoverable to check a code, so it is stored sealed (authsvc/sealing.py,
the operator's account id as associated data), like apps' webhook secrets.
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

from authsvc.sealing import Sealer

STEP_SECONDS = 30
DIGITS = 6
SECRET_BYTES = 20  # 160 bits, RFC 4226's recommendation for SHA-1
DRIFT_STEPS = 1


class SealedTotpError(Exception):
    """No configured key opens this sealed TOTP secret."""


_SEALER = Sealer(b"authsvc operator totp v1", "TOTP secret", SealedTotpError)


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


def _bound_to(user_id: int) -> bytes:
    return struct.pack(">q", user_id)


def seal(secret_keys: Sequence[str], user_id: int, secret: bytes) -> bytes:
    return _SEALER.seal(secret_keys, secret, _bound_to(user_id))


def open_sealed(secret_keys: Sequence[str], user_id: int, sealed: bytes) -> bytes:
    return _SEALER.open(secret_keys, sealed, _bound_to(user_id))
