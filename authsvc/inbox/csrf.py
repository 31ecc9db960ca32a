"""The UI's delete forms: a signed token per thing to delete, so another site cannot post one.

The inbox has no sessions to hang a token on, so each form carries the
signature of what it deletes ("scope/<scope>" or "message/<scope>/<id>")
under the service's secret keys; a forged or stale post is refused (403).
"""

from __future__ import annotations

from collections.abc import Sequence

from itsdangerous import BadSignature, URLSafeTimedSerializer

SALT = "authsvc-inbox-ui-delete"
MAX_AGE_SECONDS = 24 * 3600  # a page left open a day still deletes; messages live that long


def _serializer(secret_keys: Sequence[str]) -> URLSafeTimedSerializer:
    # itsdangerous signs with the last key and accepts any: authsvc lists the signing key first.
    return URLSafeTimedSerializer(list(reversed(secret_keys)), salt=SALT)


def form_token(secret_keys: Sequence[str], target: str) -> str:
    """The token a delete form for `target` carries."""
    return str(_serializer(secret_keys).dumps(target))


def token_allows(secret_keys: Sequence[str], target: str, token: str) -> bool:
    """Whether `token` was made by this service for `target`, within the last day."""
    try:
        signed = _serializer(secret_keys).loads(token, max_age=MAX_AGE_SECONDS)
    except BadSignature:
        return False
    return bool(signed == target)
