"""SPEC §4 "Codes": no sequence of requests tells the state of an address from its code tries.

Three addresses get the same requests in the same order: one with an
unconfirmed account, one with a confirmed account, one with no account.
After every request the three answers must be the same, byte for byte —
above all the answer to a wrong code, whose 400 `invalid_code` or 410
`code_exhausted` is what a prober reads. The sequences are generated: every
sequence of a few steps over an alphabet of what an outsider can do (wrong
codes for either purpose, signups by anyone, resends, reset requests,
within and over the email budget, and time passing a budget window or every
code's lifetime, with the worker's pruning). The budget is one email per
window here, so a few steps reach both sides of it; the pentest's own
sequence runs with the default limits.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from flask.testing import FlaskClient
from psycopg_pool import ConnectionPool

from authsvc import accounts, codes
from authsvc.clock import FrozenClock
from authsvc.config import load_settings
from authsvc.flask_app import create_app
from authsvc.passwords import Passwords
from authsvc.services import Services, build_services
from authsvc.tokens import TokenClaims
from tests.api_support import register_shop_app
from tests.link_support import latest_link

PASSWORDS = ("correct horse battery", "an outsiders own phrase")
NEW_PASSWORD = "a brand new passphrase"
STATES = ("unconfirmed", "confirmed", "unknown")
START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)  # the start of a budget window
Answer = tuple[int, bytes, tuple[tuple[str, str], ...]]


@dataclass
class Prober:
    """The API as an outsider with an app key calls it."""

    client: FlaskClient
    key: str
    conn: psycopg.Connection
    svc: Services
    clock: FrozenClock
    signups: int = 0

    def post(self, path: str, body: dict[str, str]) -> Answer:
        response = self.client.post(
            "/api/v1" + path, json=body, headers={"Authorization": f"Bearer {self.key}"}
        )
        return response.status_code, response.get_data(), tuple(sorted(response.headers.items()))

    def arrange(self, count: int) -> Iterator[dict[str, str]]:
        """`count` sets of fresh addresses in the three states, each set as it was at START.

        Each address has had one verify email in START's window (the accounts
        their signups, the unknown address an outsider's resend) and no tries.
        Arranged in one transaction: a commit per step would be most of the
        test's time.
        """
        self.clock.now = START
        sets = [{state: f"{state}{i}@example.com" for state in STATES} for i in range(count)]
        with self.conn.transaction():
            for emails in sets:
                for state in ("unconfirmed", "confirmed"):
                    accounts.sign_up(self.conn, self.svc, email=emails[state],
                                     password=PASSWORDS[0])
                token = latest_link(self.conn, self.svc, emails["confirmed"], "verify")
                accounts.confirm_verification(self.conn, self.svc, token=token)
                assert accounts.request_verification(self.conn, self.svc, email=emails["unknown"])
        for emails in sets:
            self.clock.now = START  # other sets' steps moved it; their addresses are not these
            yield emails

    def wrong_code(self, emails: dict[str, str]) -> str:
        """A code that no email queued for these addresses carries."""
        rows = self.conn.execute(
            "SELECT user_id, purpose, token_version, issued_at FROM email_jobs"
            " WHERE recipient = ANY(%s) AND purpose IS NOT NULL",
            (list(emails.values()),),
        ).fetchall()
        sent = {self.svc.tokens.mint_code(TokenClaims(*row)) for row in rows}
        return next(c for c in (f"{n:06d}" for n in range(10**6)) if c not in sent)


# What an outsider can do to one address; each returns the answers it got.
PerAddress = Callable[[Prober, str, str], list[Answer]]


def _guesses(path: str, count: int, extra: dict[str, str]) -> PerAddress:
    def guess(p: Prober, email: str, code: str) -> list[Answer]:
        return [p.post(path, {"email": email, "code": code, **extra}) for _ in range(count)]

    return guess


def _sign_up(p: Prober, email: str, _code: str) -> list[Answer]:
    # The owner and outsiders both sign up, with their own passwords.
    p.signups += 1
    return [p.post("/signups", {"email": email, "password": PASSWORDS[p.signups % 2]})]


def _request(path: str) -> PerAddress:
    return lambda p, email, _code: [p.post(path, {"email": email})]


GUESSES: dict[str, PerAddress] = {
    "wrong code": _guesses("/verifications/confirm", 1, {}),
    "4 wrong codes": _guesses("/verifications/confirm", 4, {}),
    "wrong reset code": _guesses("/password-resets/confirm", 1, {"password": NEW_PASSWORD}),
}
PER_ADDRESS: dict[str, PerAddress] = {
    **GUESSES,
    "signup": _sign_up,
    "resend": _request("/verifications"),
    "reset request": _request("/password-resets"),
}


def _window_passes(p: Prober) -> None:
    p.clock.advance(p.svc.settings.rate_limit_email.window_seconds)


def _codes_expire_and_are_pruned(p: Prober) -> None:
    # What the worker does every few minutes (worker/loop.py).
    keep = p.svc.tokens.longest_ttl()
    p.clock.now += keep + timedelta(seconds=1)
    codes.prune_code_attempts(p.conn, p.clock(), keep)


ONCE: dict[str, Callable[[Prober], None]] = {
    "a budget window passes": _window_passes,
    "every code expires and the worker prunes": _codes_expire_and_are_pruned,
}


def play(prober: Prober, emails: dict[str, str], sequence: tuple[str, ...]) -> None:
    """Apply `sequence` to the three addresses; their answers must never differ."""
    for step, action in enumerate(sequence):
        if action in ONCE:
            ONCE[action](prober)
            continue
        code = prober.wrong_code(emails)
        answers = {state: PER_ADDRESS[action](prober, email, code)
                   for state, email in emails.items()}
        if len(set(map(tuple, answers.values()))) != 1:
            seen = {state: [(a[0], json.loads(a[1]).get("code")) for a in got]
                    for state, got in answers.items()}
            pytest.fail(f"after {' → '.join(sequence[: step + 1])}: {seen}")


@pytest.fixture
def prober(env: dict[str, str], pool: ConnectionPool, clock: FrozenClock, passwords: Passwords,
           conn: psycopg.Connection) -> Callable[..., Prober]:
    def build(**limits: str) -> Prober:
        settings = load_settings(env, AUTHSVC_RATE_LIMIT_APP="1000000/1d",
                                 AUTHSVC_RATE_LIMIT_IP="1000000/1d", **limits)
        app = create_app(settings, pool=pool, clock=clock, passwords=passwords)
        _app, key = register_shop_app(conn)
        svc = build_services(settings, pool, clock=clock, passwords=passwords)
        return Prober(app.test_client(), key, conn, svc, clock)

    return build


def test_the_pentests_sequence_answers_alike(prober: Callable[..., Prober]) -> None:
    """Spend the verify budget, five wrong codes, a signup over the budget, one more code."""
    p = prober()
    sequence = ("a budget window passes", *["resend"] * 5, "4 wrong codes", "wrong code",
                "signup", "wrong code")
    for emails in p.arrange(1):
        play(p, emails, sequence)


def test_no_sequence_of_requests_tells_the_three_apart(prober: Callable[..., Prober]) -> None:
    """Every two steps from the alphabet, then every guess (so every prefix is checked too).

    One email per window: from the start, where each address has had its
    email, the budget is spent; a window later it allows one.
    """
    p = prober(AUTHSVC_RATE_LIMIT_EMAIL="1/15m")
    sequences = list(itertools.product([*PER_ADDRESS, *ONCE], repeat=2))
    sequences = [(*first, guess) for first in sequences for guess in GUESSES]
    for emails, sequence in zip(p.arrange(len(sequences)), sequences, strict=True):
        play(p, emails, sequence)
