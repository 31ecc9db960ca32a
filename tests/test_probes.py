"""/healthz and /readyz as an orchestrator sees them."""

from __future__ import annotations


def test_healthz_is_up(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.get_json() == {"status": "ok"}


def test_readyz_ready_when_migrated(client):
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.get_json()["status"] == "ready"


def test_readyz_503_while_a_migration_is_pending(client, conn):
    newest = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()[0]
    conn.execute("DELETE FROM schema_migrations WHERE version = %s", (newest,))
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.get_json() == {"status": "migrations_pending", "pending": [newest]}


def test_readyz_503_when_the_database_is_gone(client, database_url, test_databases):
    test_databases.drop(database_url)
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.get_json()["status"] == "unavailable"
