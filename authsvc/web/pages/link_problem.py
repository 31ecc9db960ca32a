"""What a person sees for a link that no longer works: what happened and what to do next.

Each TokenError code gets its own wording. For expired or replaced links the
page offers a button that sends a fresh link (see resend.py); the old token
itself names the account, so the page never shows or asks for an address.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from flask import Response, request
from flask.typing import ResponseReturnValue

from authsvc.accounts import links
from authsvc.accounts.tokens import TokenError
from authsvc.accounts.users import User
from authsvc.observability.logs import log_event
from authsvc.web.pages.branding import brand_link_page
from authsvc.web.pages.forms import ConfirmEmailForm, LinkForm, ResendForm, UndoChangeForm
from authsvc.web.pages.rendering import render_page
from authsvc.web.plumbing import db, services

_STATUS = {"invalid_token": 400, "token_expired": 410, "token_superseded": 410, "token_used": 410}

logger = logging.getLogger(__name__)
# The links a dead one's page offers to send again (POST /links/resend); a
# change or a deletion is asked again from the account page (it needs the
# password), and an undo link is never sent again.
RESENDABLE = ("reset", "verify", "sign_in")


def checked_link(purpose: str) -> tuple[str, User | Response]:
    """The ?token= of this request and its account, or the page explaining why it will not
    redeem. Changes nothing: GET/HEAD (mail scanners prefetch links) only look."""
    token = request.args.get("token", "")
    try:
        return token, links.check_link(db(), services(), token, purpose)
    except TokenError as exc:
        return token, link_problem(exc, purpose, token)


def link_page(
    purpose: str,
    redeem: Callable[[], ResponseReturnValue],
    show: Callable[[str, User], ResponseReturnValue],
) -> ResponseReturnValue:
    """A link's landing page: only the POST redeems (`redeem`); GET/HEAD `show` the form
    for a live link, or the page saying why it will not redeem."""
    # The brand first: the page's language may be the brand's default.
    brand_link_page(request.form.get("token") if request.method == "POST"
                    else request.args.get("token"), purpose)
    if request.method == "POST":
        return redeem()
    token, user = checked_link(purpose)
    if not isinstance(user, User):
        return user
    return show(token, user)


def link_form(
    form: Callable[..., LinkForm],
    template: str,
    about: Callable[[User], dict[str, Any]] = lambda user: {"email": user.email},
) -> Callable[[str, User], ResponseReturnValue]:
    """A link page's `show` that is one form: the token in its hidden field, and what the
    page says of the account (`about`: its address, unless told otherwise)."""

    def show(token: str, user: User) -> ResponseReturnValue:
        return render_page(template, form=form(formdata=None, token=token), **about(user))

    return show


def posted_token_and_password(
    form: ConfirmEmailForm | UndoChangeForm,
) -> tuple[str | None, str | None]:
    """A link page's POST: its token and the optional password chosen beside it, each None
    when the form does not validate (the use case then refuses the token)."""
    if not form.validate_on_submit():
        return None, None
    return form.token.data, form.password.data or None


def link_problem(error: TokenError, purpose: str, token: object) -> Response:
    """The page for a link that cannot be redeemed, with the way forward."""
    log_event(logger, "link_refused", purpose=purpose, code=error.code, method=request.method)
    resend = None
    if (error.code in {"token_expired", "token_superseded"} and isinstance(token, str)
            and purpose in RESENDABLE):
        resend = ResendForm(formdata=None, token=token, purpose=purpose)
    return render_page(
        "link_problem.html",
        _STATUS.get(error.code, 400),
        code=error.code,
        purpose=purpose,
        resend_form=resend,
    )
