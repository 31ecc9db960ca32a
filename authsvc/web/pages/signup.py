"""/signup: create an account; the answer never says whether one existed."""

from __future__ import annotations

from flask import Blueprint, redirect, url_for
from flask.typing import ResponseReturnValue

from authsvc.accounts import actions
from authsvc.accounts.passwords import WeakPassword
from authsvc.web.pages.forms import SignupForm
from authsvc.web.pages.language import email_locale
from authsvc.web.pages.refusals import translated_refusal
from authsvc.web.pages.rendering import render_page
from authsvc.web.plumbing import db, services


def signup() -> ResponseReturnValue:
    form = SignupForm()
    if form.validate_on_submit():
        try:
            actions.sign_up(db(), services(), email=form.email.data, password=form.password.data,
                            locale=email_locale())
        except WeakPassword as exc:
            form.password.errors = [translated_refusal(exc)]
        else:
            return redirect(url_for("pages.check_email", sent="signup"), 303)
    return render_page("signup.html", 422 if form.errors else 200, form=form)


def register(bp: Blueprint) -> None:
    bp.add_url_rule("/signup", view_func=signup, methods=["GET", "POST"])
