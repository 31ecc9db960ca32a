"""What an authsvc link in a stored email would do if clicked now, read without consuming it."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from psycopg import Connection

from authsvc.accounts import links
from authsvc.accounts.tokens import PURPOSES, TokenError
from authsvc.inbox import messages, search
from authsvc.inbox.messages import InboxMessage, Page
from authsvc.services import Services

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

    def as_json(self) -> dict[str, str | None]:
        return {"url": self.url, "purpose": self.purpose, "state": self.state}


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


def with_states(
    conn: Connection, svc: Services, found: Sequence[InboxMessage]
) -> list[InboxMessage]:
    """The messages with `link_states` filled in, each read now; a link seen twice is read once."""
    known: dict[str, LinkState] = {}
    answered = []
    for message in found:
        for url in message.links:
            if url not in known:
                known[url] = link_state(conn, svc, url)
        states = tuple(known[url].as_json() for url in message.links if known[url].state)
        answered.append(dataclasses.replace(message, link_states=states))
    return answered


def listing(conn: Connection, svc: Services, scope: str, **options: Any) -> Page:
    """messages.list_messages, each message with its links' states read now."""
    page = messages.list_messages(conn, scope, **options)
    return Page(with_states(conn, svc, page.messages), page.more)


def message(conn: Connection, svc: Services, scope: str, message_id: int) -> InboxMessage | None:
    """messages.get_message, with its links' states read now."""
    found = messages.get_message(conn, scope, message_id)
    return None if found is None else with_states(conn, svc, [found])[0]


def searched(
    conn: Connection, svc: Services, query: search.SearchQuery, limit: int, older_than: int
) -> search.SearchPage:
    """search.search, each message with its links' states read now."""
    page = search.search(conn, query, limit=limit, older_than=older_than)
    return search.SearchPage(with_states(conn, svc, page.messages), page.more)
