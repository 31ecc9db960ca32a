"""POST /webhooks/provider/<name>: a mail provider's bounce and complaint notifications.

Each provider's scheme (authsvc/bounces/providers/) verifies the request
and reads its notices: Resend's Svix signatures, Postmark's and Brevo's
credentials, SES's SNS signatures, SendGrid's ECDSA and Mailgun's HMAC
signatures, each with its own time window. Anything that does not verify
is 401 `invalid_signature`, changes nothing, and the reason is logged
(`provider_webhook_refused`). A verified notice suppresses an address only
when it names an email authsvc sent to that address in the last 30 days (its
provider message id, and for Mailgun and Brevo the job's public id,
authsvc/bounces/notices.py SentMessage); otherwise it is acknowledged and logged
(`provider_webhook_unmatched`). Every notice id is processed once: a replay
within the retention window is acknowledged (200 `{"duplicate": true}`, so
the provider stops retrying) and changes nothing. A hard bounce or a
complaint puts the address on the suppression list
(authsvc/bounces/suppressions.py); other events are acknowledged and ignored.
A provider whose verification is not configured has no endpoint (404).
Every error, a wrong method or an oversized body included, is problem+json.
"""

from __future__ import annotations

import json
import logging
import time

import psycopg
from flask import Blueprint, Flask, Response, current_app, request
from werkzeug.exceptions import HTTPException

from authsvc.bounces.notices import Incoming, Malformed, Notice, NoticeReader, Refused
from authsvc.bounces.providers import readers_for
from authsvc.bounces.suppressions import first_sight_of_webhook, forget_webhook, suppress
from authsvc.config import Settings
from authsvc.observability.logs import log_event
from authsvc.outbox.admin import sent_to
from authsvc.web.api.problems import http_problem_response, problem_reply
from authsvc.web.plumbing import db

log = logging.getLogger(__name__)
bp = Blueprint("provider_webhooks", __name__)
PREFIX = "/webhooks/provider/"
READERS = "authsvc.provider_notice_readers"
# How old an email a notification may be about: providers report bounces within
# hours and complaints within days; the bound keeps the lookup off a full scan.
SENT_WITHIN_SECONDS = 30 * 86400


def install_readers(app: Flask, settings: Settings) -> None:
    """The configured providers' readers, on the app (tests swap one for a routed fetcher)."""
    app.extensions[READERS] = readers_for(settings.provider_webhooks)


def _problem(status: int, code: str, detail: str) -> Response:
    return problem_reply(status, code, detail).to_response()


def _routing_problem() -> Response | None:
    """A wrong method under /webhooks/provider/: routing fails before the blueprint is chosen."""
    exc = request.routing_exception
    if not request.path.startswith(PREFIX) or not isinstance(exc, HTTPException):
        return None
    if (exc.code or 0) < 400:
        return None
    return http_problem_response(exc)


bp.before_app_request(_routing_problem)
bp.register_error_handler(HTTPException, http_problem_response)


def _json(body: dict[str, object], status: int = 200) -> Response:
    return Response(json.dumps(body), status=status, mimetype="application/json")


@bp.post("/webhooks/provider/<name>")
def provider_event(name: str) -> Response:
    readers: dict[str, NoticeReader] = current_app.extensions[READERS]
    reader = readers.get(name)
    if reader is None:
        return _problem(404, "not_found", "No such endpoint")
    request.max_content_length = reader.max_body_bytes
    incoming = Incoming({k.lower(): v for k, v in request.headers.items()},
                        request.get_data(cache=False))
    try:
        reading = reader.read(incoming, time.time())
    except Refused as exc:
        log_event(log, "provider_webhook_refused", logging.WARNING, provider=name,
                  error=str(exc))
        return _problem(401, "invalid_signature", "The webhook signature does not verify.")
    except Malformed as exc:
        return _problem(400, "invalid_request", str(exc))
    conn = db()
    added = 0
    fresh = []
    with conn.transaction():
        for notice in reading.notices:
            if not first_sight_of_webhook(conn, name, notice.id):
                log_event(log, "provider_webhook_replayed", logging.WARNING, provider=name,
                          webhook_id=notice.id)
                continue
            fresh.append(notice)
            for address in _ours(conn, name, notice):
                added += suppress(conn, address, event=notice.event, provider=name,
                                  provider_message_id=notice.provider_message_id,
                                  detail=notice.detail)
    if reading.confirm_url is not None and fresh:
        confirmed = _confirm(name, reader, reading.confirm_url)
        if not confirmed:
            with conn.transaction():
                for notice in fresh:
                    forget_webhook(conn, name, notice.id)
            return _problem(502, "confirmation_failed",
                            "The subscription could not be confirmed; retry.")
    for notice in fresh:
        log_event(log, "provider_webhook_received", provider=name, webhook_id=notice.id,
                  event_type=notice.event, provider_message_id=notice.provider_message_id,
                  suppressed=len(notice.addresses))
    if reading.notices and not fresh:
        # 2xx, not an error: the provider's retry of a message whose first
        # 200 was lost reuses the id; an error would keep it retrying and
        # may get the endpoint disabled. Nothing changes either way.
        return _json({"received": True, "duplicate": True, "suppressed": 0})
    return _json({"received": True, "suppressed": added})


def _ours(conn: psycopg.Connection, name: str, notice: Notice) -> list[str]:
    """The notice's addresses that were sent the message it names; the rest are logged.

    A verified notice is still only the provider's word about some message: one
    that names no email authsvc sent to that address (a forged event under a
    signature that does not cover it, another sender's mail on the same
    account) must not silence the address.
    """
    ours = []
    for address in notice.addresses:
        if sent_to(conn, address, message_id=notice.sent.message_id,
                   public_job_id=notice.sent.public_job_id,
                   within_seconds=SENT_WITHIN_SECONDS):
            ours.append(address)
        else:
            log_event(log, "provider_webhook_unmatched", logging.WARNING, provider=name,
                      webhook_id=notice.id, event_type=notice.event,
                      provider_message_id=notice.provider_message_id,
                      error="no message authsvc sent to this address has the ids it names;"
                            " nothing suppressed")
    return ours


def _confirm(name: str, reader: NoticeReader, url: str) -> bool:
    """Fetch an SNS SubscribeURL (already pinned to SNS's hosts by the reader)."""
    confirm = getattr(reader, "confirm", None)
    try:
        if confirm is not None:
            confirm(url)
    except Refused as exc:
        log_event(log, "provider_subscription_unconfirmed", logging.WARNING, provider=name,
                  error=str(exc))
        return False
    log_event(log, "provider_subscription_confirmed", provider=name)
    return True
