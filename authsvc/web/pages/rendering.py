"""How every page is rendered: the frame, error pages, no-cache headers, the form-post limit."""

from __future__ import annotations

import logging
from typing import Any

import psycopg
from flask import Blueprint, Response, make_response, render_template, request
from flask.typing import ResponseReturnValue
from flask_wtf.csrf import CSRFError
from werkzeug.exceptions import HTTPException, MethodNotAllowed

from authsvc import ratelimit
from authsvc.accounts.users import User
from authsvc.durations import describe_wait
from authsvc.observability.logs import log_event
from authsvc.web.pages import branding, i18n, language
from authsvc.web.pages.i18n import gettext, lazy_gettext
from authsvc.web.pages.icon import CACHEABLE_ENDPOINTS
from authsvc.web.pages.session_cookie import signed_in_user
from authsvc.web.plumbing import client_ip, database_failed, db, services

logger = logging.getLogger(__name__)


def render_page(
    template: str, status: int = 200, *, with_user: bool = True, **context: Any
) -> Response:
    """A page from templates/pages/, with the signed-in account for the header."""
    user = signed_in_user() if with_user else None
    html = render_template(f"pages/{template}", current_user=user, **_frame(), **context)
    return make_response(html, status)


def _frame() -> dict[str, Any]:
    """What every page's frame shows: its language, the switcher, the brand."""
    return {**language.document_language(), "languages": language.switcher_links(),
            "brand": branding.page_brand()}


def error_page(
    status: int, title: str, message: str, *, retry_after: int | None = None
) -> Response:
    """An error in the site's frame; the header knows who is logged in unless the server failed."""
    user = None if status >= 500 else _user_if_database_answers()
    html = render_template("pages/error.html", current_user=user, title=title, message=message,
                           **_frame())
    response = make_response(html, status)
    if retry_after is not None:
        response.headers["Retry-After"] = str(max(retry_after, 1))
    return response


def _user_if_database_answers() -> User | None:
    # A 5xx may be the database itself failing, so those pages skip the
    # lookup; and a lookup that fails here only costs the header its links.
    try:
        return signed_in_user()
    except psycopg.Error:
        database_failed()
        return None


def too_many_requests(retry_after: int) -> Response:
    wait = describe_wait(retry_after, language.page_locale())
    return error_page(
        429,
        gettext("Too many attempts"),
        gettext("Too many attempts from here. Wait about %(wait)s, then try again.", wait=wait),
        retry_after=retry_after,
    )


def _limit_form_posts() -> ResponseReturnValue | None:
    if request.method != "POST":
        return None
    svc = services()
    # One row per address: an office behind one IP must not queue on its commits.
    decision = ratelimit.hit(db(), "ip", client_ip(), svc.settings.rate_limit_ip, svc.clock(),
                             wait_for_disk=False)
    if decision.allowed:
        return None
    log_event(logger, "form_rate_limited", path=request.path, retry_after=decision.retry_after)
    return too_many_requests(decision.retry_after)


def _never_cache(response: Response) -> Response:
    # Pages carry CSRF tokens, link tokens or account details: none belong in
    # a shared or back-button cache.
    if request.endpoint != "pages.static" and request.endpoint not in CACHEABLE_ENDPOINTS:
        response.headers["Cache-Control"] = "no-store"
    return response


def _csrf_refused(error: CSRFError) -> Response:
    log_event(logger, "csrf_refused", path=request.path, reason=error.description)
    return error_page(
        400,
        gettext("This form has expired"),
        gettext("The form was missing its security token or it did not match this browser. "
                "Go back, reload the page and submit it again."),
    )


# Werkzeug's descriptions speak to developers ("check your spelling"); these to people.
_PLAIN_WORDS = {
    404: (lazy_gettext("Page not found"),
          lazy_gettext("There is no page at this address. Check the link, or start again.")),
    405: (lazy_gettext("Not allowed here"),
          lazy_gettext("This page cannot be used that way. Go back and try again.")),
    # Werkzeug's own words for the rest are English and speak to developers.
    400: (lazy_gettext("Something is wrong with this request"),
          lazy_gettext("The page could not understand what was sent. Go back and try again.")),
    413: (lazy_gettext("That was too much to send"),
          lazy_gettext("The form sent more than a page accepts. Go back and try again.")),
}


def _http_error(error: HTTPException) -> Response:
    """Any HTTP error as a page in the site's frame, its status kept.

    Also the app's handler for paths no blueprint owns (unknown paths, wrong
    methods): the API answers its own paths with problem+json before routing
    errors reach it (see api/problems.py).
    """
    status = error.code or 500
    if status >= 500:
        return error_page(status, gettext("Something went wrong"),
                          gettext("Please try again in a moment."))
    title, message = _PLAIN_WORDS.get(status, (error.name, error.description or ""))
    response = error_page(status, str(title), str(message))
    if isinstance(error, MethodNotAllowed) and error.valid_methods:
        response.headers["Allow"] = ", ".join(sorted(error.valid_methods))
    return response


def _database_unavailable(error: psycopg.OperationalError) -> Response:
    # A restart or failover: nothing was changed, and trying again will work.
    log_event(logger, "database_unavailable", path=request.path, error=type(error).__name__)
    database_failed()
    response = error_page(
        503,
        gettext("We are briefly unavailable"),
        gettext("Nothing was changed. Please try again in a moment."),
    )
    response.headers["Retry-After"] = "2"
    return response


def install(bp: Blueprint) -> None:
    """Attach the shared behaviour to the pages blueprint."""
    bp.before_request(_limit_form_posts)
    bp.after_request(_never_cache)
    language.install(bp)
    branding.install(bp)
    bp.record_once(lambda state: i18n.install(state.app))
    bp.register_error_handler(CSRFError, _csrf_refused)
    bp.register_error_handler(HTTPException, _http_error)
    # By class, not by code: a blueprint's own class handler (the API's
    # problem+json) is then still found first for its requests.
    bp.app_errorhandler(HTTPException)(_http_error)
    bp.register_error_handler(psycopg.OperationalError, _database_unavailable)
