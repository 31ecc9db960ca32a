"""The chaos run's ownership check catches an address owned by an unproven party."""

from __future__ import annotations

import psycopg

from chaos.life import LifeResult, check_owners, seed_accounts


def _proven(ids: dict[str, int]) -> LifeResult:
    """life-0 moved to moved-0, proven by its mailbox; life-1 was deleted."""
    result = LifeResult()
    result.owners = {"life-0@life.chaos.test": None, "moved-0@life.chaos.test":
                     ids["life-0@life.chaos.test"], "life-1@life.chaos.test": None}
    result.deleted = {"life-1@life.chaos.test"}
    return result


def _as_proven(conn: psycopg.Connection, ids: dict[str, int]) -> None:
    conn.execute("UPDATE users SET email = 'moved-0@life.chaos.test' WHERE id = %s",
                 (ids["life-0@life.chaos.test"],))
    conn.execute("DELETE FROM users WHERE id = %s", (ids["life-1@life.chaos.test"],))


def test_the_state_the_mailbox_holders_proved_passes(conn: psycopg.Connection) -> None:
    ids = seed_accounts(conn, 2)
    _as_proven(conn, ids)
    assert check_owners(conn, _proven(ids)) == []


def test_an_address_owned_by_an_account_nobody_proved_it_for_is_caught(
    conn: psycopg.Connection,
) -> None:
    ids = seed_accounts(conn, 2)
    _as_proven(conn, ids)
    # The stranger's unconfirmed account got confirmed for an address nobody proved.
    conn.execute("UPDATE users SET email_verified_at = now() WHERE email = %s",
                 ("squat-0@life.chaos.test",))
    assert check_owners(conn, _proven(ids)) == [
        f"squat-0@life.chaos.test is owned by {ids['squat-0@life.chaos.test']},"
        " which no mailbox proved"]


def test_an_address_left_with_its_old_owner_is_caught(conn: psycopg.Connection) -> None:
    ids = seed_accounts(conn, 2)
    conn.execute("DELETE FROM users WHERE id = %s", (ids["life-1@life.chaos.test"],))
    problems = check_owners(conn, _proven(ids))
    assert problems[0] == (f"life-0@life.chaos.test is owned by {ids['life-0@life.chaos.test']},"
                           " expected None")


def test_a_deleted_address_left_in_the_outbox_is_caught(conn: psycopg.Connection) -> None:
    ids = seed_accounts(conn, 2)
    _as_proven(conn, ids)
    conn.execute("INSERT INTO email_jobs (kind, template, recipient, payload)"
                 " VALUES ('email', 'email_in_use', 'life-1@life.chaos.test', '{}')")
    assert check_owners(conn, _proven(ids)) == [
        "deleted address life-1@life.chaos.test is still in 1 rows"]
