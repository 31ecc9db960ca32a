"""What a person sees for a link that no longer works, and the one-click resend.

Each TokenError code gets a page that says what happened and what to do next.
For expired or replaced links the page offers a button that sends a fresh link
to whoever the old one was for: the old token itself (signature checked, age
ignored) names the account, so the page never shows or asks for an address,
and a forged token learns nothing.
"""

from __future__ import annotations

import logging

from flask import Blueprint, Response, redirect, request, url_for
from flask.typing import ResponseReturnValue

from authsvc import accounts, users
from authsvc.logs import log_event
from authsvc.pages.forms import ResendForm
from authsvc.pages.rendering import render_page
from authsvc.tokens import PURPOSES, TokenError
from authsvc.web import db, services

_STATUS = {"invalid_token": 400, "token_expired": 410, "token_superseded": 410, "token_used": 410}
SENT_KINDS = ("signup", "verify", "reset", "resend")

logger = logging.getLogger(__name__)


def link_problem(error: TokenError, purpose: str, token: object) -> Response:
    """The page for a link that cannot be redeemed, with the way forward."""
    log_event(logger, "link_refused", purpose=purpose, code=error.code, method=request.method)
    resend = None
    if error.code in {"token_expired", "token_superseded"} and isinstance(token, str):
        resend = ResendForm(formdata=None, token=token, purpose=purpose)
    return render_page(
        "link_problem.html",
        _STATUS.get(error.code, 400),
        code=error.code,
        purpose=purpose,
        resend_form=resend,
    )


def resend() -> ResponseReturnValue:
    """Queue a new link for the account an expired or replaced link belongs to."""
    form = ResendForm()
    purpose = form.purpose.data
    if not form.validate_on_submit() or purpose not in PURPOSES:
        return render_page("link_problem.html", 400, code="invalid_token", purpose="verify")
    svc = services()
    try:
        claims = svc.tokens.read(form.token.data, purpose, check_expiry=False)
    except TokenError as exc:
        return link_problem(exc, purpose, None)
    conn = db()
    if users.was_redeemed(conn, claims.user_id, purpose, claims.version):
        # A used link is never a reason to mail its owner again.
        return link_problem(TokenError("token_used"), purpose, None)
    user = users.find_user_by_id(conn, claims.user_id)
    if user is not None:
        log_event(logger, "link_resend_requested", purpose=purpose, user_id=user.id)
        if purpose == "reset":
            accounts.request_password_reset(conn, svc, email=user.email)
        else:
            accounts.request_verification(conn, svc, email=user.email)
    return redirect(url_for("pages.check_email", sent="resend", purpose=purpose), 303)


def check_email() -> ResponseReturnValue:
    """The generic "we sent a link" page: never says whether an account exists."""
    sent = request.args.get("sent", "")
    purpose = request.args.get("purpose", "")
    svc = services()
    ttl = svc.tokens.ttl("reset" if sent == "reset" or purpose == "reset" else "verify")
    return render_page(
        "check_email.html",
        sent=sent if sent in SENT_KINDS else "resend",
        purpose=purpose if purpose in PURPOSES else "verify",
        ttl_text=describe_duration(ttl),
    )


def describe_duration(seconds: int) -> str:
    """'30 minutes', '24 hours', '2 days': how long a link lives, for people."""
    for unit_seconds, unit in ((86400, "day"), (3600, "hour"), (60, "minute")):
        if seconds >= unit_seconds and seconds % unit_seconds == 0:
            count = seconds // unit_seconds
            if unit == "day" and count == 1:
                return "24 hours"
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds} seconds"


def register(bp: Blueprint) -> None:
    bp.add_url_rule("/links/resend", view_func=resend, methods=["POST"])
    bp.add_url_rule("/check-email", view_func=check_email, methods=["GET"])
