"""Faults on demand: the sink answers a scope's next N deliveries with a chosen SMTP reply.

QA sets one (`POST /_inbox/scopes/{scope}/faults`) to prove end to end that
a refused first attempt is retried into exactly one email, or that a
permanent refusal ends `failed`. Kept in PostgreSQL (inbox_faults,
migrations/0028) so the HTTP server that sets a fault and every sink process
that takes it agree.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from psycopg import Connection

from authsvc.db.queries import load_queries
from authsvc.inbox.params import BadRequest

Q = load_queries(Path(__file__).with_suffix(".sql"))
MAX_COUNT = 100
MAX_TEXT = 200
RETENTION_SECONDS = 24 * 3600
# One line: a 4xx or 5xx code, then optionally a space and printable ASCII.
# Nothing else may reach the SMTP reply (a CR or LF would let a caller write
# a second reply line, or a whole second reply, into the sink's answer).
REPLY_PATTERN = rf"^[45][0-9][0-9]( [\x20-\x7e]{{0,{MAX_TEXT}}})?$"
_REPLY = re.compile(REPLY_PATTERN)
_FIELDS = {"reply", "count"}


@dataclass(frozen=True)
class Fault:
    scope: str
    reply: str
    remaining: int

    def as_json(self) -> dict[str, Any]:
        return {"scope": self.scope, "reply": self.reply, "count": self.remaining}


def parse_fault(body: bytes | None) -> tuple[str, int]:
    """The reply and count of a POST body, or BadRequest naming what is wrong."""
    try:
        data = json.loads(body or b"")
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nested too deep
        raise BadRequest('the body must be a JSON object: {"reply": "451 …", "count": 1}') from None
    if not isinstance(data, dict):
        raise BadRequest('the body must be a JSON object: {"reply": "451 …", "count": 1}')
    unknown = sorted(set(data) - _FIELDS)
    if unknown:
        raise BadRequest(f"unknown field {unknown[0]!r}: only reply and count")
    reply, count = data.get("reply"), data.get("count", 1)
    if not isinstance(reply, str) or not _REPLY.fullmatch(reply) or reply.endswith("\n"):
        raise BadRequest(
            "reply must be one line: a 4xx or 5xx code, then a space and at most "
            f"{MAX_TEXT} printable ASCII characters, e.g. \"451 4.3.0 Try again later\""
        )
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_COUNT:
        raise BadRequest(f"count must be a whole number from 1 to {MAX_COUNT}")
    return reply, count


def set_fault(conn: Connection, scope: str, reply: str, count: int) -> Fault:
    """The scope's next `count` deliveries get `reply` (replacing any fault it had)."""
    conn.execute(Q["set_fault"], {"scope": scope, "reply": reply, "count": count})
    return Fault(scope, reply, count)


def clear_faults(conn: Connection, scope: str) -> None:
    conn.execute(Q["clear_faults"], {"scope": scope})


def take_fault(conn: Connection, scope: str) -> str | None:
    """The reply for one delivery to `scope`, using it up; None when no fault is left."""
    row = conn.execute(Q["take_fault"], {"scope": scope}).fetchone()
    return str(row[0]) if row else None


def prune_faults(conn: Connection) -> None:
    """Drop used-up faults and those older than the inbox's retention."""
    conn.execute(Q["prune_faults"], {"retention_seconds": RETENTION_SECONDS})
