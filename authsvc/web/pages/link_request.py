"""The ask-for-a-link pages (/verify/request, /reset): one email form, the same answer for all."""

from __future__ import annotations

from collections.abc import Callable

from flask import redirect, url_for
from flask.typing import ResponseReturnValue

from authsvc.web.pages.forms import EmailForm
from authsvc.web.pages.language import email_locale
from authsvc.web.pages.rendering import render_page
from authsvc.web.plumbing import db, services


def link_request_page(
    template: str, request_link: Callable[..., bool], purpose: str
) -> ResponseReturnValue:
    """Show `template`'s form; on a valid POST queue the link and go to "check your email".

    Known and unknown addresses (and ones the email limit holds back) get the
    same redirect, so the page tells nobody which addresses have accounts.
    """
    form = EmailForm()
    if not form.validate_on_submit():
        return render_page(template, 422 if form.errors else 200, form=form)
    request_link(db(), services(), email=form.email.data, locale=email_locale())
    return redirect(url_for("pages.check_email", sent=purpose), 303)
