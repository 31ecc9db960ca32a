"""Changing the address from /account, confirming it, and undoing it (SPEC §12).

- POST /account/email: the new address and the current password; the link and
  code go to the new address, the page says so (and nothing about whether
  the address is taken).
- /email-change/confirm?token= and /email-change/code: GET/HEAD only show
  what will happen and a button (mail scanners open links); the POST moves
  the account.
- /email-change/undo?token=: the same, for the undo link sent to the old
  address; the page says every session ends and offers a new-password field.
"""

from __future__ import annotations

import logging

from flask import Blueprint, flash, redirect, url_for
from flask.typing import ResponseReturnValue

from authsvc.accounts import actions, change_records, email_change, links
from authsvc.accounts.email_change import EmailTaken
from authsvc.accounts.passwords import WeakPassword
from authsvc.accounts.sessions import SessionUser
from authsvc.accounts.tokens import TokenError
from authsvc.accounts.users import User
from authsvc.observability.logs import log_event
from authsvc.web.pages.account import (
    account_page,
    proof_form,
    proof_of,
    refused_proof,
    signed_in_only,
)
from authsvc.web.pages.codes import refused_code
from authsvc.web.pages.forms import (
    ChangeCodeForm,
    ChangeEmailForm,
    ConfirmChangeForm,
    UndoChangeForm,
)
from authsvc.web.pages.link_problem import link_page, link_problem
from authsvc.web.pages.rendering import render_page, too_many_requests
from authsvc.web.pages.session_cookie import end_this_session, forget_cached_session
from authsvc.web.plumbing import db, services

logger = logging.getLogger(__name__)


@signed_in_only
def request_change(signed_in: SessionUser) -> ResponseReturnValue:
    """Send a confirmation link to the new address; nothing changes until it is used."""
    form = proof_form(ChangeEmailForm(), signed_in)
    if not form.validate_on_submit():
        return account_page(422, change_email_form=form)
    if form.new_email.data == signed_in.user.email:
        form.new_email.errors = ["This is already your address."]
        return account_page(422, change_email_form=form)
    password, session = proof_of(form, signed_in)
    try:
        email_change.request_email_change(
            db(), services(), email=signed_in.user.email, new_email=form.new_email.data,
            password=password, session=session,
        )
    except actions.TooManyAttempts as exc:
        return too_many_requests(exc.retry_after)
    except actions.InvalidCredentials:
        refused_proof(form, signed_in)
        return account_page(422, change_email_form=form)
    log_event(logger, "email_change_requested", user_id=signed_in.user.id)
    # The same words whether or not the address is taken (its holder is told instead).
    flash(f"We sent a link to {form.new_email.data}. Your address changes only when it is"
          " used; until then, sign in as before.", "success")
    return redirect(url_for("pages.account"), 303)


def confirm_change() -> ResponseReturnValue:
    """GET/HEAD show where the account will move; only the POST moves it."""
    return link_page("email_change", _redeem_change, _confirm_page)


def _confirm_page(token: str, user: User) -> ResponseReturnValue:
    form = ConfirmChangeForm(formdata=None, token=token)
    return render_page("email_change_confirm.html", form=form, old_email=user.email,
                       new_email=user.pending_email)


def _redeem_change() -> ResponseReturnValue:
    form = ConfirmChangeForm()
    token = form.token.data if form.validate_on_submit() else None
    try:
        changed = email_change.confirm_email_change(db(), services(), token=token)
    except TokenError as exc:
        return link_problem(exc, "email_change", token)
    except EmailTaken:
        return render_page("email_taken.html", 409)
    log_event(logger, "email_changed", user_id=changed.user.id, by="link")
    forget_cached_session()
    return render_page("email_changed.html", email=changed.user.email,
                       previous_email=changed.previous_email)


def change_code() -> ResponseReturnValue:
    """The change email's code, typed with the new address."""
    form = ChangeCodeForm()
    if not form.validate_on_submit():
        return render_page("email_change_code.html", 422 if form.errors else 200, form=form)
    try:
        changed = email_change.confirm_email_change_code(
            db(), services(), email=form.email.data, code=form.code.data)
    except TokenError as exc:
        return refused_code("email_change_code.html", form, exc)
    except EmailTaken:
        return render_page("email_taken.html", 409)
    log_event(logger, "email_changed", user_id=changed.user.id, by="code")
    forget_cached_session()
    return render_page("email_changed.html", email=changed.user.email,
                       previous_email=changed.previous_email)


def undo_change() -> ResponseReturnValue:
    """GET/HEAD show what the undo will do; only the POST undoes."""
    return link_page("email_revert", _redeem_undo, _undo_page)


def _restored_address(token: object) -> str:
    claims = services().tokens.read(token, "email_revert")
    change = change_records.find_change(db(), claims.user_id, claims.version)
    assert change is not None  # the link was just checked
    return change.old_email


def _undo_page(token: str, user: User, form: UndoChangeForm | None = None,
               status: int = 200) -> ResponseReturnValue:
    return render_page("email_change_undo.html", status,
                       form=form or UndoChangeForm(formdata=None, token=token),
                       current_email=user.email, restored_email=_restored_address(token))


def _redeem_undo() -> ResponseReturnValue:
    form = UndoChangeForm()
    valid = form.validate_on_submit()
    token = form.token.data if valid else None
    password = (form.password.data or None) if valid else None
    try:
        restored = email_change.undo_email_change(db(), services(), token=token,
                                                  password=password)
    except TokenError as exc:
        return link_problem(exc, "email_revert", token)
    except EmailTaken:
        return render_page("email_taken.html", 409, undo=True)
    except WeakPassword as exc:
        form.password.errors = [str(exc)]
        try:
            user = links.check_link(db(), services(), token, "email_revert")
        except TokenError as gone:
            return link_problem(gone, "email_revert", token)
        return _undo_page(str(token), user, form, 422)
    log_event(logger, "email_restored", user_id=restored.id)
    end_this_session()  # every session ended, this one too
    return render_page("email_restored.html", email=restored.email,
                       password_set=password is not None)


def register(bp: Blueprint) -> None:
    bp.add_url_rule("/account/email", view_func=request_change, methods=["POST"])
    bp.add_url_rule("/email-change/confirm", view_func=confirm_change, methods=["GET", "POST"])
    bp.add_url_rule("/email-change/code", view_func=change_code, methods=["GET", "POST"])
    bp.add_url_rule("/email-change/undo", view_func=undo_change, methods=["GET", "POST"])
