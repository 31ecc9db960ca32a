"""POST /webhooks/provider/<name>: a mail provider's bounce and complaint events.

For Resend these are Svix messages, which are Standard Webhooks: headers
`svix-id`/`svix-timestamp`/`svix-signature` (or the `webhook-*` spellings)
and a v1 HMAC-SHA256 signature of "id.timestamp.body" under
AUTHSVC_PROVIDER_WEBHOOK_SECRET (whsec_…), checked by the `standardwebhooks`
package, which also refuses timestamps more than five minutes off. A message
id is processed once: a replay within the retention window is acknowledged
(200 `{"duplicate": true}`, so the provider stops retrying) and changes
nothing. A hard bounce (`email.bounced` whose bounce type is not
Transient) or a complaint (`email.complained`) puts the recipient on the
suppression list (authsvc/bounces/suppressions.py); other events are acknowledged
and ignored. Without a secret configured the endpoint does not exist (404).
Every error, a wrong method or an oversized body included, is problem+json.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from flask import Blueprint, Response, request
from standardwebhooks.webhooks import Webhook, WebhookVerificationError
from werkzeug.exceptions import HTTPException

from authsvc.accounts.addresses import InvalidAddress, parse_address
from authsvc.bounces.suppressions import first_sight_of_webhook, suppress
from authsvc.observability.logs import log_event
from authsvc.web.api.problems import http_problem_response, problem_reply
from authsvc.web.plumbing import db, services

log = logging.getLogger(__name__)
bp = Blueprint("provider_webhooks", __name__)
PROVIDERS = ("resend",)
SUPPRESSING_EVENTS = ("email.bounced", "email.complained")
# Bounce types that do not mean "this address will never take mail".
SOFT_BOUNCE_TYPES = ("transient", "undetermined")
_HEADER_NAMES = ("id", "timestamp", "signature")
PREFIX = "/webhooks/provider/"


def _problem(status: int, code: str, detail: str) -> Response:
    return problem_reply(status, code, detail).to_response()


def _signature_headers() -> dict[str, str]:
    """webhook-id/-timestamp/-signature, from the Standard or the Svix spelling."""
    found = {}
    for name in _HEADER_NAMES:
        value = request.headers.get(f"webhook-{name}") or request.headers.get(f"svix-{name}")
        if value:
            found[f"webhook-{name}"] = value
    return found


def _suppressible_addresses(event: dict[str, Any]) -> list[str]:
    """The canonical recipients this event suppresses (none for other events)."""
    kind = event.get("type")
    data = event.get("data")
    if kind not in SUPPRESSING_EVENTS or not isinstance(data, dict):
        return []
    if kind == "email.bounced":
        bounce = data.get("bounce")
        bounce_type = bounce.get("type") if isinstance(bounce, dict) else None
        if isinstance(bounce_type, str) and bounce_type.lower() in SOFT_BOUNCE_TYPES:
            return []
    to = data.get("to")
    recipients = [to] if isinstance(to, str) else to if isinstance(to, list) else []
    addresses = []
    for recipient in recipients:
        try:
            addresses.append(parse_address(recipient))
        except InvalidAddress:
            continue  # not one of ours: authsvc only ever sends to canonical addresses
    return addresses


def _detail(event: dict[str, Any]) -> str | None:
    data: dict[str, Any] = event["data"] if isinstance(event.get("data"), dict) else {}
    for key in ("bounce", "complaint"):
        part = data.get(key)
        if isinstance(part, dict):
            return json.dumps(part, sort_keys=True)[:500]
    return None


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


@bp.post("/webhooks/provider/<name>")
def provider_event(name: str) -> Response:
    secret = services().settings.provider_webhook_secret
    if name not in PROVIDERS or not secret:
        return _problem(404, "not_found", "No such endpoint")
    raw = request.get_data(cache=False)
    headers = _signature_headers()
    try:
        Webhook(secret).verify(raw, headers, json_parse=False)
    except (WebhookVerificationError, ValueError) as exc:
        # ValueError: a malformed signature list (binascii) or a body that is not UTF-8.
        log_event(log, "provider_webhook_refused", logging.WARNING, provider=name,
                  error=str(exc) or type(exc).__name__)
        return _problem(401, "invalid_signature", "The webhook signature does not verify.")
    try:
        event = json.loads(raw)
    except ValueError:
        event = None
    if not isinstance(event, dict):
        return _problem(400, "invalid_request", "The event must be a JSON object.")
    message_id = headers["webhook-id"]
    conn = db()
    with conn.transaction():
        if not first_sight_of_webhook(conn, name, message_id):
            log_event(log, "provider_webhook_replayed", logging.WARNING, provider=name,
                      webhook_id=message_id)
            # 2xx, not an error: the provider's retry of a message whose first
            # 200 was lost reuses the id; an error would keep it retrying and
            # may get the endpoint disabled. Nothing changes either way.
            body = json.dumps({"received": True, "duplicate": True, "suppressed": 0})
            return Response(body, status=200, mimetype="application/json")
        data: dict[str, Any] = event["data"] if isinstance(event.get("data"), dict) else {}
        provider_id = data.get("email_id") if isinstance(data.get("email_id"), str) else None
        added = 0
        for address in _suppressible_addresses(event):
            added += suppress(conn, address, event=str(event["type"]), provider=name,
                              provider_message_id=provider_id, detail=_detail(event))
    log_event(log, "provider_webhook_received", provider=name, webhook_id=message_id,
              event_type=str(event.get("type")), provider_message_id=provider_id, suppressed=added)
    body = json.dumps({"received": True, "suppressed": added})
    return Response(body, status=200, mimetype="application/json")
