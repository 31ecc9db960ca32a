"""/verify: confirm an email address with a person's click, never on GET."""

from __future__ import annotations

import logging

from flask import Blueprint, redirect, request, url_for
from flask.typing import ResponseReturnValue

from authsvc import accounts
from authsvc.logs import log_event
from authsvc.pages.forms import ConfirmEmailForm, EmailForm
from authsvc.pages.guards import render_page
from authsvc.pages.links import link_problem
from authsvc.pages.session import forget_cached_user
from authsvc.tokens import TokenError
from authsvc.web import db, services

logger = logging.getLogger(__name__)


def verify() -> ResponseReturnValue:
    """GET/HEAD only inspect the link (mail scanners prefetch it); the POST redeems."""
    if request.method == "POST":
        return _confirm()
    token = request.args.get("token", "")
    try:
        user = accounts.check_link(db(), services(), token, "verify")
    except TokenError as exc:
        return link_problem(exc, "verify", token)
    form = ConfirmEmailForm(formdata=None, token=token)
    return render_page("verify.html", form=form, email=user.email)


def _confirm() -> ResponseReturnValue:
    form = ConfirmEmailForm()
    token = form.token.data if form.validate_on_submit() else None
    try:
        user = accounts.confirm_verification(db(), services(), token=token)
    except TokenError as exc:
        return link_problem(exc, "verify", token)
    log_event(logger, "email_verified", user_id=user.id)
    forget_cached_user()  # confirming ends sessions opened before the proof
    return render_page("verified.html", email=user.email)


def request_verification() -> ResponseReturnValue:
    """Ask for a fresh verification link by address; the answer is always the same."""
    form = EmailForm()
    if not form.validate_on_submit():
        return render_page("verify_request.html", 422 if form.errors else 200, form=form)
    accounts.request_verification(db(), services(), email=form.email.data)
    return redirect(url_for("pages.check_email", sent="verify"), 303)


def register(bp: Blueprint) -> None:
    bp.add_url_rule("/verify", view_func=verify, methods=["GET", "POST"])
    bp.add_url_rule("/verify/request", view_func=request_verification, methods=["GET", "POST"])
