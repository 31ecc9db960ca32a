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

from authsvc.bounces.notices import Malformed, Reading
from authsvc.bounces.schemes import CredentialsReader, check_fresh, digest_id, iso_time, notice

WINDOW_SECONDS = 12 * 3600.0
HARD_BOUNCE_TYPES = ("HardBounce", "BadEmailAddress", "ManuallyDeactivated", "SpamNotification")
SUPPRESSING_RECORDS = ("Bounce", "SpamComplaint")


class PostmarkReader(CredentialsReader):
    name = "postmark"

    def read_body(self, record: Any, now: float) -> Reading:
        if not isinstance(record, dict) or not isinstance(record.get("RecordType"), str):
            raise Malformed("The body must be one Postmark webhook record.")
        kind = record["RecordType"]
        if kind not in SUPPRESSING_RECORDS:
            return Reading([notice(digest_id(kind, record.get("MessageID"),
                                             record.get("Recipient"), record.get("ID")), kind)])
        when = iso_time(record.get("BouncedAt"))
        if when is None:
            raise Malformed("A bounce record needs its BouncedAt time.")
        check_fresh(when, now, window_seconds=WINDOW_SECONDS, what="BouncedAt")
        if not isinstance(record.get("ID"), int | str):
            raise Malformed("A bounce record needs its ID.")
        return Reading([notice(
            f"{kind}:{record['ID']}", f"{kind}/{record.get('Type')}",
            suppresses=[record.get("Email")] if _suppresses(record) else (),
            message_id=record.get("MessageID"),
            about={k: record.get(k) for k in ("Type", "Description", "Details")})])


def _suppresses(record: dict[str, Any]) -> bool:
    if record["RecordType"] == "SpamComplaint":
        return True
    return record.get("Inactive") is True or record.get("Type") in HARD_BOUNCE_TYPES
