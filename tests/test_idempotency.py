"""Issue 6: Idempotency-Key on /api/v1 POSTs, against real PostgreSQL."""

from __future__ import annotations

import threading
from datetime import timedelta

import psycopg
import pytest

from authsvc.apps.idempotency import KEY_LIFETIME, prune_idempotency_keys
from testkit.waiting import wait_until
from tests.api_support import ApiCaller, assert_problem, register_shop_app
from tests.link_support import latest_claims, latest_link

RESET = {"email": "ann@example.com"}


@pytest.fixture
def api(client, conn) -> ApiCaller:
    app, key = register_shop_app(conn)
    caller = ApiCaller(client, app, key)
    caller.sign_up("ann@example.com")
    return caller


def _resets(conn: psycopg.Connection) -> int:
    row = conn.execute("SELECT count(*) FROM email_jobs WHERE template = 'reset'").fetchone()
    assert row is not None
    return int(row[0])


def _records(conn: psycopg.Connection) -> int:
    row = conn.execute("SELECT count(*) FROM idempotency_keys").fetchone()
    assert row is not None
    return int(row[0])


def test_same_key_three_times_queues_one_email_and_answers_identically(api, conn):
    responses = [api.post("/password-resets", RESET, idempotency_key="retry-1") for _ in range(3)]
    assert [r.status_code for r in responses] == [202, 202, 202]
    assert len({r.get_data() for r in responses}) == 1
    assert [r.headers.get("Idempotent-Replayed") for r in responses] == [None, "true", "true"]
    assert _resets(conn) == 1

    fresh = api.post("/password-resets", RESET, idempotency_key="retry-2")
    assert fresh.status_code == 202 and "Idempotent-Replayed" not in fresh.headers
    assert _resets(conn) == 2


def test_requests_without_a_key_are_not_deduplicated(api, conn):
    for _ in range(2):
        assert api.post("/password-resets", RESET).status_code == 202
    assert _resets(conn) == 2
    assert _records(conn) == 0


def _waiting_on_advisory_lock(conn: psycopg.Connection, key: int) -> bool:
    row = conn.execute(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        " AND objid = %s",
        (key,),
    ).fetchone()
    return bool(row and row[0])


def test_eight_concurrent_requests_with_one_key_make_one_job(
    api, app, conn, direct_database_url
):
    # The first request is held inside its transaction (its outbox INSERT waits on
    # an advisory lock the test holds), so the other seven certainly arrive while
    # it runs: they must wait for nothing and send nothing.
    gate = 4242
    conn.execute(
        "CREATE FUNCTION gated_outbox() RETURNS trigger LANGUAGE plpgsql AS"
        f" $$ BEGIN PERFORM pg_advisory_xact_lock({gate}); RETURN NEW; END $$"
    )
    conn.execute(
        "CREATE TRIGGER gated BEFORE INSERT ON email_jobs"
        " FOR EACH ROW EXECUTE FUNCTION gated_outbox()"
    )
    results: list[tuple[int, bytes, str]] = []
    lock = threading.Lock()

    def call() -> None:
        caller = ApiCaller(app.test_client(), api.app, api.key)
        response = caller.post("/password-resets", RESET, idempotency_key="burst")
        with lock:
            results.append(
                (response.status_code, response.get_data(), response.get_data(as_text=True))
            )

    # A session lock: on the server itself, not through a pooler (which would
    # hand the server connection holding it to someone else).
    with psycopg.connect(direct_database_url, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (gate,))
        first = threading.Thread(target=call)
        first.start()
        wait_until(lambda: _waiting_on_advisory_lock(conn, gate), what="the first request")
        others = [threading.Thread(target=call) for _ in range(7)]
        for thread in others:
            thread.start()
        for thread in others:
            thread.join(timeout=30)
        assert len(results) == 7, "a request waited for the running one"
        holder.execute("SELECT pg_advisory_unlock(%s)", (gate,))
    first.join(timeout=30)
    assert len(results) == 8
    assert _resets(conn) == 1
    statuses = [status for status, _, _ in results]
    assert statuses == [409] * 7 + [202], results
    assert all('"idempotency_in_progress"' in text for status, _, text in results if status == 409)
    # Once the first has finished, a retry gets its stored answer.
    again = api.post("/password-resets", RESET, idempotency_key="burst")
    assert (again.status_code, again.headers["Idempotent-Replayed"]) == (202, "true")
    assert again.get_data() == results[-1][1]
    assert _resets(conn) == 1


def test_key_held_by_a_running_request_answers_409_at_once(api, conn, direct_database_url):
    lock_name = f"idempotency:{api.app.id}:held"
    # A session lock held by "another request": on the server itself, not through a pooler.
    with psycopg.connect(direct_database_url, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (lock_name,))
        response = api.post("/password-resets", RESET, idempotency_key="held")
        assert_problem(response, 409, "idempotency_in_progress")
        assert response.headers["Retry-After"] == "1"
        # Unlocked here, not by closing: a closed session's backend frees its locks only
        # after the client has moved on, so the next request could still find it held.
        other.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (lock_name,))
    assert _resets(conn) == 0
    assert api.post("/password-resets", RESET, idempotency_key="held").status_code == 202
    assert _resets(conn) == 1


def test_same_key_with_a_different_body_is_422_and_changes_nothing(api, conn):
    first = api.post("/password-resets", RESET, idempotency_key="k")
    other = api.post("/password-resets", {"email": "bob@example.com"}, idempotency_key="k")
    assert_problem(other, 422, "idempotency_key_reused")
    other_path = api.post("/verifications", RESET, idempotency_key="k")
    assert_problem(other_path, 422, "idempotency_key_reused")
    assert _resets(conn) == 1
    replay = api.post("/password-resets", RESET, idempotency_key="k")
    assert replay.get_data() == first.get_data()


def test_member_order_and_whitespace_do_not_change_the_fingerprint(api, conn):
    body = {"email": "ann@example.com", "redirect_url": "https://allowed.example.com/welcome"}
    api.post("/password-resets", body, idempotency_key="canon")
    reordered = (
        '{ "redirect_url" : "https://allowed.example.com/welcome",\n "email":"ann@example.com"}'
    )
    response = api.post(
        "/password-resets",
        data=reordered,
        headers={"Content-Type": "application/json"},
        idempotency_key="canon",
    )
    assert response.headers.get("Idempotent-Replayed") == "true"
    assert _resets(conn) == 1


def test_keys_are_scoped_to_the_app(api, client, conn):
    other_app, other_key = register_shop_app(conn, "other")
    other = ApiCaller(client, other_app, other_key)
    assert api.post("/password-resets", RESET, idempotency_key="shared").status_code == 202
    response = other.post("/password-resets", RESET, idempotency_key="shared")
    assert response.status_code == 202 and "Idempotent-Replayed" not in response.headers
    assert _resets(conn) == 2
    assert _records(conn) == 2


def test_a_failed_transaction_stores_nothing_and_a_retry_runs(api, conn):
    conn.execute(
        "CREATE FUNCTION refuse_outbox() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN RAISE EXCEPTION 'outbox unavailable'; END $$"
    )
    conn.execute(
        "CREATE TRIGGER refuse BEFORE INSERT ON email_jobs"
        " FOR EACH ROW EXECUTE FUNCTION refuse_outbox()"
    )
    before = conn.execute(
        "SELECT reset_version FROM users WHERE email = 'ann@example.com'"
    ).fetchone()
    failed = api.post("/password-resets", RESET, idempotency_key="crash")
    assert_problem(failed, 500, "internal_error")
    assert _records(conn) == 0
    assert (
        conn.execute("SELECT reset_version FROM users WHERE email = 'ann@example.com'").fetchone()
        == before
    )

    conn.execute("DROP TRIGGER refuse ON email_jobs")
    retry = api.post("/password-resets", RESET, idempotency_key="crash")
    assert retry.status_code == 202 and "Idempotent-Replayed" not in retry.headers
    assert _resets(conn) == 1 and _records(conn) == 1


def test_rejected_input_is_not_stored_so_the_key_stays_usable(api, conn):
    bad = api.post("/password-resets", {"email": "not-an-email"}, idempotency_key="fixme")
    assert_problem(bad, 400, "invalid_request")
    assert _records(conn) == 0
    assert api.post("/password-resets", RESET, idempotency_key="fixme").status_code == 202
    assert _resets(conn) == 1


def test_domain_failures_are_stored_and_replayed(api):
    weak = api.post(
        "/signups", {"email": "bob@example.com", "password": "password"}, idempotency_key="weak"
    )
    assert_problem(weak, 422, "weak_password")
    again = api.post(
        "/signups", {"email": "bob@example.com", "password": "password"}, idempotency_key="weak"
    )
    assert (again.get_data(), again.headers["Idempotent-Replayed"]) == (weak.get_data(), "true")
    assert again.mimetype == "application/problem+json"


def test_a_redeemed_link_retried_with_its_key_replays_success(api, conn, svc):
    token = svc.tokens.mint(latest_claims(conn, "ann@example.com", "verify"))
    first = api.post("/verifications/confirm", {"token": token}, idempotency_key="confirm")
    retry = api.post("/verifications/confirm", {"token": token}, idempotency_key="confirm")
    assert first.status_code == retry.status_code == 200
    assert retry.get_data() == first.get_data()
    assert_problem(api.post("/verifications/confirm", {"token": token}), 410, "token_used")


def test_logins_are_never_replayed_so_an_old_password_stops_working(api, conn, svc):
    """A stored 200 for /sessions would let the old password in after a reset."""
    from authsvc.accounts import actions

    login = {"email": "ann@example.com", "password": "correct horse battery"}  # from `api`
    verify = latest_link(conn, svc, "ann@example.com", "verify")
    actions.confirm_verification(conn, svc, token=verify)
    assert api.post("/sessions", login, idempotency_key="login-1").status_code == 200
    actions.request_password_reset(conn, svc, email="ann@example.com")
    token = svc.tokens.mint(latest_claims(conn, "ann@example.com", "reset"))
    actions.reset_password(conn, svc, token=token, password="second long passphrase")

    again = api.post("/sessions", login, idempotency_key="login-1")
    assert_problem(again, 401, "invalid_credentials")
    assert "Idempotent-Replayed" not in again.headers
    assert _records(conn) == 0


def test_keys_expire_after_24_hours_and_are_pruned(api, conn, clock):
    assert api.post("/password-resets", RESET, idempotency_key="daily").status_code == 202
    clock.advance(KEY_LIFETIME.total_seconds() - 1)
    assert (
        api.post("/password-resets", RESET, idempotency_key="daily").headers["Idempotent-Replayed"]
        == "true"
    )
    clock.advance(2)
    late = api.post("/password-resets", RESET, idempotency_key="daily")
    assert late.status_code == 202 and "Idempotent-Replayed" not in late.headers
    assert _resets(conn) == 2
    assert _records(conn) == 1  # the expired record was replaced in place

    assert prune_idempotency_keys(conn, clock() + timedelta(hours=1)) == 0
    assert prune_idempotency_keys(conn, clock() + KEY_LIFETIME) == 1
    assert _records(conn) == 0
