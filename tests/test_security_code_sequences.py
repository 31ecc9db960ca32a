"""SPEC §4 "Codes": no sequence of requests tells the state of an address from its code tries.

Three addresses get the same requests in the same order: one with an
unconfirmed account, one with a confirmed account, one with no account.
After every request the three answers must be the same, byte for byte —
above all the answer to a wrong code, whose 400 `invalid_code` or 410
`code_exhausted` is what a prober reads. The sequences are generated over
an alphabet of what an outsider can do (wrong codes for either purpose, up
to the address's hourly cap, signups by anyone, resends, reset requests,
within and over the email budget, and time passing a budget window or every
code's lifetime, with the worker's pruning). The budget is one email per
window here, so a few steps reach both sides of it; the pentest's own
sequence and the hourly cap's run with the default limits.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from flask.testing import FlaskClient
from psycopg_pool import ConnectionPool

from authsvc import ratelimit
from authsvc.accounts import actions, code_tries
from authsvc.accounts.passwords import Passwords
from authsvc.accounts.tokens import TokenClaims
from authsvc.clock import FrozenClock
from authsvc.config import load_settings
from authsvc.services import Services, build_services
from authsvc.web.app import create_app
from tests.api_support import register_shop_app
from tests.conftest import FUZZ_MODE
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
                    actions.sign_up(self.conn, self.svc, email=emails[state],
                                     password=PASSWORDS[0])
                token = latest_link(self.conn, self.svc, emails["confirmed"], "verify")
                actions.confirm_verification(self.conn, self.svc, token=token)
                assert actions.request_verification(self.conn, self.svc, email=emails["unknown"])
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


RESET_GUESS = {"password": NEW_PASSWORD}
GUESSES: dict[str, PerAddress] = {
    "wrong code": _guesses("/verifications/confirm", 1, {}),
    "4 wrong codes": _guesses("/verifications/confirm", 4, {}),
    "wrong reset code": _guesses("/password-resets/confirm", 1, RESET_GUESS),
    "4 wrong reset codes": _guesses("/password-resets/confirm", 4, RESET_GUESS),
    # All but one of the address's wrong codes this hour, in all purposes.
    "19 wrong reset codes": _guesses("/password-resets/confirm", 19, RESET_GUESS),
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
    # What the worker does every few minutes (authsvc/worker/loop.py).
    keep = p.svc.tokens.longest_code_ttl()
    p.clock.now += keep + timedelta(seconds=1)
    code_tries.prune_code_attempts(p.conn, p.clock(), keep)
    ratelimit.prune_rate_limits(p.conn, p.clock())


def _an_hour_passes(p: Prober) -> None:
    p.clock.advance(3600)


ONCE: dict[str, Callable[[Prober], None]] = {
    "a budget window passes": _window_passes,
    "every code expires and the worker prunes": _codes_expire_and_are_pruned,
    "an hour passes": _an_hour_passes,
}


def play(prober: Prober, emails: dict[str, str], sequence: tuple[str, ...]) -> list[Answer]:
    """Apply `sequence` to the three addresses; their answers must never differ.

    Returns the answers (the same for all three) of the last step that made requests.
    """
    last: list[Answer] = []
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
        last = answers["unknown"]
    return last


def _problem(answer: Answer) -> tuple[int, str]:
    return answer[0], json.loads(answer[1])["code"]


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


def test_twenty_wrong_codes_an_hour_exhaust_every_code_of_the_address(
    prober: Callable[..., Prober],
) -> None:
    """Five wrong codes and a new email, four times: the next code answers 410, then the hour ends.

    Fresh tries per purpose come with every allowed email; the address's
    twenty an hour, across purposes, do not. The three answer alike throughout.
    """
    p = prober()
    round_of_five = ("4 wrong codes", "wrong code", "resend")
    for emails in p.arrange(1):
        play(p, emails, round_of_five * 4)
        assert [_problem(a) for a in play(p, emails, ("wrong code",))] == [(410, "code_exhausted")]
        # The other purpose too, even with a reset email just allowed.
        last = play(p, emails, ("reset request", "wrong reset code"))
        assert [_problem(a) for a in last] == [(410, "code_exhausted")]
        # The next hour starts afresh; the verify tries of the last email are intact.
        last = play(p, emails, ("an hour passes", "4 wrong codes", "wrong code"))
        assert [_problem(a) for a in last] == [(400, "invalid_code")]
        assert [_problem(a) for a in play(p, emails, ("wrong code",))] == [(410, "code_exhausted")]


def test_the_hourly_cap_spans_purposes(prober: Callable[..., Prober]) -> None:
    """Ten wrong verify codes and ten wrong reset codes, each purpose within its five."""
    p = prober()
    verify_round = ("4 wrong codes", "wrong code", "resend")
    reset_round = ("4 wrong reset codes", "wrong reset code", "reset request")
    for emails in p.arrange(1):
        play(p, emails, (*verify_round, *reset_round) * 2)
        for guess in ("wrong code", "wrong reset code"):
            assert [_problem(a) for a in play(p, emails, (guess,))] == [(410, "code_exhausted")]


# The generated sequences' steps: everything an outsider can do but the hour
# passing (every code's lifetime, which is here, is longer) and the hour's
# wrong codes, which start sequences of their own (57 requests each).
HOURS_WRONG_CODES = "19 wrong reset codes"
ALPHABET = [*(a for a in PER_ADDRESS if a != HOURS_WRONG_CODES),
            *(once for once in ONCE if once != "an hour passes")]
LAST = ("wrong code", "wrong reset code")
SAMPLED_TRIPLES = 8
# The inner loop (`make test-fast`) plays each step once instead of every pair: 29
# sequences of the 187.
QUICK = FUZZ_MODE == "quick"


def _generated() -> list[tuple[str, ...]]:
    """The sequences the test plays, in a fixed order.

    Every two steps of the alphabet, then each single guess, and a fixed
    sample of three steps, then each guess (on the quick mode instead: each
    step, and the one pair the test's assertions name, then each guess); and
    the hour's wrong codes, then every step, then a wrong verify code (the
    code they left tries to, so its answer is the hour's to give).
    """
    firsts: list[tuple[str, ...]]
    if QUICK:  # each step once, and the pair the test's assertions name
        firsts = [(step,) for step in ALPHABET] + [("4 wrong reset codes", "wrong reset code")]
    else:
        pairs = list(itertools.product(ALPHABET, repeat=2))
        firsts = pairs + random.Random(20260302).sample(
            list(itertools.product(ALPHABET, repeat=3)), SAMPLED_TRIPLES)
    return [*((*first, guess) for first in firsts for guess in LAST),
            *((HOURS_WRONG_CODES, step, "wrong code") for step in ALPHABET)]


def test_no_sequence_of_requests_tells_the_three_apart(prober: Callable[..., Prober]) -> None:
    """The generated sequences, every prefix checked (play compares after every request).

    One email per window: from the start, where each address has had its
    email, the budget is spent; a window later it allows one. The test also
    checks that both caps were reached: a reset code's five tries, and the
    address's twenty wrong codes an hour while its verify code had tries left.
    """
    p = prober(AUTHSVC_RATE_LIMIT_EMAIL="1/15m")
    sequences = _generated()
    last: dict[tuple[str, ...], tuple[int, str]] = {}
    for emails, sequence in zip(p.arrange(len(sequences)), sequences, strict=True):
        last[sequence] = _problem(play(p, emails, sequence)[-1])
    exhausted = (410, "code_exhausted")
    assert last["4 wrong reset codes", "wrong reset code", "wrong reset code"] == exhausted
    assert last[HOURS_WRONG_CODES, "wrong code", "wrong code"] == exhausted
    assert last[HOURS_WRONG_CODES, "every code expires and the worker prunes",
                "wrong code"] == (400, "invalid_code")
