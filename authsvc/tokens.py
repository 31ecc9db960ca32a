"""Signed, versioned links: (user, purpose, version, issued_at).

The token proves who issued it and when; whether it is still the one valid
link is decided against the user's current version in the database
(authsvc.accounts), never by anything stored beside the token.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from itsdangerous import BadSignature, URLSafeSerializer

from authsvc.clock import Clock, system_clock

PURPOSES = ("reset", "verify")
MAX_TOKEN_LENGTH = 512


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
        self._ttl = dict(ttl_seconds)
        self._clock = clock

    def ttl(self, purpose: str) -> int:
        return self._ttl[purpose]

    def expires_at(self, purpose: str, issued_at: datetime) -> datetime:
        return issued_at + timedelta(seconds=self._ttl[purpose])

    def mint(self, claims: TokenClaims) -> str:
        issued = int(claims.issued_at.timestamp())
        return str(
            self._serializers[claims.purpose].dumps([claims.user_id, claims.version, issued])
        )

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
            or len(data) != 3
            or not all(isinstance(x, int) and not isinstance(x, bool) for x in data)
        ):
            raise TokenError("invalid_token")
        user_id, version, issued = data
        issued_at = datetime.fromtimestamp(issued, UTC)
        if check_expiry and self._clock() >= self.expires_at(purpose, issued_at):
            raise TokenError("token_expired")
        return TokenClaims(user_id, purpose, version, issued_at)
