"""The code_attempts table: how many tries an address has had at its current code.

Codes themselves are derived (authsvc.tokens) and never stored; this module
only counts tries, five per (purpose, address) until an email allowed by the
address's budget starts them afresh, and twenty wrong codes an hour per
address across purposes, which nothing starts afresh but the next hour; and
finds the email whose claims a typed code must match. Addresses are kept as
digests.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from psycopg import Connection

from authsvc import ratelimit
from authsvc.accounts.tokens import DUMMY_ISSUED_AT, TokenClaims
from authsvc.config import RateLimit
from authsvc.db.queries import load_queries
from authsvc.ratelimit import Decision, RateLimitHit

Q = load_queries(Path(__file__).with_suffix(".sql"))
MAX_ATTEMPTS = 5  # per (purpose, address), afresh with each email its budget allows
MAX_WRONG_PER_HOUR = 20  # per address, all purposes together (SPEC §4 "Codes")
# A fixed, aligned hour in rate_limit_counters, pruned with the other windows.
_HOUR = RateLimit(MAX_WRONG_PER_HOUR, 3600)
_HOUR_KIND = "wrong_codes"


@dataclass(frozen=True)
class CodeAttempt:
    """One counted try: the code it is judged against, if any, and whether tries remain."""

    purpose: str
    user_id: int | None
    version: int | None
    issued_at: datetime | None
    attempt: int | None  # None: the five tries, or the address's hour, were already used

    @property
    def exhausted(self) -> bool:
        return self.attempt is None

    @property
    def claims(self) -> TokenClaims | None:
        """The claims of the email that carried the current code, if there is one."""
        if self.user_id is None or self.version is None or self.issued_at is None:
            return None
        return TokenClaims(self.user_id, self.purpose, self.version, self.issued_at)

    def claims_or_dummy(self) -> TokenClaims:
        """The claims to check a code against: a stand-in when there is no code (same work)."""
        return self.claims or TokenClaims(0, self.purpose, 0, DUMMY_ISSUED_AT)


def address_digest(email: str) -> bytes:
    """How code_attempts names an address (never the address itself)."""
    return hashlib.sha256(f"code:{email}".encode()).digest()


def count_attempt(conn: Connection, email: str, purpose: str, now: datetime) -> CodeAttempt:
    """Take one try at `email`'s current `purpose` code; committed with the caller's work.

    The try is one of the address's wrong codes this hour until the code
    proves right (forgive_right_code); with the hour's used up it takes none
    of the code's five.
    """
    params = {
        **ratelimit.hit_for(_HOUR_KIND, email, _HOUR, now).params(),
        "email": email,
        "purpose": purpose,
        "digest": address_digest(email),
        "now": now,
        "max_attempts": MAX_ATTEMPTS,
    }
    row = conn.execute(Q["count_code_attempt"], params).fetchone()
    assert row is not None  # the statement returns one row for any address
    user_id, version, issued_at, attempt = row
    return CodeAttempt(purpose, user_id, version, issued_at, attempt)


def give_back_attempt(conn: Connection, email: str, attempt: CodeAttempt) -> None:
    """Return a try that found the right code but failed for another reason."""
    params = {"purpose": attempt.purpose, "digest": address_digest(email)}
    conn.execute(Q["give_back_code_attempt"], params)


def forgive_right_code(conn: Connection, email: str, now: datetime) -> None:
    """Take back the hour's count of a try whose code was right: the hour counts wrong codes.

    `now` is count_attempt's, so the try leaves the hour it was counted in.
    """
    ratelimit.refund(conn, _HOUR_KIND, email, _HOUR, now)


def count_email(conn: Connection, budget: RateLimitHit, email: str, purpose: str) -> Decision:
    """Count an email to `email` against `budget`; within it, its code tries start afresh.

    Tries start afresh nowhere else (SQL email_budget_hit(), which link
    requests call too): known or unknown, confirmed or not, an address
    gets five fresh tries exactly when an email to it is allowed.
    """
    params = {**budget.params(), "purpose": purpose, "digest": address_digest(email)}
    row = conn.execute(Q["email_budget_hit"], params).fetchone()
    assert row is not None  # the function returns one row
    return budget.decision(bool(row[0]))


def prune_code_attempts(conn: Connection, now: datetime, keep: timedelta) -> int:
    """Drop counts older than `keep` (the longest link lifetime): their codes expired.

    Every email that carries a code is allowed by the budget, which drops the
    address's count, so a count is younger than the address's current code:
    one older than every lifetime belongs to a code that can no longer
    redeem (or to an address that has none, for which it guards nothing).
    """
    return conn.execute(Q["prune_code_attempts"], {"before": now - keep}).rowcount
