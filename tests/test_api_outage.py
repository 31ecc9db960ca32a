"""A database outage is a retryable 503 for apps, never a 500 that looks like a bug."""

from __future__ import annotations

from tests.api_support import ApiCaller, assert_documented, assert_problem, register_shop_app


def test_database_gone_answers_503_with_retry_after(
    client, conn, pool, database_url, test_databases
):
    app, key = register_shop_app(conn)
    api = ApiCaller(client, app, key)
    assert api.post("/password-resets", {"email": "ann@example.com"}).status_code == 202

    pool.timeout = 1.0  # fail fast instead of queueing for the default 10 s
    test_databases.drop(database_url)  # terminates every connection, refuses new ones
    response = api.post("/password-resets", {"email": "ann@example.com"}, idempotency_key="k1")

    assert_problem(response, 503, "service_unavailable")
    assert response.headers["Retry-After"] == "2"
    assert_documented(response, "POST", "/password-resets")
