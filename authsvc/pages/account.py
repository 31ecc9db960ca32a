"""/login, /logout and /account (with the change-password form)."""

from __future__ import annotations

import logging

from flask import Blueprint, flash, redirect, url_for
from flask.typing import ResponseReturnValue

from authsvc import accounts
from authsvc.logs import log_event
from authsvc.pages.forms import ChangePasswordForm, EmailForm, LoginForm, LogoutForm
from authsvc.pages.guards import render_page, too_many_requests
from authsvc.pages.session import has_session, sign_in, sign_out, signed_in_user
from authsvc.passwords import WeakPassword
from authsvc.users import User
from authsvc.web import db, services

logger = logging.getLogger(__name__)


def login() -> ResponseReturnValue:
    form = LoginForm()
    if form.validate_on_submit():
        try:
            user = accounts.authenticate(
                db(), services(), email=form.email.data, password=form.password.data
            )
        except accounts.TooManyAttempts as exc:
            return too_many_requests(exc.retry_after)
        except accounts.InvalidCredentials:
            form.password.errors = ["The email address or password is wrong."]
        else:
            sign_in(user)
            return redirect(url_for("pages.account"), 303)
    return render_page("login.html", 422 if form.errors else 200, form=form)


def logout() -> ResponseReturnValue:
    """GET shows the button; only the CSRF-checked POST signs out."""
    form = LogoutForm()
    if form.validate_on_submit():
        sign_out()
        flash("You are logged out.", "success")
        return redirect(url_for("pages.login"), 303)
    return render_page("logout.html", form=form)


def index() -> ResponseReturnValue:
    """The site root: your account when signed in, else the login page."""
    target = "pages.account" if signed_in_user() else "pages.login"
    return redirect(url_for(target), 303)


def account() -> ResponseReturnValue:
    user = _require_user()
    if user is None:
        return redirect(url_for("pages.login"), 303)
    return _account_page(ChangePasswordForm(formdata=None))


def change_password() -> ResponseReturnValue:
    """Change the password; every session ends, this one included."""
    user = _require_user()
    if user is None:
        return redirect(url_for("pages.login"), 303)
    form = ChangePasswordForm()
    if not form.validate_on_submit():
        return _account_page(form, 422)
    try:
        accounts.change_password(
            db(),
            services(),
            user_id=user.id,
            session_version=user.session_version,
            current=form.current.data,
            new=form.new.data,
        )
    except accounts.SessionEnded:
        sign_out()
        flash("Your session ended because the password was changed. Log in again.", "info")
        return redirect(url_for("pages.login"), 303)
    except accounts.InvalidCredentials:
        form.current.errors = ["That is not your current password."]
        return _account_page(form, 422)
    except WeakPassword as exc:
        form.new.errors = [str(exc)]
        return _account_page(form, 422)
    log_event(logger, "password_changed", user_id=user.id)
    sign_out()
    flash(
        "Your password was changed and you were logged out everywhere. "
        "Log in with your new password.",
        "success",
    )
    return redirect(url_for("pages.login"), 303)


def _require_user() -> User | None:
    """The signed-in account; explains an ended session on the way to /login."""
    had_session = has_session()
    user = signed_in_user()
    if user is None:
        if had_session:
            flash("Your session ended (the password was changed). Log in again.", "info")
        else:
            flash("Log in to see your account.", "info")
    return user


def _account_page(form: ChangePasswordForm, status: int = 200) -> ResponseReturnValue:
    user = signed_in_user()
    assert user is not None
    resend = None
    if user.email_verified_at is None:
        resend = EmailForm(formdata=None, email=user.email)
    return render_page(
        "account.html", status, user=user, form=form, resend_form=resend, logout_form=LogoutForm()
    )


def register(bp: Blueprint) -> None:
    bp.add_url_rule("/", view_func=index, methods=["GET"])
    bp.add_url_rule("/login", view_func=login, methods=["GET", "POST"])
    bp.add_url_rule("/logout", view_func=logout, methods=["GET", "POST"])
    bp.add_url_rule("/account", view_func=account, methods=["GET"])
    bp.add_url_rule("/account/password", view_func=change_password, methods=["POST"])
