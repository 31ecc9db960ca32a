"""Stateful property test of the SPEC §4 token guarantees on the account layer.

Hypothesis drives random interleavings of sign-ups, verification and reset
requests, deliveries of any queued email in any order (late, reordered,
repeated), redemptions of any link ever delivered (at either endpoint),
link previews (GET), password changes, key rotations and clock jumps. A
plain-Python model predicts every outcome; the real database must agree.

Profiles: `ci` (default, 500 examples) and `long` (5,000), chosen with
AUTHSVC_HYPOTHESIS_PROFILE=long.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import psycopg
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)

from authsvc import accounts
from authsvc.clock import FrozenClock
from authsvc.services import Services
from authsvc.tokens import TokenClaims, TokenCodec, TokenError
from tests.conftest import TEST_KEY

_COMMON = dict(
    deadline=None,
    database=None,  # nothing written into the checkout; failures print their example
    stateful_step_count=25,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile("ci", max_examples=500, **_COMMON)
settings.register_profile("long", max_examples=5000, **_COMMON)
settings.register_profile("quick", max_examples=50, **_COMMON)

EMAILS = ("ann@example.com", "bob@example.com", "cy@example.com")
PASSWORDS = ("correct horse battery", "purple monkey dishwasher", "tangerine sky lantern 9")
# Half a second past a whole second, so truncating issued_at is exercised at every expiry edge.
START = datetime(2026, 3, 1, 12, 0, 0, 500_000, tzinfo=UTC)
MAX_KEYS = 2  # a rotation keeps at most this many keys; older ones are retired
# Children before parents. DELETE, not TRUNCATE: on these tiny tables it
# takes under 1 ms against ~50 ms, which is most of the budget for 500 examples.
TABLES = (
    "token_redemptions", "email_job_events", "email_jobs", "idempotency_keys",
    "inbox_messages", "apps", "rate_limit_counters", "users",
)


@dataclass
class ModelUser:
    id: int
    password: str
    verified: bool = False
    versions: dict[str, int] = field(default_factory=lambda: {"reset": 0, "verify": 0})
    session_version: int = 0
    redeemed: set[tuple[str, int]] = field(default_factory=set)


@dataclass(frozen=True)
class QueuedLink:
    """An outbox row that carries a link (what the worker would mint from)."""

    job_id: int
    email: str
    claims: TokenClaims


@dataclass(frozen=True)
class DeliveredLink:
    token: str
    email: str
    claims: TokenClaims
    signing_key: str


def _codec(keys: list[str], svc: Services, clock: FrozenClock) -> TokenCodec:
    ttl = {"reset": svc.settings.reset_ttl, "verify": svc.settings.verify_ttl}
    return TokenCodec(keys, ttl, clock)


def _profile() -> settings:
    return settings.get_profile(os.environ.get("AUTHSVC_HYPOTHESIS_PROFILE", "ci"))


def test_only_the_newest_link_redeems_once(
    conn: psycopg.Connection, svc: Services, clock: FrozenClock
) -> None:
    email_limit = svc.settings.rate_limit_email

    class AccountMachine(RuleBasedStateMachine):
        queued = Bundle("queued")
        delivered = Bundle("delivered")

        def __init__(self) -> None:
            super().__init__()
            with conn.transaction():
                for table in TABLES:
                    conn.execute(f"DELETE FROM {table}")
            clock.now = START
            self.keys = [TEST_KEY]
            self.rotations = 0
            self.svc = svc
            self.users: dict[str, ModelUser] = {}
            self.hits: dict[tuple[str, int], int] = {}
            self.jobs: dict[str, int] = {}
            self.redemptions = 0

        # --- model helpers -------------------------------------------------

        def _allowed(self, email: str) -> bool:
            epoch = int(clock.now.timestamp())
            window = epoch - epoch % email_limit.window_seconds
            self.hits[(email, window)] = self.hits.get((email, window), 0) + 1
            return self.hits[(email, window)] <= email_limit.limit

        def _queue(self, template: str) -> None:
            self.jobs[template] = self.jobs.get(template, 0) + 1

        def _issue(self, email: str, purpose: str) -> QueuedLink:
            user = self.users[email]
            user.versions[purpose] += 1
            self._queue(purpose)
            row = conn.execute(
                "SELECT id, user_id, token_version, issued_at FROM email_jobs"
                " WHERE recipient = %s AND purpose = %s ORDER BY id DESC LIMIT 1",
                (email, purpose),
            ).fetchone()
            assert row is not None, f"no {purpose} email queued for {email}"
            claims = TokenClaims(row[1], purpose, row[2], row[3])
            issued_at = clock.now.replace(microsecond=0)
            assert claims == TokenClaims(user.id, purpose, user.versions[purpose], issued_at)
            return QueuedLink(row[0], email, claims)

        def _expected(self, link: DeliveredLink, endpoint: str) -> str:
            """What redeeming `link` at `endpoint` must answer now."""
            if link.signing_key not in self.keys or link.claims.purpose != endpoint:
                return "invalid_token"
            ttl = self.svc.tokens.ttl(endpoint)
            if clock.now >= link.claims.issued_at + timedelta(seconds=ttl):
                return "token_expired"
            user = self.users[link.email]
            if link.claims.version == user.versions[endpoint]:
                return "ok"
            assert link.claims.version < user.versions[endpoint]
            used = (endpoint, link.claims.version) in user.redeemed
            return "token_used" if used else "token_superseded"

        # --- requests ------------------------------------------------------

        @rule(target=queued, email=st.sampled_from(EMAILS), password=st.sampled_from(PASSWORDS))
        def sign_up(self, email: str, password: str):
            accounts.sign_up(conn, self.svc, email=email, password=password)
            if email not in self.users:
                # Ids are not predictable (a conflicting insert still uses one up).
                row = conn.execute("SELECT id FROM users WHERE email = %s", (email,)).fetchone()
                assert row is not None, "sign-up created no account"
                self.users[email] = ModelUser(id=row[0], password=password)
            elif not self.users[email].verified:
                # Nobody proved the address yet: the newest signup's password
                # wins and earlier sessions end (pre-account hijacking).
                self.users[email].password = password
                self.users[email].session_version += 1
            if not self._allowed(email):
                return multiple()
            if self.users[email].verified:
                self._queue("account_exists")
                return multiple()
            return self._issue(email, "verify")

        @rule(target=queued, email=st.sampled_from(EMAILS))
        def request_verification(self, email: str):
            accounts.request_verification(conn, self.svc, email=email)
            user = self.users.get(email)
            if self._allowed(email) and user is not None and not user.verified:
                return self._issue(email, "verify")
            return multiple()

        @rule(target=queued, email=st.sampled_from(EMAILS))
        def request_password_reset(self, email: str):
            accounts.request_password_reset(conn, self.svc, email=email)
            if self._allowed(email) and email in self.users:
                return self._issue(email, "reset")
            return multiple()

        # --- the worker and the mail system ----------------------------------

        @rule(target=delivered, job=queued)
        def deliver(self, job: QueuedLink):
            """Send any queued link, any number of times, in any order."""
            token = self.svc.tokens.mint(job.claims)
            return DeliveredLink(token, job.email, job.claims, self.keys[0])

        # --- the person holding a link -------------------------------------

        @rule(link=delivered, same_endpoint=st.booleans(), password=st.sampled_from(PASSWORDS))
        def redeem(self, link: DeliveredLink, same_endpoint: bool, password: str):
            other = {"reset": "verify", "verify": "reset"}[link.claims.purpose]
            endpoint = link.claims.purpose if same_endpoint else other
            expected = self._expected(link, endpoint)
            user = self.users[link.email]
            hash_before = self._password_hash(user.id)
            try:
                if endpoint == "reset":
                    accounts.reset_password(conn, self.svc, token=link.token, password=password)
                else:
                    accounts.confirm_verification(conn, self.svc, token=link.token)
                outcome = "ok"
            except TokenError as exc:
                outcome = exc.code
            assert outcome == expected, f"{endpoint} {link.claims}: {outcome}, not {expected}"
            if outcome != "ok":
                assert self._password_hash(user.id) == hash_before, "refused link changed password"
                return
            self.redemptions += 1
            user.redeemed.add((endpoint, link.claims.version))
            user.versions[endpoint] += 1
            if endpoint == "verify" and not user.verified:
                user.session_version += 1  # sessions from before the proof end
            user.verified = True
            if endpoint == "reset":
                user.password = password
                user.session_version += 1
                self._queue("password_changed")

        @rule(link=delivered, same_endpoint=st.booleans())
        def preview(self, link: DeliveredLink, same_endpoint: bool):
            """Opening a link (GET) tells its fate and never consumes it."""
            other = {"reset": "verify", "verify": "reset"}[link.claims.purpose]
            endpoint = link.claims.purpose if same_endpoint else other
            expected = self._expected(link, endpoint)
            try:
                accounts.check_link(conn, self.svc, link.token, endpoint)
                outcome = "ok"
            except TokenError as exc:
                outcome = exc.code
            assert outcome == expected

        @precondition(lambda self: self.users)
        @rule(data=st.data(), new=st.sampled_from(PASSWORDS), knows_current=st.booleans(),
              fresh_session=st.booleans())
        def change_password(self, data, new: str, knows_current: bool, fresh_session: bool):
            email = data.draw(st.sampled_from(sorted(self.users)))
            user = self.users[email]
            session = user.session_version if fresh_session else user.session_version - 1
            current = user.password if knows_current else "not the password at all"
            try:
                accounts.change_password(
                    conn, self.svc, user_id=user.id, session_version=session,
                    current=current, new=new,
                )
                outcome = "ok"
            except accounts.SessionEnded:
                outcome = "session_ended"
            except accounts.InvalidCredentials:
                outcome = "invalid_credentials"
            expected = "ok" if knows_current else "invalid_credentials"
            if not fresh_session:
                expected = "session_ended"
            assert outcome == expected
            if outcome == "ok":
                user.password = new
                user.versions["reset"] += 1  # every outstanding reset link is retired
                user.session_version += 1
                self._queue("password_changed")

        # --- operators and time -----------------------------------------------

        @rule(keep=st.integers(min_value=1, max_value=MAX_KEYS))
        def rotate_keys(self, keep: int):
            """A new signing key; `keep` - 1 older keys still verify, the rest are retired."""
            self.rotations += 1
            new_key = f"rotated-key-{self.rotations:04d}-".ljust(40, "x")
            self.keys = [new_key, *self.keys][:keep]
            self.svc = dataclasses.replace(self.svc, tokens=_codec(self.keys, svc, clock))

        @rule(seconds=st.sampled_from([1, 299, 899, 1799, 1800, 3600, 86399, 86400]))
        def advance_clock(self, seconds: int):
            clock.advance(seconds)

        # --- what must always hold ----------------------------------------------

        def _password_hash(self, user_id: int) -> str:
            query = "SELECT password_hash FROM users WHERE id = %s"
            row = conn.execute(query, (user_id,)).fetchone()
            assert row is not None
            return str(row[0])

        @invariant()
        def database_matches_model(self):
            rows = conn.execute(
                "SELECT email, id, reset_version, verify_version, session_version,"
                " email_verified_at IS NOT NULL, password_hash FROM users ORDER BY id"
            ).fetchall()
            assert [r[0] for r in rows] == sorted(self.users, key=lambda e: self.users[e].id)
            for email, user_id, reset, verify, session, verified, password_hash in rows:
                user = self.users[email]
                assert (user_id, reset, verify, session, verified) == (
                    user.id, user.versions["reset"], user.versions["verify"],
                    user.session_version, user.verified,
                )
                assert self.svc.passwords.verify(password_hash, user.password)

        @invariant()
        def each_version_redeemed_at_most_once(self):
            rows = conn.execute(
                "SELECT count(*), count(DISTINCT (user_id, purpose, version))"
                " FROM token_redemptions"
            ).fetchone()
            assert rows == (self.redemptions, self.redemptions)

        @invariant()
        def outbox_matches_model(self):
            query = "SELECT template, count(*) FROM email_jobs GROUP BY template"
            counts = dict(conn.execute(query))
            assert counts == self.jobs

    run_state_machine_as_test(AccountMachine, settings=_profile())

