"""The console's door: its own session cookie, the sign-in redirect, its headers, same-origin POSTs.

A console session is not a user session: its token travels in a cookie of
its own, scoped to /admin and SameSite=Strict, and is looked up in
console_sessions (authsvc/operators/access.py), which only operators have.
Anyone else, a signed-in user included, is sent to /admin/login with an
empty body: no figure, address or job id leaves before the check.
"""

from __future__ import annotations

import logging

from flask import Blueprint, Response, g, redirect, request, url_for
from flask.typing import ResponseReturnValue
from werkzeug.exceptions import Forbidden
from werkzeug.wrappers import Response as AnyResponse

from authsvc.observability.logs import log_event
from authsvc.operators import CONSOLE_CODE_TTL
from authsvc.operators.access import ConsoleSession, find_console_session
from authsvc.operators.log import Actor
from authsvc.web.plumbing import db, services

logger = logging.getLogger(__name__)
SESSION_COOKIE = "authsvc_console"
SIGN_IN_COOKIE = "authsvc_console_sign_in"
COOKIE_PATH = "/admin"
# Reachable without a console session: the two sign-in steps and the stylesheet.
OPEN_ENDPOINTS = frozenset({"console.login", "console.login_code", "console.static"})


def set_cookie(response: AnyResponse, name: str, value: str, max_age: int | None = None) -> None:
    response.set_cookie(name, value, max_age=max_age, path=COOKIE_PATH, httponly=True,
                        samesite="Strict", secure=services().settings.production)


def forget_cookie(response: AnyResponse, name: str) -> None:
    response.delete_cookie(name, path=COOKIE_PATH, httponly=True, samesite="Strict",
                           secure=services().settings.production)


def set_sign_in_cookie(response: AnyResponse, token: str) -> None:
    set_cookie(response, SIGN_IN_COOKIE, token, max_age=CONSOLE_CODE_TTL)


def current_operator() -> ConsoleSession:
    """The operator of this request (the guard has checked there is one)."""
    found: ConsoleSession = g.console_session
    return found


def actor() -> Actor:
    operator = current_operator()
    return Actor(operator.user_id, operator.email)


def _same_origin() -> None:
    # CSRF tokens are the main defence; this refuses a cross-site POST before
    # any work even if a token leaked, and any POST a browser marks cross-site.
    if request.method not in ("POST", "PUT", "PATCH", "DELETE"):
        return
    # Origin is "null" under our Referrer-Policy: no-referrer, so browsers are
    # judged by Sec-Fetch-Site, which they always send; a named origin must be ours.
    origin = request.headers.get("Origin")
    named_elsewhere = origin not in (None, "null") and origin != request.host_url.rstrip("/")
    fetch_site = request.headers.get("Sec-Fetch-Site")
    if named_elsewhere or fetch_site not in (None, "same-origin", "none"):
        log_event(logger, "console_cross_origin_refused", path=request.path)
        raise Forbidden("This form was sent from another site.")


def _require_operator() -> ResponseReturnValue | None:
    _same_origin()
    if request.endpoint in OPEN_ENDPOINTS:
        return None
    token = request.cookies.get(SESSION_COOKIE)
    found = None
    if token:
        found = find_console_session(db(), token, services().clock())
    if found is None:
        response = redirect(url_for("console.login"), 303)
        if token:
            forget_cookie(response, SESSION_COOKIE)
        return response
    g.console_session = found
    return None


def _console_headers(response: Response) -> Response:
    # Everything here is about people and the queue: no cache keeps it. (No page
    # frames it and no script runs in it: every response's headers, web/plumbing.py.)
    # By path, not blueprint: a wrong path or method under /admin matches no console
    # route, and its 404 or 405 is the console's answer too.
    if request.path == COOKIE_PATH or request.path.startswith(COOKIE_PATH + "/"):
        response.headers["Cache-Control"] = "no-store"
    return response


def install(bp: Blueprint) -> None:
    bp.before_request(_require_operator)
    bp.after_app_request(_console_headers)
