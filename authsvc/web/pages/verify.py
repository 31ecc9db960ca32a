"""/verify: confirm an email address with a person's click, never on GET."""

from __future__ import annotations

import logging

from flask import Blueprint
from flask.typing import ResponseReturnValue

from authsvc.accounts import actions, links
from authsvc.accounts.passwords import WeakPassword
from authsvc.accounts.tokens import TokenError
from authsvc.accounts.users import User
from authsvc.observability.logs import log_event
from authsvc.web.pages.forms import ConfirmEmailForm
from authsvc.web.pages.i18n import gettext
from authsvc.web.pages.link_problem import link_page, link_problem, posted_token_and_password
from authsvc.web.pages.link_request import link_request_page
from authsvc.web.pages.refusals import translated_refusal
from authsvc.web.pages.rendering import render_page
from authsvc.web.pages.session_cookie import forget_cached_session
from authsvc.web.plumbing import db, services

logger = logging.getLogger(__name__)


def verify() -> ResponseReturnValue:
    """GET/HEAD only inspect the link (mail scanners prefetch it); the POST redeems."""
    return link_page(
        "verify",
        _confirm,
        lambda token, user: _confirm_page(ConfirmEmailForm(formdata=None, token=token), user),
    )


def _confirm_page(form: ConfirmEmailForm, user: User, status: int = 200) -> ResponseReturnValue:
    return render_page(
        "verify.html", status, form=form, email=user.email, needs_password=user.contested
    )


def _confirm() -> ResponseReturnValue:
    form = ConfirmEmailForm()
    token, password = posted_token_and_password(form)
    try:
        user = actions.confirm_verification(db(), services(), token=token, password=password)
    except TokenError as exc:
        return link_problem(exc, "verify", token)
    except actions.PasswordRequired:
        form.password.errors = [gettext("Choose a password to confirm this address.")]
        return _ask_again(form, token)
    except WeakPassword as exc:
        form.password.errors = [translated_refusal(exc)]
        return _ask_again(form, token)
    log_event(logger, "email_verified", user_id=user.id)
    forget_cached_session()  # confirming ends sessions opened before the proof
    return render_page("verified.html", email=user.email)


def _ask_again(form: ConfirmEmailForm, token: object) -> ResponseReturnValue:
    """The confirm page once more, with the form's errors (the link may have died meanwhile)."""
    try:
        user = links.check_link(db(), services(), token, "verify")
    except TokenError as exc:
        return link_problem(exc, "verify", token)
    return _confirm_page(form, user, 422)


def request_verification() -> ResponseReturnValue:
    """Ask for a fresh verification link by address; the answer is always the same."""
    return link_request_page("verify_request.html", actions.request_verification, "verify")


def register(bp: Blueprint) -> None:
    bp.add_url_rule("/verify", view_func=verify, methods=["GET", "POST"])
    bp.add_url_rule("/verify/request", view_func=request_verification, methods=["GET", "POST"])
