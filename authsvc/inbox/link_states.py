"""What an authsvc link in a stored email would do if clicked now, read without consuming it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

from psycopg import Connection

from authsvc.accounts import links
from authsvc.accounts.tokens import PURPOSES, TokenError
from authsvc.services import Services

# A lone 6-digit number, outside any link: a token in a link can hold six
# digits in a row (the UI once showed "859679" from a token above the code).
_CODE = re.compile(r"(?<![\w-])\d{6}(?![\d-])")
_LINK = re.compile(r"\S+://\S+")
_STATES = {
    "token_used": "used",
    "token_superseded": "superseded",
    "token_expired": "expired",
    "invalid_token": "invalid",
}
LABELS = {
    "would_redeem": "would redeem",
    "used": "used",
    "superseded": "superseded by a newer link",
    "expired": "expired",
    "invalid": "not a valid authsvc link",
}


@dataclass(frozen=True)
class LinkState:
    url: str
    purpose: str | None
    state: str | None  # None: not an authsvc link (another host, or no token)

    @property
    def label(self) -> str:
        return LABELS.get(self.state or "", "")


def find_code(text: str | None) -> str | None:
    """The first 6-digit code in the text part, if any."""
    match = _CODE.search(_LINK.sub(" ", text or ""))
    return match.group(0) if match else None


def _token(url: str, base_url: str) -> str | None:
    parts, base = urlsplit(url), urlsplit(base_url)
    if (parts.scheme, parts.netloc) != (base.scheme, base.netloc):
        return None
    values = parse_qs(parts.query).get("token")
    return values[0] if values else None


def link_state(conn: Connection, svc: Services, url: str) -> LinkState:
    """The state of one link; GET-safe: only reads the token and the user's versions."""
    token = _token(url, svc.settings.base_url)
    if token is None:
        return LinkState(url, None, None)
    for purpose in PURPOSES:
        # The salt differs per purpose, so only the right one verifies.
        try:
            links.check_link(conn, svc, token, purpose)
        except TokenError as exc:
            if exc.code == "invalid_token":
                continue
            return LinkState(url, purpose, _STATES[exc.code])
        return LinkState(url, purpose, "would_redeem")
    return LinkState(url, None, "invalid")
