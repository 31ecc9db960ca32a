"""POST /links/resend: the one-click "Send a new link" of an expired or replaced link.

The old token (signature checked, age ignored) names the account, so a forged
token learns nothing. The per-address email limit may hold the new link back;
the page then says no more than the API would (see check_email.html), while
the log and /metrics say what happened.
"""

from __future__ import annotations

import logging

from flask import Blueprint, current_app, redirect, url_for
from flask.typing import ResponseReturnValue

from authsvc.accounts import actions, users
from authsvc.accounts.tokens import TokenError
from authsvc.observability.logs import log_event
from authsvc.observability.metrics import web_metrics
from authsvc.web.pages.forms import ResendForm
from authsvc.web.pages.language import email_locale
from authsvc.web.pages.link_problem import RESENDABLE, link_problem
from authsvc.web.pages.rendering import render_page
from authsvc.web.plumbing import db, services

logger = logging.getLogger(__name__)


def resend() -> ResponseReturnValue:
    """Queue a new link for the account an expired or replaced link belongs to."""
    form = ResendForm()
    purpose = form.purpose.data
    if not form.validate_on_submit() or purpose not in RESENDABLE:
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
        if not actions.LINK_REQUESTS[purpose](conn, svc, email=user.email,
                                              locale=email_locale()):
            log_event(logger, "link_resend_suppressed", purpose=purpose, user_id=user.id,
                      reason="email_rate_limited", token_version=claims.version)
            web_metrics(current_app).resends_suppressed.labels(purpose).inc()
    return redirect(url_for("pages.check_email", sent="resend", purpose=purpose), 303)


def register(bp: Blueprint) -> None:
    bp.add_url_rule("/links/resend", view_func=resend, methods=["POST"])
