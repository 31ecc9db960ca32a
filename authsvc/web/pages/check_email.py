"""GET /check-email: the generic "a link is on its way" page after every request for one.

It never says whether an account exists, nor whether the per-address limit
held the email back: only what the API's 202 says.
"""

from __future__ import annotations

from flask import Blueprint, request
from flask.typing import ResponseReturnValue

from authsvc.durations import describe_duration
from authsvc.web.pages.language import page_locale
from authsvc.web.pages.rendering import render_page
from authsvc.web.plumbing import services

SENT_KINDS = ("signup", "verify", "reset", "sign_in", "resend")
LINK_PURPOSES = ("verify", "reset", "sign_in")


def check_email() -> ResponseReturnValue:
    sent = request.args.get("sent", "")
    sent = sent if sent in SENT_KINDS else "resend"
    purpose = request.args.get("purpose", "")
    # Which link is on its way: the one asked for, or (a resend) the one it replaces.
    purpose = sent if sent in LINK_PURPOSES else purpose if purpose in LINK_PURPOSES else "verify"
    return render_page(
        "check_email.html",
        sent=sent,
        purpose=purpose,
        ttl_text=describe_duration(services().tokens.ttl(purpose), page_locale()),
    )


def register(bp: Blueprint) -> None:
    bp.add_url_rule("/check-email", view_func=check_email, methods=["GET"])
