"""/sign-in, /sign-in/code and /sign-in/request: signing in by email (SPEC §13).

GET and HEAD of a link only show the address it signs in as and a button
(mail scanners prefetch links, and some submit forms: no script here posts
this one); only the CSRF-checked POST redeems. A redemption starts a fresh
server session, under a new id, in the redemption's transaction, and the
session the browser held before (if any) ends: the id before and after
differ.
"""

from __future__ import annotations

import logging

from flask import Blueprint, flash, redirect, request, url_for
from flask.typing import ResponseReturnValue

from authsvc.accounts import actions, sign_in
from authsvc.accounts.passwords import WeakPassword
from authsvc.accounts.sign_in import SignedIn
from authsvc.accounts.tokens import TokenError
from authsvc.accounts.users import User
from authsvc.observability.logs import log_event
from authsvc.web.pages.codes import refused_code
from authsvc.web.pages.forms import SignInCodeForm, SignInForm
from authsvc.web.pages.i18n import gettext
from authsvc.web.pages.link_problem import link_page, link_problem
from authsvc.web.pages.link_request import link_request_page
from authsvc.web.pages.refusals import translated_refusal
from authsvc.web.pages.rendering import render_page
from authsvc.web.pages.session_cookie import adopt_session
from authsvc.web.plumbing import db, services

logger = logging.getLogger(__name__)


def sign_in_page() -> ResponseReturnValue:
    """GET/HEAD only inspect the link; the POST signs in."""
    return link_page(
        "sign_in", _redeem,
        lambda token, user: _confirm_page(SignInForm(formdata=None, token=token), user),
    )


def _confirm_page(form: SignInForm, user: User, status: int = 200) -> ResponseReturnValue:
    return render_page("sign_in.html", status, form=form, email=user.email,
                       discards_password=sign_in.discards_password(user))


def _user_agent() -> str:
    return request.headers.get("User-Agent", "")


def _redeem() -> ResponseReturnValue:
    form = SignInForm()
    valid = form.validate_on_submit()
    token = form.token.data if valid else None
    password = (form.password.data or None) if valid else None
    try:
        signed_in = sign_in.sign_in_with_link(db(), services(), token=token, password=password,
                                              user_agent=_user_agent())
    except TokenError as exc:
        return link_problem(exc, "sign_in", token)
    except WeakPassword as exc:
        form.password.errors = [translated_refusal(exc)]
        try:
            user = sign_in.check_sign_in_link(db(), services(), token)
        except TokenError as dead:
            return link_problem(dead, "sign_in", token)
        return _confirm_page(form, user, 422)
    return _signed_in(signed_in, by="link", chose_password=password is not None)


def sign_in_code() -> ResponseReturnValue:
    form = SignInCodeForm()
    if not form.validate_on_submit():
        return render_page("sign_in_code.html", 422 if form.errors else 200, form=form)
    try:
        signed_in = sign_in.sign_in_with_code(db(), services(), email=form.email.data,
                                              code=form.code.data, user_agent=_user_agent())
    except TokenError as exc:
        return refused_code("sign_in_code.html", form, exc)
    return _signed_in(signed_in, by="code", chose_password=False)


def _signed_in(signed_in: SignedIn, *, by: str, chose_password: bool) -> ResponseReturnValue:
    assert signed_in.session_token is not None  # the pages always start a session
    adopt_session(signed_in.user, signed_in.session_token)
    # "account_created": `created` is a LogRecord attribute of its own.
    log_event(logger, "signed_in_by_email", user_id=signed_in.user.id, by=by,
              account_created=signed_in.created,
              password_discarded=signed_in.password_discarded)
    if signed_in.password_discarded and not chose_password:
        flash(gettext("The password set for this address before it was confirmed was discarded:"
                      " anyone can sign up with an address, so only a password chosen after"
                      " proving it counts. To have one, use “Forgot your password?” on the"
                      " login page."), "info")
    elif signed_in.password_discarded:
        flash(gettext("The password set for this address before it was confirmed was discarded:"
                      " anyone can sign up with an address, so only a password chosen after"
                      " proving it counts. The password you just chose is the account's now."),
              "info")
    return redirect(url_for("pages.account"), 303)


def request_sign_in() -> ResponseReturnValue:
    """Ask for a sign-in link by address; the answer is always the same."""
    return link_request_page("sign_in_request.html", actions.request_sign_in, "sign_in")


def register(bp: Blueprint) -> None:
    bp.add_url_rule("/sign-in", view_func=sign_in_page, methods=["GET", "POST"])
    bp.add_url_rule("/sign-in/code", view_func=sign_in_code, methods=["GET", "POST"])
    bp.add_url_rule("/sign-in/request", view_func=request_sign_in, methods=["GET", "POST"])
