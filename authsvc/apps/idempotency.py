"""Idempotency-Key records: a request's outcome stored with its effects.

The caller opens one transaction, takes the key's lock, looks for an earlier
outcome, and otherwise runs the use case and saves the outcome before commit.
Because the record and the effects commit together, a crash leaves either
both or neither, so a retry either replays or runs afresh — never twice.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from uuid import UUID

from psycopg import Connection
from psycopg.rows import class_row

from authsvc.db.queries import load_queries

Q = load_queries(Path(__file__).with_suffix(".sql"))
KEY_LIFETIME = timedelta(hours=24)
MAX_KEY_LENGTH = 255


class InvalidIdempotencyKey(ValueError):
    pass


class KeyCollision(Exception):
    """A live record exists although this transaction held the key's lock."""


@dataclass(frozen=True)
class StoredOutcome:
    fingerprint: bytes
    status_code: int
    response_body: bytes
    created_at: datetime


def check_key(value: str) -> str:
    """The key if it is 1-255 printable ASCII characters; InvalidIdempotencyKey otherwise."""
    if not 1 <= len(value) <= MAX_KEY_LENGTH:
        raise InvalidIdempotencyKey(f"must be 1-{MAX_KEY_LENGTH} characters long")
    if not all(" " <= ch <= "~" for ch in value):
        raise InvalidIdempotencyKey("must be printable ASCII (no control or non-ASCII characters)")
    return value


def fingerprint(secret: str, method: str, path: str, body: object) -> bytes:
    """HMAC of method, path and canonical JSON body.

    Keyed (by the caller's API key) because bodies carry passwords: a plain
    hash at rest would be a fast password hash an attacker could brute-force.
    """
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    message = "\n".join((method.upper(), path, canonical)).encode("ascii")
    return hmac.new(secret.encode("utf-8", "surrogatepass"), message, hashlib.sha256).digest()


def try_lock_key(conn: Connection, app_id: UUID, key: str) -> bool:
    """Hold (app, key) for the rest of the caller's transaction; False if taken."""
    row = conn.execute(Q["try_lock_key"], {"lock_name": f"idempotency:{app_id}:{key}"}).fetchone()
    return bool(row and row[0])


def find_idempotency_record(
    conn: Connection, app_id: UUID, key: str, now: datetime
) -> StoredOutcome | None:
    """The outcome stored under this key within its lifetime, if any."""
    params = {"app_id": app_id, "key": key, "not_before": now - KEY_LIFETIME}
    with conn.cursor(row_factory=class_row(StoredOutcome)) as cur:
        return cur.execute(Q["find_idempotency_record"], params).fetchone()


def save_idempotency_record(
    conn: Connection,
    app_id: UUID,
    key: str,
    *,
    fingerprint: bytes,
    status_code: int,
    response_body: bytes,
    now: datetime,
) -> None:
    """Store the outcome in the caller's transaction; KeyCollision if a live one exists."""
    params = {
        "app_id": app_id,
        "key": key,
        "fingerprint": fingerprint,
        "status_code": status_code,
        "response_body": response_body,
        "now": now,
        "not_before": now - KEY_LIFETIME,
    }
    if conn.execute(Q["save_idempotency_record"], params).fetchone() is None:
        raise KeyCollision(key)


def prune_idempotency_keys(conn: Connection, now: datetime, keep: timedelta = KEY_LIFETIME) -> int:
    """Delete records older than `keep` (default: their 24 h lifetime); returns how many."""
    return conn.execute(Q["prune_idempotency_keys"], {"before": now - keep}).rowcount
