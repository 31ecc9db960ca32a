"""Signed, versioned links and their 6-digit codes: (user, purpose, version, issued_at).

The token proves who issued it and when; whether it is still the one valid
link is decided against the user's current version in the database
(authsvc.accounts), never by anything stored beside the token.

A code is the same claims in a form a person can type: an HMAC of them under
each secret key, cut to six digits. Like the link it is minted by the worker
at send time and never stored; it is checked by deriving it again under every
configured key, so a code survives key rotation exactly as a link does.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from itsdangerous import BadSignature, Signer, URLSafeSerializer

from authsvc.clock import Clock, system_clock

# console_login: an operator's emailed sign-in code for /admin (SPEC §15), code only.
PURPOSES = ("reset", "verify", "email_change", "email_change_approval", "email_revert",
            "account_delete", "sign_in", "console_login")
# Purposes whose emails carry a code beside the link. The undo link has none:
# a week-long code that restores an account would be worth guessing (SPEC §12).
CODED_PURPOSES = ("reset", "verify", "email_change", "email_change_approval", "account_delete",
                  "sign_in")
MAX_TOKEN_LENGTH = 512
CODE_DIGITS = 6
# Room for a code typed with spaces ("123 456"); anything that is not six
# digits then is simply a wrong code.
MAX_CODE_LENGTH = 32
# Claims no account has (versions start at 1): unknown addresses check a code
# against these, so they cost the same HMACs as known ones.
DUMMY_ISSUED_AT = datetime(2000, 1, 1, tzinfo=UTC)


class TokenError(Exception):
    """A link that cannot be redeemed; `code` is the API's stable error code."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


@dataclass(frozen=True)
class TokenClaims:
    user_id: int
    purpose: str
    version: int
    issued_at: datetime
    # The app whose brand the link's pages show (SPEC §14: from the signed
    # token, never from a query parameter); None: the service's own. Codes
    # do not carry it: a code is typed where its brand is already known.
    brand_app_id: UUID | None = None


class TokenCodec:
    """Mints and reads tokens; one itsdangerous serializer (own salt) per purpose."""

    def __init__(
        self,
        secret_keys: Sequence[str],
        ttl_seconds: Mapping[str, int],
        clock: Clock = system_clock,
    ) -> None:
        if not secret_keys:
            raise ValueError("at least one secret key is needed")
        # itsdangerous signs with the LAST key and verifies with all of them;
        # our configuration lists the signing key first, so reverse it.
        ordered = list(reversed(secret_keys))
        self._serializers = {
            purpose: URLSafeSerializer(ordered, salt=f"authsvc.{purpose}") for purpose in PURPOSES
        }
        # mint() does what serializer.dumps does, with the signer make_signer() would
        # build made once per purpose instead of once per token, its key derived once:
        # the same bytes, about 2 µs less per email (bench/pipeline_parts.py).
        self._signers = {
            purpose: _MintingSigner(s.secret_keys, salt=s.salt, **s.signer_kwargs)
            for purpose, s in self._serializers.items()
        }
        # One code key per secret, derived so a code's HMAC never shares a key
        # with itsdangerous' signatures; the first still is the one that mints.
        self._code_keys = [
            hmac.new(key.encode(), b"authsvc.email-code", hashlib.sha256).digest()
            for key in secret_keys
        ]
        self._ttl = dict(ttl_seconds)
        self._clock = clock

    def ttl(self, purpose: str) -> int:
        return self._ttl[purpose]

    def longest_code_ttl(self) -> timedelta:
        """The longest lifetime of a link that carries a code: past it, no code of any kind
        lives (undo links live longer, and have none)."""
        return timedelta(seconds=max(self._ttl[p] for p in CODED_PURPOSES if p in self._ttl))

    def expires_at(self, purpose: str, issued_at: datetime) -> datetime:
        return issued_at + timedelta(seconds=self._ttl[purpose])

    def mint(self, claims: TokenClaims) -> str:
        issued = int(claims.issued_at.timestamp())
        fields: list[int | str] = [claims.user_id, claims.version, issued]
        if claims.brand_app_id is not None:
            fields.append(claims.brand_app_id.hex)
        payload = self._serializers[claims.purpose].dump_payload(fields)
        return self._signers[claims.purpose].sign(payload).decode("utf-8")

    def read(self, token: object, purpose: str, *, check_expiry: bool = True) -> TokenClaims:
        """Verify signature, purpose and (unless told not to) lifetime; else TokenError."""
        if not isinstance(token, str) or not 0 < len(token) <= MAX_TOKEN_LENGTH:
            raise TokenError("invalid_token")
        try:
            data = self._serializers[purpose].loads(token)
        except BadSignature:
            # Wrong purpose lands here too: the salt differs.
            raise TokenError("invalid_token") from None
        if (
            not isinstance(data, list)
            or len(data) not in (3, 4)
            or not all(isinstance(x, int) and not isinstance(x, bool) for x in data[:3])
        ):
            raise TokenError("invalid_token")
        brand_app_id = _brand_app_id(data[3]) if len(data) == 4 else None
        user_id, version, issued = data[:3]
        issued_at = datetime.fromtimestamp(issued, UTC)
        if check_expiry and self._clock() >= self.expires_at(purpose, issued_at):
            raise TokenError("token_expired")
        return TokenClaims(user_id, purpose, version, issued_at, brand_app_id)

    def mint_code(self, claims: TokenClaims) -> str:
        """The 6-digit code for the same claims as the link, under the signing key."""
        return _code(self._code_keys[0], claims)

    def code_matches(self, claims: TokenClaims, code: str) -> bool:
        """Whether `code` is the code for `claims` under any configured key.

        Every key is tried, whatever the outcome, so the time spent says nothing.
        """
        presented = code.encode("ascii", "replace")
        matched = False
        for key in self._code_keys:
            matched |= hmac.compare_digest(_code(key, claims).encode(), presented)
        return matched


def _brand_app_id(value: object) -> UUID:
    # Signed by us, so well-formed unless a key leaked; checked all the same.
    if not isinstance(value, str) or len(value) != 32:
        raise TokenError("invalid_token")
    try:
        return UUID(hex=value)
    except ValueError:
        raise TokenError("invalid_token") from None


class _MintingSigner(Signer):
    """itsdangerous' Signer with its signing key derived once, not once per token.

    derive_key() is the documented place to change how the key is made; this
    one returns the same key (the same signatures), computed in __init__.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._signing_key = super().derive_key()

    def derive_key(self, secret_key: str | bytes | None = None) -> bytes:
        return self._signing_key if secret_key is None else super().derive_key(secret_key)


def _code(key: bytes, claims: TokenClaims) -> str:
    issued = int(claims.issued_at.timestamp())
    message = f"{claims.purpose}:{claims.user_id}:{claims.version}:{issued}".encode()
    digest = hmac.new(key, message, hashlib.sha256).digest()
    # 64 bits reduced mod 10^6: the bias is below 10^-13, nothing to exploit.
    return str(int.from_bytes(digest[:8], "big") % 10**CODE_DIGITS).zfill(CODE_DIGITS)


def is_code_shaped(value: object) -> bool:
    """Six ASCII digits: anything else cannot be a code (and is answered like a wrong one)."""
    return (
        isinstance(value, str)
        and len(value) == CODE_DIGITS
        and value.isascii()
        and value.isdigit()
    )
