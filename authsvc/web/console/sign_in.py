"""/admin/login: the password, then the emailed code; /admin/logout.

The web layer only queues the code's email (authsvc/operators/access.py
puts it in the outbox in the password step's transaction); the worker
mints and sends it.
"""

from __future__ import annotations

import logging
from typing import Any

from flask import (
    Blueprint,
    Response,
    flash,
    make_response,
    redirect,
    render_template,
    request,
    url_for,
)
from flask.typing import ResponseReturnValue

from authsvc.accounts.addresses import InvalidAddress, parse_address
from authsvc.durations import describe_wait
from authsvc.observability.logs import log_event
from authsvc.operators import access
from authsvc.web.console.forms import ActionForm, ConsoleCodeForm, ConsoleLoginForm
from authsvc.web.console.guard import (
    SESSION_COOKIE,
    SIGN_IN_COOKIE,
    current_operator,
    forget_cookie,
    set_cookie,
    set_sign_in_cookie,
)
from authsvc.web.pages import language
from authsvc.web.pages.i18n import gettext
from authsvc.web.plumbing import client_ip, db, services

logger = logging.getLogger(__name__)


def render(template: str, status: int = 200, **context: Any) -> Response:
    """A page from templates/console/, in the language the pages choose, with their switcher."""
    html = render_template(f"console/{template}", **language.document_language(),
                           languages=language.switcher_links(),
                           product_name=services().settings.product_name, **context)
    return make_response(html, status)


def _too_many(retry_after: int) -> Response:
    wait = describe_wait(retry_after, language.page_locale())
    response = render("message.html", 429, title=gettext("Too many attempts"),
                      message=gettext("Too many sign-in attempts from here. Wait about %(wait)s,"
                                      " then try again.", wait=wait))
    response.headers["Retry-After"] = str(max(retry_after, 1))
    return response


def login() -> ResponseReturnValue:
    form = ConsoleLoginForm()
    if form.validate_on_submit():
        try:
            email = parse_address(form.email.data)
        except InvalidAddress:
            email = form.email.data.strip().lower()  # names no account: a sign-in of nothing
        try:
            token = access.check_password(db(), services(), email=email,
                                          password=form.password.data, ip=client_ip())
        except access.TooManyAttempts as exc:
            log_event(logger, "console_sign_in_limited", retry_after=exc.retry_after)
            return _too_many(exc.retry_after)
        # Right or wrong, on to the code: this step tells nothing (access.check_password).
        response = redirect(url_for("console.login_code"), 303)
        set_sign_in_cookie(response, token)
        return response
    return render("login.html", 422 if form.errors else 200, form=form)


def login_code() -> ResponseReturnValue:
    token = request.cookies.get(SIGN_IN_COOKIE)
    if token is None:
        flash(gettext("Sign in with your password first; the code comes after it."), "info")
        return redirect(url_for("console.login"), 303)
    form = ConsoleCodeForm()
    if form.validate_on_submit():
        try:
            session_token = access.check_code(
                db(), services(), sign_in_token=token, code=form.code.data, ip=client_ip(),
                user_agent=request.headers.get("User-Agent", ""))
        except access.TooManyAttempts as exc:
            return _too_many(exc.retry_after)
        except access.WrongCode:
            log_event(logger, "console_code_refused")
            # One answer for a wrong code and for a sign-in whose password was wrong,
            # which this page must not tell apart.
            form.code.errors = [gettext(
                "That code does not sign you in. Check the newest email (or your authenticator"
                " app); if the address or password was mistyped, or the sign-in is older than"
                " ten minutes, start again.")]
        else:
            log_event(logger, "console_signed_in")
            response = redirect(url_for("console.overview"), 303)
            forget_cookie(response, SIGN_IN_COOKIE)
            set_cookie(response, SESSION_COOKIE, session_token)
            return response
    return render("login_code.html", 422 if form.errors else 200, form=form)


def logout() -> ResponseReturnValue:
    form = ActionForm()
    if not form.validate_on_submit():
        return redirect(url_for("console.overview"), 303)
    token = request.cookies.get(SESSION_COOKIE)
    if token:
        access.end_console_session(db(), token)
    log_event(logger, "console_signed_out", user_id=current_operator().user_id)
    flash(gettext("You are signed out of the console."), "success")
    response = redirect(url_for("console.login"), 303)
    forget_cookie(response, SESSION_COOKIE)
    return response


def register(bp: Blueprint) -> None:
    bp.add_url_rule("/login", view_func=login, methods=["GET", "POST"])
    bp.add_url_rule("/login/code", view_func=login_code, methods=["GET", "POST"])
    bp.add_url_rule("/logout", view_func=logout, methods=["POST"])
