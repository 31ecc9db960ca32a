"""/reset and /reset/confirm: request a reset link, then set a new password."""

from __future__ import annotations

import logging

from flask import Blueprint, flash, redirect, url_for
from flask.typing import ResponseReturnValue

from authsvc.accounts import actions, links
from authsvc.accounts.passwords import WeakPassword
from authsvc.accounts.tokens import TokenError
from authsvc.observability.logs import log_event
from authsvc.web.pages.forms import NewPasswordForm
from authsvc.web.pages.i18n import gettext
from authsvc.web.pages.language import email_locale
from authsvc.web.pages.link_problem import link_form, link_page, link_problem
from authsvc.web.pages.link_request import link_request_page
from authsvc.web.pages.refusals import translated_refusal
from authsvc.web.pages.rendering import render_page
from authsvc.web.pages.session_cookie import end_this_session
from authsvc.web.plumbing import db, services

logger = logging.getLogger(__name__)


def request_reset() -> ResponseReturnValue:
    """Ask for a reset link; known and unknown addresses get the same answer."""
    return link_request_page("reset_request.html", actions.request_password_reset, "reset")


def confirm_reset() -> ResponseReturnValue:
    """GET/HEAD show the form without consuming the link; only the POST redeems it."""
    return link_page("reset", _set_password, link_form(NewPasswordForm, "reset_confirm.html"))


def _set_password() -> ResponseReturnValue:
    form = NewPasswordForm()
    token = form.token.data
    if form.validate_on_submit():
        try:
            user = actions.reset_password(
                db(), services(), token=token, password=form.password.data,
                locale=email_locale(),
            )
        except TokenError as exc:
            return link_problem(exc, "reset", token)
        except WeakPassword as exc:
            form.password.errors = [translated_refusal(exc)]
        else:
            log_event(logger, "password_reset", user_id=user.id)
            # No auto-login: the reset ended every session, this browser's included.
            end_this_session()
            flash(gettext("Your password was changed. Log in with your new password."), "success")
            return redirect(url_for("pages.login"), 303)
    # The form again, with its errors; only now does the page need the address.
    try:
        holder = links.check_link(db(), services(), token, "reset")
    except TokenError as exc:
        return link_problem(exc, "reset", token)
    return render_page("reset_confirm.html", 422, form=form, email=holder.email)


def register(bp: Blueprint) -> None:
    bp.add_url_rule("/reset", view_func=request_reset, methods=["GET", "POST"])
    bp.add_url_rule("/reset/confirm", view_func=confirm_reset, methods=["GET", "POST"])
