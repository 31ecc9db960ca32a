"""Postmark's bounce and spam-complaint webhooks: JSON records, unsigned.

Postmark signs nothing; the webhook URL carries HTTP basic credentials
(`https://user:password@…`) or a custom `Authorization: Bearer` header, and
AUTHSVC_POSTMARK_WEBHOOK_AUTH holds the same (checked in constant time).
A record's id is its RecordType and `ID`; its `BouncedAt` must be within
the last 12 hours (longer than Postmark's retries), so a captured request
is refused as stale after the day its id is remembered. A `Bounce` that made
the address inactive (`Inactive`, or a hard type) and a `SpamComplaint`
suppress `Email`; other records are acknowledged.
"""

from __future__ import annotations

from typing import Any

from authsvc.bounces.notices import (
    ONE_EVENT_BYTES,
    Incoming,
    Malformed,
    Notice,
    Reading,
    canonical_addresses,
    check_credentials,
    check_fresh,
    detail,
    digest_id,
    iso_time,
    json_body,
)

WINDOW_SECONDS = 12 * 3600.0
HARD_BOUNCE_TYPES = ("HardBounce", "BadEmailAddress", "ManuallyDeactivated", "SpamNotification")
SUPPRESSING_RECORDS = ("Bounce", "SpamComplaint")

class PostmarkReader:
    name = "postmark"
    max_body_bytes = ONE_EVENT_BYTES

    def __init__(self, auth: str) -> None:
        self.auth = auth

    def read(self, incoming: Incoming, now: float) -> Reading:
        check_credentials(incoming, self.auth)
        record = json_body(incoming)
        if not isinstance(record, dict) or not isinstance(record.get("RecordType"), str):
            raise Malformed("The body must be one Postmark webhook record.")
        kind = record["RecordType"]
        if kind not in SUPPRESSING_RECORDS:
            return Reading([Notice(id=digest_id(kind, record.get("MessageID"),
                                                record.get("Recipient"), record.get("ID")),
                                   event=kind)])
        when = iso_time(record.get("BouncedAt"))
        if when is None:
            raise Malformed("A bounce record needs its BouncedAt time.")
        check_fresh(when, now, window_seconds=WINDOW_SECONDS, what="BouncedAt")
        if not isinstance(record.get("ID"), int | str):
            raise Malformed("A bounce record needs its ID.")
        message_id = record.get("MessageID")
        return Reading([Notice(
            id=f"{kind}:{record['ID']}", event=f"{kind}/{record.get('Type')}",
            addresses=canonical_addresses([record.get("Email")]) if _suppresses(record) else (),
            provider_message_id=message_id if isinstance(message_id, str) else None,
            detail=detail({k: record.get(k) for k in ("Type", "Description", "Details")}))])

def _suppresses(record: dict[str, Any]) -> bool:
    if record["RecordType"] == "SpamComplaint":
        return True
    return record.get("Inactive") is True or record.get("Type") in HARD_BOUNCE_TYPES
