"""Databases as the releases before the baseline left them, for the runner's rules."""

from __future__ import annotations

from collections.abc import Iterable

import psycopg

from authsvc.db.connections import connect
from authsvc.resources import migrations_dir

# What schema_migrations holds in every installation at the last release before
# the baseline: the files it applied, under their names then (0003, 0009 and 0010
# were never written).
RELEASED_BEFORE_THE_BASELINE = (
    ("0000", "schema_migrations"), ("0001", "initial"), ("0002", "account_integrity"),
    ("0004", "worker_speed"), ("0005", "outbox_rules"), ("0006", "email_codes"),
    ("0007", "app_events"), ("0008", "suppressions"), ("0011", "outbox_counters"),
    ("0012", "cheaper_claim_counters"), ("0013", "latency_deltas_plan_once"),
    ("0014", "trail_without_row_checks"), ("0015", "rate_limit_hit_function"),
    ("0016", "code_tries_function"), ("0017", "counters_without_joins"),
    ("0018", "email_budget_function"), ("0019", "unordered_ids"),
    ("0020", "code_tries_per_address"), ("0021", "account_apps"),
    ("0022", "inbox_contents_once"), ("0023", "trail_event_names"),
    ("0024", "counters_in_the_statements"), ("0025", "app_event_envelope"),
    ("0026", "inbox_visible_messages"),
)


def record(conn: psycopg.Connection, versions: Iterable[tuple[str, str]]) -> None:
    conn.execute("DELETE FROM schema_migrations")
    for version, name in versions:
        conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                     (version, name))


def database_of_an_older_release(url: str, latest: str = "0019") -> None:
    """A database upgraded by an older release up to `latest`: its bookkeeping, and a
    table of its schema holding a row (what a refused upgrade must leave as it was)."""
    with connect(url) as conn, conn.transaction():  # through a pooler too: nothing prepared
        conn.execute((migrations_dir() / "0000_schema_migrations.sql").read_text())  # type: ignore[arg-type]
        record(conn, [(v, n) for v, n in RELEASED_BEFORE_THE_BASELINE if v <= latest])
        conn.execute("CREATE TABLE users (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
                     " email text NOT NULL)")
        conn.execute("INSERT INTO users (email) VALUES ('old@example.com')")


def what_the_database_holds(url: str) -> dict[str, list[tuple[object, ...]]]:
    """Its tables and functions, what it recorded, and its users: to compare before and after."""
    with connect(url) as conn:
        return {
            "relations": conn.execute(
                "SELECT c.relname, c.relkind FROM pg_class AS c"
                " JOIN pg_namespace AS n ON n.oid = c.relnamespace"
                " WHERE n.nspname = 'public' ORDER BY 1").fetchall(),
            "functions": conn.execute(
                "SELECT p.oid::regprocedure::text FROM pg_proc AS p"
                " JOIN pg_namespace AS n ON n.oid = p.pronamespace"
                " WHERE n.nspname = 'public' ORDER BY 1").fetchall(),
            "recorded": conn.execute(
                "SELECT version, name FROM schema_migrations ORDER BY 1").fetchall(),
            "users": conn.execute("SELECT * FROM users ORDER BY 1").fetchall(),
        }
