"""The bearer-token rule: the web app's /metrics, each worker's, and the test inbox's."""

from __future__ import annotations

import hmac

CHALLENGE = 'Bearer realm="authsvc metrics"'  # the WWW-Authenticate value of a 401
UNAUTHORIZED_BODY = "send Authorization: Bearer <AUTHSVC_METRICS_TOKEN>\n"


def authorization_presents(authorization: str, expected: str) -> bool:
    """Whether an Authorization header value is `Bearer <expected>`.

    Compared in constant time, so the answer's timing does not tell how much of
    a guessed token was right; any bytes in the header (surrogate-escaped by
    the server) compare as unequal rather than raising.
    """
    scheme, _, presented = authorization.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        presented.strip().encode("utf-8", "surrogateescape"), expected.encode()
    )
