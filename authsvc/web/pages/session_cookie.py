"""The browser's side of a web session: Flask's signed cookie carries only its token.

The session itself lives in web_sessions (authsvc.sessions): every request
looks the token up, so logout, a password change or "end this session" on
the account page take effect at once, for copies of the cookie too.
"""

from __future__ import annotations

import logging

from flask import g, request, session

from authsvc.accounts import actions, sessions
from authsvc.accounts.sessions import SessionUser
from authsvc.accounts.users import User
from authsvc.observability.logs import log_event
from authsvc.web.plumbing import db, services

_TOKEN = "session_token"  # noqa: S105  (the cookie key, not a secret)

logger = logging.getLogger(__name__)


def sign_in(user: User) -> None:
    """Start a fresh server-side session for this account (drops anything the old cookie held)."""
    end_this_session()
    token = actions.start_session(
        db(), services(), user=user, user_agent=request.headers.get("User-Agent", "")
    )
    session.permanent = True
    session[_TOKEN] = token
    forget_cached_session()
    log_event(logger, "signed_in", user_id=user.id)


def adopt_session(user: User, token: str) -> None:
    """Hold a session a sign-in link or code started (a new id): the browser's earlier
    session, if any, ends, so nobody who planted a cookie shares the new one."""
    end_this_session()
    session.permanent = True
    session[_TOKEN] = token
    forget_cached_session()
    log_event(logger, "signed_in", user_id=user.id, by="email")


def end_this_session() -> None:
    """Logout: the session row goes, so no copy of the cookie opens anything."""
    token = session.get(_TOKEN)
    if isinstance(token, str):
        current = current_session()
        sessions.end_session(db(), token)
        if current is not None:
            log_event(logger, "signed_out", user_id=current.user.id)
    session.clear()
    g.pages_session = None


def forget_cached_session() -> None:
    """Re-check the session on next use: the request may just have ended it."""
    g.pop("pages_session", None)


def has_session() -> bool:
    """Whether the browser presents a session token, live or ended."""
    return _TOKEN in session


def current_session() -> SessionUser | None:
    """This request's live session and account, or None (and the stale token is dropped)."""
    if "pages_session" in g:
        cached: SessionUser | None = g.pages_session
        return cached
    token = session.get(_TOKEN)
    found = None
    if isinstance(token, str):
        found = actions.current_session(db(), services(), token)
    if found is None and has_session():
        session.pop(_TOKEN, None)
    g.pages_session = found
    return found


def signed_in_user() -> User | None:
    """The account behind this request's session, or None."""
    found = current_session()
    return found.user if found else None
