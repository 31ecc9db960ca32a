"""Who may read the test inbox (its API and pages): the bearer token check."""

from __future__ import annotations

from authsvc.observability.bearer import authorization_presents

UNAUTHORIZED_DETAIL = "send Authorization: Bearer <token>"
CHALLENGE = 'Bearer realm="authsvc test inbox"'  # the WWW-Authenticate value of a 401


def token_accepted(expected: str | None, authorization: str) -> bool:
    """True when no token is configured, or the Authorization header presents it
    (the same constant-time rule as the metrics endpoints)."""
    return not expected or authorization_presents(authorization, expected)
