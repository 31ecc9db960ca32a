"""/verify/code and /reset/code: the emailed 6-digit code, typed with the address.

For people who read the email on another device than the one they signed up
on. The same rules as the links (authsvc.accounts), and one answer for a
wrong code and an address without one, so the page reveals no account.
"""

from __future__ import annotations

import logging
from typing import Any

from flask import Blueprint, flash, redirect, url_for
from flask.typing import ResponseReturnValue
from flask_wtf import FlaskForm

from authsvc.accounts import actions
from authsvc.accounts.passwords import WeakPassword
from authsvc.accounts.tokens import TokenError
from authsvc.observability.logs import log_event
from authsvc.web.pages.forms import ResetCodeForm, VerifyCodeForm
from authsvc.web.pages.i18n import gettext
from authsvc.web.pages.language import email_locale
from authsvc.web.pages.refusals import translated_refusal
from authsvc.web.pages.rendering import render_page
from authsvc.web.pages.session_cookie import end_this_session, forget_cached_session
from authsvc.web.plumbing import db, services

logger = logging.getLogger(__name__)
# A refused code's page status: the form again (422), or the code is gone (410).
_STATUS = {"invalid_code": 422, "code_exhausted": 410, "token_expired": 410}


def refused_code(template: str, form: FlaskForm, error: TokenError,
                 **context: Any) -> ResponseReturnValue:
    """A code form again after its code was refused: the wrong-code wording, or the page
    saying the code is gone (410). Every code page of every purpose answers so."""
    if error.code == "invalid_code":
        form.code.errors = [gettext(  # type: ignore[attr-defined]
            "That code does not work for this address. Check that it is from the newest email"
            " and that the address is the one it was sent to.")]  # type: ignore[attr-defined]
    return render_page(template, _STATUS.get(error.code, 422), form=form, problem=error.code,
                       **context)


def _refused(template: str, form: VerifyCodeForm | ResetCodeForm, purpose: str,
             error: TokenError, *, needs_password: bool) -> ResponseReturnValue:
    return refused_code(template, form, error, purpose=purpose, needs_password=needs_password)


def verify_code() -> ResponseReturnValue:
    form = VerifyCodeForm()
    if not form.validate_on_submit():
        return render_page("enter_code.html", 422 if form.errors else 200, form=form,
                           purpose="verify", needs_password=bool(form.password.errors))
    password = form.password.data or None
    try:
        user = actions.confirm_verification_code(
            db(), services(), email=form.email.data, code=form.code.data, password=password
        )
    except TokenError as exc:
        return _refused("enter_code.html", form, "verify", exc, needs_password=password is not None)
    except actions.PasswordRequired:
        form.password.errors = [gettext("Choose a password to confirm this address.")]
        return render_page("enter_code.html", 422, form=form, purpose="verify",
                           needs_password=True)
    except WeakPassword as exc:
        form.password.errors = [translated_refusal(exc)]
        return render_page("enter_code.html", 422, form=form, purpose="verify",
                           needs_password=True)
    log_event(logger, "email_verified", user_id=user.id, by="code")
    forget_cached_session()  # confirming ends sessions opened before the proof
    return render_page("verified.html", email=user.email)


def reset_code() -> ResponseReturnValue:
    form = ResetCodeForm()
    if not form.validate_on_submit():
        return render_page("enter_code.html", 422 if form.errors else 200, form=form,
                           purpose="reset", needs_password=True)
    try:
        user = actions.reset_password_with_code(
            db(), services(), email=form.email.data, code=form.code.data,
            password=form.password.data, locale=email_locale(),
        )
    except TokenError as exc:
        return _refused("enter_code.html", form, "reset", exc, needs_password=True)
    except WeakPassword as exc:
        form.password.errors = [translated_refusal(exc)]
        return render_page("enter_code.html", 422, form=form, purpose="reset",
                           needs_password=True)
    log_event(logger, "password_reset", user_id=user.id, by="code")
    end_this_session()  # no auto-login: the reset ended every session
    flash(gettext("Your password was changed. Log in with your new password."), "success")
    return redirect(url_for("pages.login"), 303)


def register(bp: Blueprint) -> None:
    bp.add_url_rule("/verify/code", view_func=verify_code, methods=["GET", "POST"])
    bp.add_url_rule("/reset/code", view_func=reset_code, methods=["GET", "POST"])
