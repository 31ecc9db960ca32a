"""`authsvc db upgrade` and `authsvc apps create` as an operator runs them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from authsvc.db.migrate import available_migrations
from tests.migration_support import database_of_an_older_release, what_the_database_holds

pytestmark = pytest.mark.e2e  # every test runs the authsvc command

AUTHSVC = str(Path(sys.executable).parent / "authsvc")


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [AUTHSVC, *args],
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_concurrent_upgrades_apply_each_migration_once(empty_database_url, env):
    env = {**env, "AUTHSVC_DATABASE_URL": empty_database_url}
    procs = [
        subprocess.Popen(
            [AUTHSVC, "db", "upgrade"],
            env={"PATH": "/usr/bin:/bin", **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outputs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], outputs
    applied_lines = sum(out.count("applied ") for out, _ in outputs)
    assert applied_lines == len(available_migrations())
    with psycopg.connect(empty_database_url) as conn:
        versions = [r[0] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY 1")]
    assert versions == [m.version for m in available_migrations()]


def test_upgrade_refuses_a_database_older_than_the_baseline_in_one_line(
    empty_database_url, env
):
    database_of_an_older_release(empty_database_url, latest="0019")
    before = what_the_database_holds(empty_database_url)
    result = _run(["db", "upgrade"], {**env, "AUTHSVC_DATABASE_URL": empty_database_url})
    assert result.returncode == 1, result
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert "at migration 0019" in line and "previous release" in line, line
    assert what_the_database_holds(empty_database_url) == before


def test_upgrade_is_idempotent(database_url, env):
    result = _run(["db", "upgrade"], env)
    assert result.returncode == 0
    assert "up to date" in result.stdout


def test_apps_create_prints_key_once_and_stores_only_a_hash(database_url, env, conn):
    result = _run(
        ["apps", "create", "Shop", "--redirect-url", "https://shop.example.com/auth"], env
    )
    assert result.returncode == 0, result.stderr
    key = next(line.split()[-1] for line in result.stdout.splitlines() if "api key" in line)
    stored = conn.execute("SELECT name, redirect_urls, key_hash FROM apps").fetchall()
    assert stored[0][:2] == ("Shop", ["https://shop.example.com/auth"])
    assert key.encode() not in bytes(stored[0][2])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["apps", "create", "Shop", "--redirect-url", "javascript:alert(1)"], "absolute http"),
        (["apps", "create", "Shop", "--redirect-url", "https://u:p@x.example"], "credentials"),
        (["apps", "create", "Shop"], "--redirect-url"),
        (["apps", "create", " ", "--redirect-url", "https://x.example"], "1-100"),
        (["db", "downgrade"], "No such command"),
    ],
)
def test_bad_command_input_names_the_problem_without_traceback(
    database_url, env, conn, args, message
):
    result = _run(args, env)
    assert result.returncode != 0
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert conn.execute("SELECT count(*) FROM apps").fetchone()[0] == 0


def test_bad_configuration_stops_commands_before_the_database(tmp_path):
    result = _run(
        ["db", "upgrade"],
        {
            "AUTHSVC_DATA_DIR": str(tmp_path),
            "AUTHSVC_RESET_TTL": "soon",
            "AUTHSVC_ENV": "test",
            "AUTHSVC_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none",
        },
    )
    assert result.returncode != 0
    assert "AUTHSVC_RESET_TTL" in result.stderr and "Traceback" not in result.stderr


def test_apps_create_on_an_unmigrated_database_says_what_to_do(empty_database_url, env):
    result = _run(
        ["apps", "create", "Shop", "--redirect-url", "https://x.example"],
        {**env, "AUTHSVC_DATABASE_URL": empty_database_url},
    )
    assert result.returncode != 0
    assert "authsvc db upgrade" in result.stderr


UNREACHABLE = "postgresql://nobody@127.0.0.1:1/none"


@pytest.mark.parametrize(
    ("args", "overrides", "message"),
    [
        (["outbox", "prune", "--older-than", "999999999d"], {}, "at most 36500 days"),
        (["worker", "--once", "--lease-seconds", "nan"], {}, "finite"),
        (["worker", "--poll-seconds", "nan"], {}, "finite"),
        (
            ["outbox", "stats"],
            {"AUTHSVC_DATABASE_URL": "postgresql://[::1"},
            "AUTHSVC_DATABASE_URL",
        ),
        (["outbox", "stats"], {"AUTHSVC_BASE_URL": "http://[::1"}, "AUTHSVC_BASE_URL"),
        (["outbox", "stats"], {"AUTHSVC_DATA_DIR": "/etc/passwd"}, "AUTHSVC_DATA_DIR"),
        (["outbox", "stats"], {"AUTHSVC_LEASE_SECONDS": "99999999999d"}, "AUTHSVC_LEASE_SECONDS"),
        (
            ["apps", "create", "Shop", "--redirect-url", "https://x.example"],
            {"AUTHSVC_DATABASE_URL": UNREACHABLE},
            "cannot reach the database",
        ),
        (
            ["serve", "--bind", "127.0.0.1:0"],
            {"AUTHSVC_DATABASE_URL": UNREACHABLE},
            "cannot reach the database",
        ),
        (
            ["apps", "create", "tab\tname", "--redirect-url", "https://x.example"],
            {},
            "control characters",
        ),
    ],
    ids=[
        "prune-overflow",
        "lease-nan",
        "poll-nan",
        "db-url-unparsable",
        "base-url-unparsable",
        "data-dir-is-a-file",
        "lease-overflow",
        "apps-db-down",
        "serve-db-down",
        "apps-name-tab",
    ],
)
def test_more_bad_input_names_the_problem_without_traceback(
    database_url, env, conn, args, overrides, message
):
    result = _run(args, {**env, **overrides})
    assert result.returncode != 0
    assert message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert conn.execute("SELECT count(*) FROM apps").fetchone()[0] == 0
