"""Failed logins per address: the limit holds under concurrency, and a rehash
on login never undoes a password change that happened meanwhile."""

from __future__ import annotations

import psycopg
import pytest
from argon2 import PasswordHasher

from authsvc.accounts import actions
from authsvc.accounts.passwords import Passwords
from authsvc.accounts.users import update_password_hash
from authsvc.services import build_services
from tests.accounts_support import insert_user, stored_user
from tests.link_support import latest_link
from tests.race_support import race


def test_concurrent_wrong_guesses_never_exceed_the_limit(database_url, conn, svc):
    actions.sign_up(conn, svc, email="ann@example.com", password="correct horse battery")
    limit = svc.settings.rate_limit_login.limit
    guesses = limit * 4

    def guess(own: psycopg.Connection, i: int) -> str:
        try:
            actions.authenticate(own, svc, email="ann@example.com", password=f"wrong {i}")
            return "ok"
        except actions.InvalidCredentials:
            return "checked"
        except actions.TooManyAttempts:
            return "refused"

    outcomes = race(database_url, guesses, guess)
    assert outcomes.count("checked") == limit
    assert outcomes.count("refused") == guesses - limit


def test_successful_logins_do_not_use_up_the_limit(conn, svc):
    actions.sign_up(conn, svc, email="ann@example.com", password="correct horse battery")
    verify = latest_link(conn, svc, "ann@example.com", "verify")
    actions.confirm_verification(conn, svc, token=verify)
    limit = svc.settings.rate_limit_login.limit
    for _ in range(limit * 2):
        user = actions.authenticate(
            conn, svc, email="ann@example.com", password="correct horse battery"
        )
        assert user.email == "ann@example.com"
    # The whole budget is still there: `limit` wrong guesses are checked, the next refused.
    for i in range(limit):
        with pytest.raises(actions.InvalidCredentials):
            actions.authenticate(conn, svc, email="ann@example.com", password=f"wrong {i}")
    with pytest.raises(actions.TooManyAttempts):
        actions.authenticate(conn, svc, email="ann@example.com", password="correct horse battery")


class _ResetDuringVerify(Passwords):
    """Commits a password change while a login is between verify and rehash."""

    def __init__(self, hasher: PasswordHasher, on_verify) -> None:
        super().__init__(hasher)
        self.on_verify = on_verify

    def verify(self, password_hash, password):
        ok = super().verify(password_hash, password)
        self.on_verify()
        return ok


def test_login_rehash_does_not_undo_a_concurrent_password_change(database_url, conn, settings):
    old_params = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)
    new_params = PasswordHasher(time_cost=1, memory_cost=16, parallelism=1)  # needs_rehash
    insert_user(conn, "ann@example.com", old_params.hash("old passphrase 123"))
    changed_hash = new_params.hash("new passphrase 456")

    def reset_elsewhere() -> None:
        with psycopg.connect(database_url, autocommit=True) as other:
            other.execute("UPDATE users SET password_hash = %s", (changed_hash,))

    passwords = _ResetDuringVerify(new_params, reset_elsewhere)
    with psycopg_pool_for(database_url) as pool:
        svc = build_services(settings, pool, passwords=passwords)
        # The old password stopped being the password mid-login: refused, not rehashed.
        with pytest.raises(actions.InvalidCredentials):
            actions.authenticate(
                conn, svc, email="ann@example.com", password="old passphrase 123"
            )

    stored = stored_user(conn, "ann@example.com").password_hash
    assert stored == changed_hash, "the login's rehash overwrote the newer password"


def test_rehash_applies_when_nothing_changed(conn):
    insert_user(conn, "ann@example.com", "old-hash")
    user = stored_user(conn, "ann@example.com")
    update_password_hash(conn, user.id, "old-hash", "rehashed")
    assert stored_user(conn, "ann@example.com").password_hash == "rehashed"


def psycopg_pool_for(url: str):
    from authsvc.db.connections import create_pool

    return create_pool(url, min_size=1, max_size=2)
