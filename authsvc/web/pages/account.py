"""/login, /logout and /account (sessions, change password)."""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable
from typing import TypedDict, TypeVar

from flask import Blueprint, flash, redirect, url_for
from flask.typing import ResponseReturnValue

from authsvc.accounts import actions, sessions
from authsvc.accounts.email_change import SameAddress
from authsvc.accounts.passwords import WeakPassword
from authsvc.accounts.sessions import SessionUser
from authsvc.observability.logs import log_event
from authsvc.web.pages.forms import (
    ChangeEmailForm,
    ChangePasswordForm,
    DeleteAccountForm,
    EndSessionForm,
    LoginForm,
    LogoutForm,
)
from authsvc.web.pages.i18n import gettext
from authsvc.web.pages.refusals import translated_refusal
from authsvc.web.pages.rendering import render_page, too_many_requests
from authsvc.web.pages.session_cookie import (
    current_session,
    end_this_session,
    has_session,
    sign_in,
    signed_in_user,
)
from authsvc.web.pages.user_agents import describe_user_agent
from authsvc.web.plumbing import db, services

logger = logging.getLogger(__name__)
# The forms on /account that the current password allows.
AccountForm = ChangePasswordForm | ChangeEmailForm | DeleteAccountForm
ProofForm = TypeVar("ProofForm", ChangeEmailForm, DeleteAccountForm)


def proof_form(form: ProofForm, signed_in: SessionUser) -> ProofForm:
    """An address-change or deletion form as this account proves itself: the current
    password, or, with no password, nothing typed (the session's recent sign-in by email
    is the proof: actions.confirm_identity)."""
    if not signed_in.user.has_password:
        del form.current
    return form


class Proof(TypedDict):
    """Who asks, as the address-change and deletion use cases take it: one of the two."""

    password: str | None
    session: SessionUser | None  # a session a sign-in link started lately


def proof_of(form: ChangeEmailForm | DeleteAccountForm, signed_in: SessionUser) -> Proof:
    """The proof a submitted proof_form carries: the password, or, for an account with
    none, the session (its recent sign-in by email)."""
    if signed_in.user.has_password:
        return {"password": form.current.data, "session": None}
    return {"password": None, "session": signed_in}


def login() -> ResponseReturnValue:
    form = LoginForm()
    if form.validate_on_submit():
        try:
            user = actions.authenticate(
                db(), services(), email=form.email.data, password=form.password.data
            )
            sign_in(user)
        except actions.TooManyAttempts as exc:
            return too_many_requests(exc.retry_after)
        except actions.InvalidCredentials:
            # One message for a wrong password and an unconfirmed address:
            # telling them apart would tell anyone which addresses are proven.
            form.password.errors = [gettext(
                "The email address or password is wrong, or the address is not confirmed yet."
            )]
        else:
            return redirect(url_for("pages.account"), 303)
    return render_page("login.html", 422 if form.errors else 200, form=form)


def logout() -> ResponseReturnValue:
    """GET shows the button; only the CSRF-checked POST signs out."""
    form = LogoutForm()
    if form.validate_on_submit():
        end_this_session()
        flash(gettext("You are logged out."), "success")
        return redirect(url_for("pages.login"), 303)
    return render_page("logout.html", form=form)


def index() -> ResponseReturnValue:
    """The site root: your account when signed in, else the login page."""
    target = "pages.account" if signed_in_user() else "pages.login"
    return redirect(url_for(target), 303)


def signed_in_only(
    view: Callable[[SessionUser], ResponseReturnValue],
) -> Callable[[], ResponseReturnValue]:
    """The view, given the signed-in session; without one, off to /login (with the reason)."""

    @functools.wraps(view)
    def guarded() -> ResponseReturnValue:
        signed_in = _require_session()
        if signed_in is None:
            return redirect(url_for("pages.login"), 303)
        return view(signed_in)

    return guarded


@signed_in_only
def account(_signed_in: SessionUser) -> ResponseReturnValue:
    return account_page()


@signed_in_only
def change_password(signed_in: SessionUser) -> ResponseReturnValue:
    """Change the password; every session ends, this one included."""
    form = ChangePasswordForm()
    if not form.validate_on_submit():
        return account_page(422, form)
    try:
        refused = with_current_password(form, lambda: actions.change_password(
            db(), services(), session=signed_in, current=form.current.data, new=form.new.data))
    except actions.SessionEnded:
        end_this_session()
        flash(gettext("Your session ended. Log in again."), "info")
        return redirect(url_for("pages.login"), 303)
    except WeakPassword as exc:
        form.new.errors = [translated_refusal(exc)]
        return account_page(422, form)
    if refused is not None:
        return refused
    log_event(logger, "password_changed", user_id=signed_in.user.id)
    end_this_session()
    flash(gettext("Your password was changed and you were logged out everywhere. "
                  "Log in with your new password."), "success")
    return redirect(url_for("pages.login"), 303)


@signed_in_only
def end_session(signed_in: SessionUser) -> ResponseReturnValue:
    """End one of the person's sessions, or (session_id "all") every one of them."""
    form = EndSessionForm()
    if not form.validate_on_submit():
        return account_page(422)
    target = form.session_id.data
    user_id = signed_in.user.id
    if target == "all":
        sessions.end_all_sessions(db(), user_id)
        log_event(logger, "sessions_ended", user_id=user_id, which="all")
        end_this_session()
        flash(gettext("Every session was ended, this one too. Log in again."), "success")
        return redirect(url_for("pages.login"), 303)
    well_formed = re.fullmatch(r"[0-9]{1,18}", target) is not None
    ended = well_formed and sessions.end_user_session(db(), user_id, int(target))
    log_event(logger, "sessions_ended", user_id=user_id, which="one", found=bool(ended))
    if target == str(signed_in.session_id):
        end_this_session()
        flash(gettext("This session was ended. Log in again."), "success")
        return redirect(url_for("pages.login"), 303)
    flash(gettext("That session was ended.") if ended
          else gettext("That session had already ended."), "success")
    return redirect(url_for("pages.account"), 303)


def with_current_password(form: AccountForm,
                          action: Callable[[], object]) -> ResponseReturnValue | None:
    """Run an account action that the current password allows: None when it ran; else the
    answer to too many tries, or /account with the refusal under the form's field."""
    try:
        action()
    except actions.TooManyAttempts as exc:
        return too_many_requests(exc.retry_after)
    except actions.InvalidCredentials:
        if "current" in form:
            form.current.errors = [gettext("That is not your current password.")]
        else:  # no password: the proof was a recent sign-in by email, and it is missing
            flash(gettext("Your account has no password, so this needs a sign-in by email from the"
                      " last 10 minutes: email yourself a sign-in link, use it, and ask again."),
              "info")
        return account_page(422, form)
    except SameAddress:
        assert isinstance(form, ChangeEmailForm)
        form.new_email.errors = [gettext("This is already your address.")]
        return account_page(422, form)
    return None


def request_from_account(form: AccountForm, action: Callable[[], object], *, event: str,
                         user_id: int, sent: Callable[[], str]) -> ResponseReturnValue:
    """An /account form that sends an email to confirm something: the page again with the
    form's errors, or, once the current password allowed it, /account saying what was sent."""
    if not form.validate_on_submit():
        return account_page(422, form)
    refused = with_current_password(form, action)
    if refused is not None:
        return refused
    log_event(logger, event, user_id=user_id)
    flash(sent(), "success")
    return redirect(url_for("pages.account"), 303)


def _require_session() -> SessionUser | None:
    """The signed-in session; explains an ended one on the way to /login."""
    had_session = has_session()
    found = current_session()
    if found is None:
        if had_session:
            flash(gettext("Your session ended. Log in again."), "info")
        else:
            flash(gettext("Log in to see your account."), "info")
    return found


def account_page(status: int = 200, submitted: AccountForm | None = None) -> ResponseReturnValue:
    """/account, with the one form as submitted (and its errors) where it was refused."""

    def shown(kind: type[AccountForm]) -> AccountForm:
        return submitted if isinstance(submitted, kind) else kind(formdata=None)

    signed_in = current_session()
    assert signed_in is not None
    user = signed_in.user
    return render_page(
        "account.html",
        status,
        user=user,
        form=shown(ChangePasswordForm),
        change_email_form=shown(ChangeEmailForm),
        delete_form=shown(DeleteAccountForm),
        logout_form=LogoutForm(),
        end_session_form=EndSessionForm(formdata=None),
        sessions=sessions.list_sessions(db(), user.id, services().clock()),
        this_session_id=signed_in.session_id,
        browser_name=describe_user_agent,
    )


def register(bp: Blueprint) -> None:
    bp.add_url_rule("/", view_func=index, methods=["GET"])
    bp.add_url_rule("/login", view_func=login, methods=["GET", "POST"])
    bp.add_url_rule("/logout", view_func=logout, methods=["GET", "POST"])
    bp.add_url_rule("/account", view_func=account, methods=["GET"])
    bp.add_url_rule("/account/password", view_func=change_password, methods=["POST"])
    bp.add_url_rule("/account/sessions/end", view_func=end_session, methods=["POST"])
