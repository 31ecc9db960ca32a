"""Who may read the test inbox (its API and pages): the bearer token check."""

from __future__ import annotations

import hmac

UNAUTHORIZED_DETAIL = "send Authorization: Bearer <token>"
CHALLENGE = 'Bearer realm="authsvc test inbox"'  # the WWW-Authenticate value of a 401


def token_accepted(expected: str | None, authorization: str) -> bool:
    """True when no token is configured, or the Authorization header presents it.

    Compared in constant time, so the answer's timing does not tell how much of a
    guessed token was right.
    """
    if not expected:
        return True
    scheme, _, presented = authorization.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        # surrogateescape: bytes that are not UTF-8 (aiohttp keeps them as
        # surrogates) are compared as the bytes they were, and fail.
        presented.strip().encode("utf-8", "surrogateescape"), expected.encode()
    )
