"""The web session: Flask's signed cookie holds the user id and session version.

Every request re-reads the account and compares versions, so a password change
anywhere (which bumps session_version) ends every other session at once.
"""

from __future__ import annotations

import logging

from flask import g, session

from authsvc import accounts
from authsvc.logs import log_event
from authsvc.users import User
from authsvc.web import db

_USER_ID = "user_id"
_SESSION_VERSION = "session_version"

logger = logging.getLogger(__name__)


def sign_in(user: User) -> None:
    """Start a fresh session for this account (drops anything the old one held)."""
    session.clear()
    session.permanent = True
    session[_USER_ID] = user.id
    session[_SESSION_VERSION] = user.session_version
    g.pages_user = user
    log_event(logger, "signed_in", user_id=user.id)


def sign_out() -> None:
    if has_session():
        log_event(logger, "signed_out", user_id=session.get(_USER_ID))
    session.clear()
    g.pages_user = None


def forget_cached_user() -> None:
    """Re-check the session on next use: the request may just have ended it."""
    g.pop("pages_user", None)


def has_session() -> bool:
    """Whether the browser presents a sign-in, current or ended."""
    return _USER_ID in session


def signed_in_user() -> User | None:
    """The account behind this request's session, or None (and the cookie is cleared)."""
    if "pages_user" in g:
        cached: User | None = g.pages_user
        return cached
    user_id, version = session.get(_USER_ID), session.get(_SESSION_VERSION)
    user = None
    if isinstance(user_id, int) and isinstance(version, int):
        user = accounts.current_session_user(db(), user_id, version)
    if user is None and has_session():
        session.pop(_USER_ID, None)
        session.pop(_SESSION_VERSION, None)
    g.pages_user = user
    return user
