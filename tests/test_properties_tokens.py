"""Stateful property test of the SPEC §4 token guarantees on the account layer.

Hypothesis drives random interleavings of sign-ups, verification and reset
requests, deliveries of any queued email in any order (late, reordered,
repeated), redemptions of any link ever delivered (at either endpoint, with
or without choosing a password), link previews (GET), logins, password
changes from a session, key rotations and clock jumps. A plain-Python model
predicts every outcome; the real database must agree.

Profiles: `ci` (default, 500 examples) and `long` (5,000), chosen with
AUTHSVC_HYPOTHESIS_PROFILE=long.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

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

from authsvc.accounts import actions, links
from authsvc.accounts.sessions import SESSION_LIFETIME
from authsvc.accounts.tokens import TokenClaims, TokenCodec, TokenError
from authsvc.clock import FrozenClock
from authsvc.services import Services
from tests.accounts_support import forget_everyone
from tests.conftest import TEST_KEY
from tests.link_support import latest_job

_COMMON: dict[str, Any] = dict(
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


@dataclass
class ModelUser:
    id: int
    password: str
    verified: bool = False
    versions: dict[str, int] = field(default_factory=lambda: {"reset": 0, "verify": 1})
    signups: int = 1
    redeemed: set[tuple[str, int]] = field(default_factory=set)


@dataclass(frozen=True)
class QueuedLink:
    """An outbox row that carries a link (what the worker would mint from)."""

    job_id: int
    email: str
    claims: TokenClaims


@dataclass(frozen=True)
class OpenSession:
    email: str
    token: str
    started: datetime


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
    login_limit = svc.settings.rate_limit_login

    class AccountMachine(RuleBasedStateMachine):
        queued = Bundle("queued")
        delivered = Bundle("delivered")
        sessions = Bundle("sessions")

        def __init__(self) -> None:
            super().__init__()
            forget_everyone(conn)
            clock.now = START
            self.keys = [TEST_KEY]
            self.rotations = 0
            self.svc = svc
            self.users: dict[str, ModelUser] = {}
            self.hits: dict[tuple[str, str, int], int] = {}
            self.login_hits: dict[tuple[str, int], int] = {}
            self.ended: set[str] = set()  # session tokens ended by logout or a password change
            self.jobs: dict[str, int] = {}
            self.redemptions = 0
            self.open_sessions: dict[str, str] = {}  # token -> email

        # --- model helpers -------------------------------------------------

        def _allowed(self, email: str, purpose: str) -> bool:
            """One email budget per address and purpose."""
            epoch = int(clock.now.timestamp())
            window = epoch - epoch % email_limit.window_seconds
            key = (email, purpose, window)
            self.hits[key] = self.hits.get(key, 0) + 1
            return self.hits[key] <= email_limit.limit

        def _login_window(self, email: str) -> tuple[str, int]:
            epoch = int(clock.now.timestamp())
            return (email, epoch - epoch % login_limit.window_seconds)

        def _login_counted(self, email: str) -> bool:
            """Count one password attempt; False when it is over the limit."""
            key = self._login_window(email)
            self.login_hits[key] = self.login_hits.get(key, 0) + 1
            return self.login_hits[key] <= login_limit.limit

        def _login_refund(self, email: str) -> None:
            key = self._login_window(email)
            self.login_hits[key] = max(0, self.login_hits.get(key, 0) - 1)

        def _proven(self, email: str) -> None:
            """A redeemed link: sessions end, failed logins are forgiven."""
            self.login_hits = {k: v for k, v in self.login_hits.items() if k[0] != email}
            self.ended |= {t for t, e in self.open_sessions.items() if e == email}

        def _queue(self, template: str) -> None:
            self.jobs[template] = self.jobs.get(template, 0) + 1

        def _issue(self, email: str, purpose: str, bump: bool = True) -> QueuedLink:
            user = self.users[email]
            if bump:
                user.versions[purpose] += 1
            self._queue(purpose)
            job_id, claims = latest_job(conn, email, purpose)
            issued_at = clock.now.replace(microsecond=0)
            assert claims == TokenClaims(user.id, purpose, user.versions[purpose], issued_at)
            return QueuedLink(job_id, email, claims)

        def _expected(self, link: DeliveredLink, endpoint: str, with_password: bool = True) -> str:
            """What redeeming `link` at `endpoint` must answer now."""
            if link.signing_key not in self.keys or link.claims.purpose != endpoint:
                return "invalid_token"
            ttl = self.svc.tokens.ttl(endpoint)
            if clock.now >= link.claims.issued_at + timedelta(seconds=ttl):
                return "token_expired"
            user = self.users[link.email]
            if link.claims.version == user.versions[endpoint]:
                contested = not user.verified and user.signups > 1
                if endpoint == "verify" and contested and not with_password:
                    return "password_required"
                return "ok"
            assert link.claims.version < user.versions[endpoint]
            used = (endpoint, link.claims.version) in user.redeemed
            return "token_used" if used else "token_superseded"

        # --- requests ------------------------------------------------------

        @rule(target=queued, email=st.sampled_from(EMAILS), password=st.sampled_from(PASSWORDS))
        def sign_up(self, email: str, password: str):
            actions.sign_up(conn, self.svc, email=email, password=password)
            if email not in self.users:
                # Ids are not predictable (a conflicting insert still uses one up).
                row = conn.execute("SELECT id FROM users WHERE email = %s", (email,)).fetchone()
                assert row is not None, "sign-up created no account"
                self.users[email] = ModelUser(id=row[0], password=password)
            elif not self.users[email].verified:
                # Nobody proved the address yet: the newest password is kept
                # (unusable until a proof), the signup counts, and every
                # earlier verify link retires, emailed or not.
                user = self.users[email]
                user.password = password
                user.signups += 1
                user.versions["verify"] += 1
            if not self._allowed(email, "verify"):
                return multiple()
            if self.users[email].verified:
                self._queue("account_exists")
                return multiple()
            return self._issue(email, "verify", bump=False)

        @rule(target=queued, email=st.sampled_from(EMAILS))
        def request_verification(self, email: str):
            actions.request_verification(conn, self.svc, email=email)
            user = self.users.get(email)
            if self._allowed(email, "verify") and user is not None and not user.verified:
                user.signups = max(user.signups, 2)  # a resend's confirmer chooses the password
                return self._issue(email, "verify")
            return multiple()

        @rule(target=queued, email=st.sampled_from(EMAILS))
        def request_password_reset(self, email: str):
            actions.request_password_reset(conn, self.svc, email=email)
            if self._allowed(email, "reset") and email in self.users:
                return self._issue(email, "reset")
            return multiple()

        # --- the worker and the mail system ----------------------------------

        @rule(target=delivered, job=queued)
        def deliver(self, job: QueuedLink):
            """Send any queued link, any number of times, in any order."""
            token = self.svc.tokens.mint(job.claims)
            return DeliveredLink(token, job.email, job.claims, self.keys[0])

        # --- the person holding a link -------------------------------------

        @rule(link=delivered, same_endpoint=st.booleans(), password=st.sampled_from(PASSWORDS),
              with_password=st.booleans())
        def redeem(self, link: DeliveredLink, same_endpoint: bool, password: str,
                   with_password: bool):
            other = {"reset": "verify", "verify": "reset"}[link.claims.purpose]
            endpoint = link.claims.purpose if same_endpoint else other
            expected = self._expected(link, endpoint, with_password or endpoint == "reset")
            user = self.users[link.email]
            hash_before = self._password_hash(user.id)
            try:
                if endpoint == "reset":
                    actions.reset_password(conn, self.svc, token=link.token, password=password)
                else:
                    chosen = password if with_password else None
                    actions.confirm_verification(
                        conn, self.svc, token=link.token, password=chosen
                    )
                outcome = "ok"
            except TokenError as exc:
                outcome = exc.code
            except actions.PasswordRequired:
                outcome = "password_required"
            assert outcome == expected, f"{endpoint} {link.claims}: {outcome}, not {expected}"
            if outcome != "ok":
                assert self._password_hash(user.id) == hash_before, "refused link changed password"
                return
            self.redemptions += 1
            user.redeemed.add((endpoint, link.claims.version))
            user.versions[endpoint] += 1
            user.verified = True
            self._proven(link.email)
            if endpoint == "reset" or with_password:
                user.password = password
            if endpoint == "reset":
                user.versions["verify"] += 1  # no older verify link may set a password now
                self._queue("password_changed")

        @rule(link=delivered, same_endpoint=st.booleans())
        def preview(self, link: DeliveredLink, same_endpoint: bool):
            """Opening a link (GET) tells its fate and never consumes it."""
            other = {"reset": "verify", "verify": "reset"}[link.claims.purpose]
            endpoint = link.claims.purpose if same_endpoint else other
            expected = self._expected(link, endpoint)
            try:
                links.check_link(conn, self.svc, link.token, endpoint)
                outcome = "ok"
            except TokenError as exc:
                outcome = exc.code
            assert outcome == expected

        @precondition(lambda self: self.users)
        @rule(target=sessions, data=st.data(), knows_password=st.booleans())
        def log_in(self, data, knows_password: bool):
            email = data.draw(st.sampled_from(sorted(self.users)))
            user = self.users[email]
            password = user.password if knows_password else "not the password at all"
            try:
                found = actions.authenticate(conn, self.svc, email=email, password=password)
                outcome = "ok"
            except actions.InvalidCredentials:
                outcome = "invalid_credentials"
            except actions.TooManyAttempts:
                outcome = "too_many"
            if not self._login_counted(email):
                expected = "too_many"
            elif knows_password and user.verified:
                expected = "ok"
                self._login_refund(email)
            else:
                expected = "invalid_credentials"  # an unproven address looks the same
            assert outcome == expected
            if outcome != "ok":
                return multiple()
            token = actions.start_session(conn, self.svc, user=found, user_agent="model")
            self.open_sessions[token] = email
            return OpenSession(email, token, clock.now)

        def _session_alive(self, session: OpenSession) -> bool:
            fresh = clock.now - session.started < SESSION_LIFETIME
            return fresh and session.token not in self.ended

        @rule(session=sessions, new=st.sampled_from(PASSWORDS), knows_current=st.booleans())
        def change_password(self, session: OpenSession, new: str, knows_current: bool):
            found = actions.current_session(conn, self.svc, session.token)
            assert (found is not None) == self._session_alive(session)
            if found is None:
                return
            user = self.users[session.email]
            current = user.password if knows_current else "not the password at all"
            try:
                actions.change_password(conn, self.svc, session=found, current=current, new=new)
                outcome = "ok"
            except actions.InvalidCredentials:
                outcome = "invalid_credentials"
            except actions.TooManyAttempts:
                outcome = "too_many"
            if not self._login_counted(session.email):
                expected = "too_many"
            elif knows_current:
                expected = "ok"
                self._login_refund(session.email)
            else:
                expected = "invalid_credentials"
            assert outcome == expected
            if outcome == "ok":
                user.password = new
                user.versions["reset"] += 1  # every outstanding link is retired
                user.versions["verify"] += 1
                self.ended |= {t for t, e in self.open_sessions.items() if e == session.email}
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
                "SELECT email, id, reset_version, verify_version, signup_count,"
                " email_verified_at IS NOT NULL, password_hash FROM users ORDER BY id"
            ).fetchall()
            assert [r[0] for r in rows] == sorted(self.users, key=lambda e: self.users[e].id)
            for email, user_id, reset, verify, signups, verified, password_hash in rows:
                user = self.users[email]
                assert (user_id, reset, verify, signups, verified) == (
                    user.id, user.versions["reset"], user.versions["verify"],
                    user.signups, user.verified,
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
            counts: dict[str, int] = dict(conn.execute(query))
            assert counts == self.jobs

    run_state_machine_as_test(AccountMachine, settings=_profile())

