"""Stateful property test of SPEC §4a: only the mailbox holder decides the password.

Two parties race for one address. The owner holds the mailbox, so every
link queued for it lands with the owner; the attacker never sees one.
Hypothesis interleaves signups by either party, resends, reset and sign-in
requests (SPEC §13) by either party, a tight email budget (so some emails are suppressed), the
owner clicking any link ever sent or typing its code (with or without
choosing a password), and clock jumps. After every step:

- no attacker password opens the account (the attacker never received a
  link, so no password of theirs may become usable);
- only the newest link (or code) of each purpose ever redeems.

The owner may click any link, with or without choosing a password, except
one: the attacker's own signup email, unprompted, when the owner never
signed up (it says "only confirm if you signed up yourself"). Resend links
are fair game: the owner asks for one after a failed login.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime

import psycopg
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    multiple,
    rule,
    run_state_machine_as_test,
)

from authsvc.accounts import actions, sign_in
from authsvc.accounts.tokens import TokenClaims, TokenError
from authsvc.clock import FrozenClock
from authsvc.services import Services
from tests.accounts_support import forget_everyone

ADDRESS = "victim@example.com"
OWNER = ("owner passphrase one", "owner passphrase two")
ATTACKER = ("attacker passphrase one", "attacker passphrase two")
START = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
# ci: about 45 s alone on 2 cores; `make fuzz` runs the long profile.
PROFILES = {"ci": 150, "long": 3000, "quick": 40}


@pytest.fixture
def env(env: dict[str, str]) -> dict[str, str]:
    # Two emails per purpose per window: suppression happens within a few steps.
    return {**env, "AUTHSVC_RATE_LIMIT_EMAIL": "2/15m"}


@dataclass(frozen=True)
class Mail:
    """A link that reached the owner's mailbox."""

    token: str
    claims: TokenClaims
    asked_by: str  # "owner", "attacker" or "anyone" (resends and resets)


@pytest.mark.timeout(300)  # many examples on a shared machine; not a timing test
def test_only_the_mailbox_holder_ever_decides_the_password(
    conn: psycopg.Connection, svc: Services, clock: FrozenClock
) -> None:
    class Ownership(RuleBasedStateMachine):
        mailbox = Bundle("mailbox")

        def __init__(self) -> None:
            super().__init__()
            forget_everyone(conn)
            clock.now = START
            self.seen_jobs = 0
            self.owner_signed_up = False

        def _new_mail(self, asked_by: str = "anyone"):
            """Whatever the outbox queued since the last look, as the owner receives it."""
            rows = conn.execute(
                "SELECT id, user_id, purpose, token_version, issued_at FROM email_jobs"
                " WHERE id > %s AND purpose IS NOT NULL ORDER BY id",
                (self.seen_jobs,),
            ).fetchall()
            last = conn.execute("SELECT coalesce(max(id), 0) FROM email_jobs").fetchone()
            self.seen_jobs = last[0] if last else 0
            mails = []
            for _id, user_id, purpose, version, issued_at in rows:
                claims = TokenClaims(user_id, purpose, version, issued_at)
                mails.append(Mail(svc.tokens.mint(claims), claims, asked_by))
            return multiple(*mails)

        def _current(self, purpose: str) -> int | None:
            row = conn.execute(
                f"SELECT {purpose}_version FROM users WHERE email = %s", (ADDRESS,)
            ).fetchone()
            return row[0] if row else None

        # --- either party -----------------------------------------------------

        @rule(target=mailbox, password=st.sampled_from(ATTACKER))
        def attacker_signs_up(self, password: str):
            actions.sign_up(conn, svc, email=ADDRESS, password=password)
            return self._new_mail("attacker")

        @rule(target=mailbox, password=st.sampled_from(OWNER))
        def owner_signs_up(self, password: str):
            actions.sign_up(conn, svc, email=ADDRESS, password=password)
            self.owner_signed_up = True
            return self._new_mail("owner")

        @rule(target=mailbox)
        def someone_asks_for_a_verification_link(self):
            actions.request_verification(conn, svc, email=ADDRESS)
            return self._new_mail()

        @rule(target=mailbox)
        def someone_asks_for_a_reset_link(self):
            actions.request_password_reset(conn, svc, email=ADDRESS)
            return self._new_mail()

        @rule(target=mailbox)
        def someone_asks_for_a_sign_in_link(self):
            actions.request_sign_in(conn, svc, email=ADDRESS)
            return self._new_mail()

        @rule(seconds=st.sampled_from([60, 901, 3600]))
        def time_passes(self, seconds: int):
            clock.advance(seconds)

        # --- the owner, holding the mailbox ---------------------------------------

        @rule(mail=mailbox, by_code=st.booleans())
        def owner_confirms_without_choosing_a_password(self, mail: Mail, by_code: bool):
            # Any link but the attacker's own signup email when the owner never
            # signed up: that one says "only confirm if you signed up yourself".
            if mail.asked_by == "attacker" and not self.owner_signed_up:
                return
            self._redeem(mail, None, by_code)

        @rule(mail=mailbox, password=st.sampled_from(OWNER), by_code=st.booleans())
        def owner_redeems_choosing_a_password(self, mail: Mail, password: str, by_code: bool):
            self._redeem(mail, password, by_code)

        def _redeem(self, mail: Mail, password: str | None, by_code: bool) -> None:
            purpose = mail.claims.purpose
            newest = self._current(purpose) == mail.claims.version
            # The same email's code, typed with the address (SPEC §4 "Codes").
            code = {"email": ADDRESS, "code": svc.tokens.mint_code(mail.claims)}
            try:
                if purpose == "sign_in":
                    # Proves the address: a password set before is discarded, and
                    # `password`, if any, is the owner's own choice.
                    if by_code:
                        sign_in.sign_in_with_code(conn, svc, **code, password=password)
                    else:
                        sign_in.sign_in_with_link(conn, svc, token=mail.token, password=password)
                elif purpose == "reset":
                    if password is None:
                        return  # a reset always sets a password
                    if by_code:
                        actions.reset_password_with_code(conn, svc, **code, password=password)
                    else:
                        actions.reset_password(conn, svc, token=mail.token, password=password)
                elif by_code:
                    actions.confirm_verification_code(conn, svc, **code, password=password)
                else:
                    actions.confirm_verification(conn, svc, token=mail.token, password=password)
                outcome = "ok"
            except TokenError as exc:
                outcome = exc.code
            except actions.PasswordRequired:
                outcome = "password_required"
            if outcome == "ok":
                assert newest, f"an older {purpose} {'code' if by_code else 'link'} redeemed"
            elif newest:
                allowed = {"password_required", "token_expired"}
                if by_code:  # a code also runs out: five tries an email, twenty wrong an hour
                    allowed.add("code_exhausted")
                assert outcome in allowed, outcome

        # --- what must always hold ---------------------------------------------------

        @invariant()
        def no_attacker_password_opens_the_account(self):
            for password in ATTACKER:
                try:
                    actions.authenticate(conn, svc, email=ADDRESS, password=password)
                except (actions.InvalidCredentials, actions.TooManyAttempts):
                    continue
                raise AssertionError(f"the attacker's {password!r} logs in")
            # Keep the probes from locking the owner out: they are not the attacker's tries.
            conn.execute("DELETE FROM rate_limit_counters WHERE bucket LIKE 'login:%%'")

    profile = os.environ.get("AUTHSVC_HYPOTHESIS_PROFILE", "ci")
    run_state_machine_as_test(
        Ownership,
        settings=settings(
            max_examples=PROFILES.get(profile, PROFILES["ci"]),
            stateful_step_count=30,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        ),
    )
