"""SPEC §4 token guarantees, against real PostgreSQL."""

from __future__ import annotations

import re
import threading

import psycopg
import pytest

from authsvc.accounts import actions, links, sessions
from authsvc.accounts.tokens import TokenCodec, TokenError
from authsvc.accounts.users import User
from authsvc.clock import FrozenClock
from authsvc.services import Services
from tests.conftest import TEST_KEY
from tests.link_support import latest_claims
from tests.race_support import race

PASSWORD = "correct horse battery"


def _signed_up(conn: psycopg.Connection, svc: Services, email: str = "ann@example.com") -> str:
    actions.sign_up(conn, svc, email=email, password=PASSWORD)
    return svc.tokens.mint(latest_claims(conn, email, "verify"))


def test_signup_queues_verification_and_link_redeems_once(conn, svc):
    token = _signed_up(conn, svc)
    user = actions.confirm_verification(conn, svc, token=token)
    assert user.email_verified_at is not None
    with pytest.raises(TokenError) as again:
        actions.confirm_verification(conn, svc, token=token)
    assert again.value.code == "token_used"


@pytest.mark.parametrize("newer_used_first", [True, False], ids=["presented_late", "before"])
def test_of_two_quick_resets_only_the_newest_redeems(conn, svc, newer_used_first):
    """Issuing the second link retires the first, whether or not the second was used yet."""
    _signed_up(conn, svc)
    actions.request_password_reset(conn, svc, email="ann@example.com")
    older = svc.tokens.mint(latest_claims(conn, "ann@example.com", "reset"))
    actions.request_password_reset(conn, svc, email="ann@example.com")
    newer = svc.tokens.mint(latest_claims(conn, "ann@example.com", "reset"))

    if newer_used_first:
        actions.reset_password(conn, svc, token=newer, password="a new long passphrase")
    with pytest.raises(TokenError) as stale:
        actions.reset_password(conn, svc, token=older, password="another long passphrase")
    assert stale.value.code == "token_superseded"


def test_concurrent_redemptions_exactly_one_succeeds(database_url, conn, svc):
    _signed_up(conn, svc)
    actions.request_password_reset(conn, svc, email="ann@example.com")
    token = svc.tokens.mint(latest_claims(conn, "ann@example.com", "reset"))

    def redeem(own: psycopg.Connection, i: int) -> str:
        try:
            actions.reset_password(own, svc, token=token, password=f"parallel passphrase {i}")
            return "ok"
        except TokenError as exc:
            return exc.code

    outcomes = race(database_url, 8, redeem, timeout=30)
    assert sorted(outcomes) == ["ok"] + ["token_used"] * 7


def test_verify_token_at_reset_is_invalid(conn, svc):
    token = _signed_up(conn, svc)
    with pytest.raises(TokenError) as wrong:
        actions.reset_password(conn, svc, token=token, password="a new long passphrase")
    assert wrong.value.code == "invalid_token"


@pytest.mark.parametrize(
    "mangle",
    [
        lambda t: t[:-3],
        lambda t: t[: len(t) // 2],
        lambda t: ("A" if t[5] != "A" else "B").join([t[:5], t[6:]]),
        lambda t: t + "x",
        lambda t: "",
        lambda t: "x" * 5000,
        lambda t: 12345,
        lambda t: None,
    ],
    ids=["truncated", "half", "tampered", "appended", "empty", "oversized", "number", "null"],
)
def test_malformed_tokens_are_invalid(conn, svc, mangle):
    token = _signed_up(conn, svc)
    with pytest.raises(TokenError) as bad:
        actions.confirm_verification(conn, svc, token=mangle(token))
    assert bad.value.code == "invalid_token"


def test_expired_link_rejected_with_injected_clock(conn, svc, clock: FrozenClock):
    _signed_up(conn, svc)
    actions.request_password_reset(conn, svc, email="ann@example.com")
    token = svc.tokens.mint(latest_claims(conn, "ann@example.com", "reset"))
    clock.advance(svc.settings.reset_ttl - 1)
    links.check_link(conn, svc, token, "reset")  # still valid one second before
    clock.advance(1)
    with pytest.raises(TokenError) as expired:
        actions.reset_password(conn, svc, token=token, password="a new long passphrase")
    assert expired.value.code == "token_expired"


def _verified_with_sessions(conn, svc, count: int = 2) -> tuple[User, list[str]]:
    actions.confirm_verification(conn, svc, token=_signed_up(conn, svc))
    user = actions.authenticate(conn, svc, email="ann@example.com", password=PASSWORD)
    tokens = [
        actions.start_session(conn, svc, user=user, user_agent=f"browser {i}")
        for i in range(count)
    ]
    return user, tokens


def test_password_change_ends_sessions_and_retires_reset_link(conn, svc):
    _user, tokens = _verified_with_sessions(conn, svc)
    actions.request_password_reset(conn, svc, email="ann@example.com")
    outstanding = svc.tokens.mint(latest_claims(conn, "ann@example.com", "reset"))

    signed_in = actions.current_session(conn, svc, tokens[0])
    assert signed_in is not None
    actions.change_password(
        conn, svc, session=signed_in, current=PASSWORD, new="a brand new passphrase"
    )
    assert [actions.current_session(conn, svc, t) for t in tokens] == [None, None]
    with pytest.raises(TokenError) as stale:
        actions.reset_password(conn, svc, token=outstanding, password="yet another passphrase")
    assert stale.value.code == "token_superseded"
    notices = conn.execute(
        "SELECT count(*) FROM email_jobs WHERE template = 'password_changed'"
    ).fetchone()[0]
    assert notices == 1


def test_an_ended_session_cannot_change_the_password(conn, svc):
    _user, tokens = _verified_with_sessions(conn, svc, count=1)
    signed_in = actions.current_session(conn, svc, tokens[0])
    assert signed_in is not None
    sessions.end_session(conn, tokens[0])
    with pytest.raises(actions.SessionEnded):
        actions.change_password(
            conn, svc, session=signed_in, current=PASSWORD, new="a brand new passphrase"
        )
    assert actions.authenticate(conn, svc, email="ann@example.com", password=PASSWORD)


def test_reset_ends_sessions_verifies_email_and_queues_notice(conn, svc):
    _user, tokens = _verified_with_sessions(conn, svc)
    actions.request_password_reset(conn, svc, email="ann@example.com")
    token = svc.tokens.mint(latest_claims(conn, "ann@example.com", "reset"))
    user = actions.reset_password(conn, svc, token=token, password="a new long passphrase")
    assert user.email_verified_at is not None
    assert [actions.current_session(conn, svc, t) for t in tokens] == [None, None]
    assert actions.authenticate(
        conn, svc, email="ann@example.com", password="a new long passphrase"
    )


def test_key_rotation_old_tokens_verify_new_tokens_use_new_key(conn, svc, clock):
    _signed_up(conn, svc)
    actions.request_password_reset(conn, svc, email="ann@example.com")
    claims = latest_claims(conn, "ann@example.com", "reset")
    old_token = svc.tokens.mint(claims)

    new_key = "rotated-secret-key-abcdefghijklmnopqrstuvwxyz"
    rotated = TokenCodec([new_key, TEST_KEY], {"reset": 1800, "verify": 86400}, clock)
    assert rotated.read(old_token, "reset") == claims
    new_token = rotated.mint(claims)
    assert new_token != old_token
    only_new = TokenCodec([new_key], {"reset": 1800, "verify": 86400}, clock)
    assert only_new.read(new_token, "reset") == claims
    with pytest.raises(TokenError):
        only_new.read(old_token, "reset")


def test_no_usable_token_at_rest(conn, svc):
    _signed_up(conn, svc)
    actions.request_password_reset(conn, svc, email="ann@example.com")
    token = svc.tokens.mint(latest_claims(conn, "ann@example.com", "reset"))
    dump = conn.execute(
        "SELECT string_agg(t::text, ' ') FROM (SELECT * FROM email_jobs) t"
    ).fetchone()[0]
    assert token not in dump
    # itsdangerous tokens look like <payload>.<signature> in URL-safe base64.
    assert not re.search(r"[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{20,}", dump)


def test_signing_up_again_for_a_verified_address_changes_nothing(conn, svc):
    actions.confirm_verification(conn, svc, token=_signed_up(conn, svc))
    actions.sign_up(conn, svc, email="ann@example.com", password="someone elses pass 9")
    assert actions.authenticate(
        conn, svc, email="ann@example.com", password="correct horse battery"
    )
    templates = [r[0] for r in conn.execute("SELECT template FROM email_jobs ORDER BY id")]
    assert templates == ["verify", "account_exists"]


def test_a_password_change_racing_a_reset_never_overwrites_it(database_url, conn, svc):
    """The reset commits while the change waits on the row lock: the reset wins.

    Found in review: the session-exists guard alone was judged on the change's
    snapshot, in which the reset's deletion of the session was not yet visible.
    """
    _user, tokens = _verified_with_sessions(conn, svc, count=1)
    signed_in = actions.current_session(conn, svc, tokens[0])
    assert signed_in is not None
    actions.request_password_reset(conn, svc, email="ann@example.com")
    reset = svc.tokens.mint(latest_claims(conn, "ann@example.com", "reset"))
    # No login counter row for the reset to delete: the change must get as far
    # as its UPDATE of the user row and wait there, not on the counter.
    conn.execute("DELETE FROM rate_limit_counters")
    outcome: list[str] = []

    def change() -> None:
        with psycopg.connect(database_url, autocommit=True) as own:
            try:
                actions.change_password(
                    own, svc, session=signed_in, current=PASSWORD, new="thief wants this one"
                )
                outcome.append("changed")
            except actions.SessionEnded:
                outcome.append("session_ended")

    with psycopg.connect(database_url, autocommit=True) as other, other.transaction():
        actions.reset_password(other, svc, token=reset, password="owner resets to this")
        thread = threading.Thread(target=change)
        thread.start()
        for _ in range(200):  # until the change waits on the reset's row lock
            waiting = conn.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE wait_event_type = 'Lock' AND datname = current_database()"
            ).fetchone()[0]
            if waiting:
                break
            thread.join(0.05)
        assert waiting, "the change never reached the row lock"
    thread.join(10)
    assert outcome == ["session_ended"]
    assert actions.authenticate(
        conn, svc, email="ann@example.com", password="owner resets to this"
    )
