"""Shared fixtures: a real, empty PostgreSQL database per test, the Flask app, a frozen clock."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jinja2
import jinja2.bccache
import psycopg
import pytest
from flask import Flask
from flask.testing import FlaskClient
from psycopg_pool import ConnectionPool

from authsvc.accounts.passwords import Passwords, cheap_passwords
from authsvc.clock import FrozenClock
from authsvc.config import Settings, load_settings
from authsvc.db.connections import connect, create_pool
from authsvc.inbox.smtp import InboxSink
from authsvc.services import Services, build_services
from authsvc.web.app import create_app
from testkit.servers import serving
from testkit.smtp_double import SmtpDouble
from tests.api_support import ApiCaller, register_shop_app
from tests.browser_support import (
    DOC_SCREENSHOTS,
    NEEDS_MARK,
    REQUIRE_ENV,
    launched_chromium,
    new_tab,
    required,
)
from tests.inbox_support import HttpClient, inbox_services, running_sink, serving_inbox
from tests.pg import TestDatabases, create_embedded_server_user, direct_server_url, server_url

pytest_plugins = ["tests.process_guard"]

TEST_KEY = "test-secret-key-0123456789abcdef-0123456789"
# How much the fuzz tests generate: "short" in the suite, "quick" on the inner loop
# (`make test-fast`), "long" in `make fuzz`.
FUZZ_MODES = ("quick", "short", "long")
FUZZ_MODE = os.environ.get("AUTHSVC_FUZZ_MODE", "short")
if FUZZ_MODE not in FUZZ_MODES:
    raise pytest.UsageError(f"AUTHSVC_FUZZ_MODE={FUZZ_MODE!r}: one of {', '.join(FUZZ_MODES)}")
# Every fixture that reaches PostgreSQL (database_url, conn, pool, app, client, …)
# depends on this session fixture, which starts or connects to the test server.
DATABASE_FIXTURE = "test_databases"


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the controller, before xdist's processes
        create_embedded_server_user()
    config.addinivalue_line(
        "markers", f"{NEEDS_MARK}(missing): needs a tool; skipped while `missing` names what is"
        f" absent, failed instead under {REQUIRE_ENV}=1 (tests/browser_support.py)")


@pytest.hookimpl(tryfirst=True)  # before fixtures start Chromium
def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers(NEEDS_MARK):
        missing = mark.args[0]
        if missing is None:
            continue
        if required():
            pytest.fail(f"{missing}, and {REQUIRE_ENV}=1 requires it", pytrace=False)
        pytest.skip(missing)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by these markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with its level: `e2e` is written on the test (it starts
    processes); of the rest, a test is `integration` when it uses a database fixture
    and `unit` when it uses none. `pytest -m unit` runs without PostgreSQL."""
    for item in items:
        if item.get_closest_marker("e2e") is not None:
            continue
        uses_database = DATABASE_FIXTURE in getattr(item, "fixturenames", ())
        item.add_marker(pytest.mark.integration if uses_database else pytest.mark.unit)


@pytest.fixture(scope="session")
def test_databases(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestDatabases]:
    # Short path: the embedded server's Unix socket path must stay under 107 bytes.
    url, handle = server_url(tmp_path_factory.mktemp("pg", numbered=True))
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    databases = TestDatabases(url, worker, direct_server_url())
    yield databases
    databases.close()
    del handle


@pytest.fixture
def database_url(request: pytest.FixtureRequest, test_databases: TestDatabases) -> Iterator[str]:
    """A migrated database with no rows: the worker's own, emptied after the test, or
    for an e2e test (whose processes may outlive it by a moment) a clone of its own."""
    own = request.node.get_closest_marker("e2e") is not None
    with test_databases.lend(own=own) as url:
        yield url


@pytest.fixture
def empty_database_url(test_databases: TestDatabases) -> Iterator[str]:
    """A database with no migrations applied (upgrade and bootstrap tests)."""
    with test_databases.empty() as url:
        yield url


@pytest.fixture
def direct_database_url(test_databases: TestDatabases, database_url: str) -> str:
    """The test database on the server itself (the same URL unless a pooler is in front)."""
    return test_databases.direct(database_url)


@pytest.fixture
def conn(database_url: str, test_databases: TestDatabases) -> Iterator[psycopg.Connection]:
    """An autocommit connection for arranging and asserting (through the pooler, if any)."""
    if test_databases.pooled:
        with connect(database_url) as connection:
            yield connection
        return
    # No pooler: psycopg may prepare the statements a test repeats thousands of times.
    with psycopg.connect(database_url, autocommit=True) as connection:
        yield connection


@pytest.fixture
def env(database_url: str, direct_database_url: str, tmp_path: Path) -> dict[str, str]:
    """The environment a process under test gets (subprocess tests extend it)."""
    return {
        "AUTHSVC_ENV": "test",
        "AUTHSVC_DATABASE_URL": database_url,
        "AUTHSVC_DIRECT_DATABASE_URL": direct_database_url,
        "AUTHSVC_DATA_DIR": str(tmp_path / "data"),
        "AUTHSVC_SECRET_KEYS": TEST_KEY,
        "AUTHSVC_BASE_URL": "http://127.0.0.1:8000",
    }


@pytest.fixture
def settings(env: dict[str, str]) -> Settings:
    return load_settings(env)


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture(scope="session")
def passwords() -> Passwords:
    return cheap_passwords()


@pytest.fixture
def pool(database_url: str) -> Iterator[ConnectionPool]:
    pool = create_pool(database_url, min_size=1, max_size=12)
    yield pool
    pool.close()


@pytest.fixture
def svc(
    settings: Settings, pool: ConnectionPool, clock: FrozenClock, passwords: Passwords
) -> Services:
    return build_services(settings, pool, clock=clock, passwords=passwords)


class CompiledTemplates(jinja2.BytecodeCache):
    """The page templates compiled once per test process, shared by every app the tests
    build. Each app has a Jinja environment of its own, and compiling the pages again
    for each test took about a third of a page test's time. Jinja checks each entry
    against its template's source, so an edited template is compiled afresh."""

    def __init__(self) -> None:
        self._code: dict[str, bytes] = {}

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        if (code := self._code.get(bucket.key)) is not None:
            bucket.bytecode_from_string(code)

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        self._code[bucket.key] = bucket.bytecode_to_string()


COMPILED_TEMPLATES = CompiledTemplates()


def _for_tests(app: Flask) -> Flask:
    app.config["TESTING"] = True
    app.jinja_env.bytecode_cache = COMPILED_TEMPLATES
    return app


@pytest.fixture
def app(
    settings: Settings, pool: ConnectionPool, clock: FrozenClock, passwords: Passwords
) -> Flask:
    return _for_tests(create_app(settings, pool=pool, clock=clock, passwords=passwords))


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


@pytest.fixture
def app_with(env, pool, clock, passwords):
    """Build the app with extra AUTHSVC_* settings, e.g. app_with(AUTHSVC_RATE_LIMIT_IP="3/15m")."""

    def build(**overrides: str) -> Flask:
        return _for_tests(create_app(
            load_settings(env, **overrides), pool=pool, clock=clock, passwords=passwords
        ))

    return build


@pytest.fixture
def smtp() -> Iterator[SmtpDouble]:
    """An SMTP server in a thread of this process that accepts everything (point the worker
    at `smtp.url`; change `smtp.mode` or `smtp.script(...)` to misbehave)."""
    with SmtpDouble() as double:
        yield double


@pytest.fixture
def sink(request: pytest.FixtureRequest, pool: ConnectionPool) -> Iterator[InboxSink]:
    """The test inbox's SMTP sink on a free port in this process, storing into the test
    database. InboxSink's options (size limits) come from `@pytest.mark.sink(...)`."""
    marker = request.node.get_closest_marker("sink")
    with running_sink(pool, **(marker.kwargs if marker else {})) as running:
        yield running


@pytest.fixture
def inbox(
    sink: InboxSink, env: dict[str, str], pool: ConnectionPool, passwords: Passwords,
    clock: FrozenClock,
) -> Iterator[HttpClient]:
    """A client of the inbox's HTTP server, run on the sink's loop (no token set)."""
    svc = inbox_services(env, pool, passwords, clock=clock)
    with serving_inbox(sink, svc, listen_url=env["AUTHSVC_DIRECT_DATABASE_URL"]) as url:
        yield HttpClient(url)


@pytest.fixture
def api(client: FlaskClient, conn: psycopg.Connection) -> ApiCaller:
    """The JSON API as a registered app (`shop`) calls it."""
    app, key = register_shop_app(conn)
    return ApiCaller(client, app, key)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Chromium under Playwright, one per test module (tests/browser_support.py)."""
    with launched_chromium() as chromium:
        yield chromium


@pytest.fixture
def base_url(app: Flask) -> Iterator[str]:
    """The test app served over HTTP, for a browser."""
    with serving(app) as url:
        yield url


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A browser tab with JavaScript off: every page must work with plain HTML forms."""
    with new_tab(browser, java_script_enabled=False) as tab:
        yield tab


@pytest.fixture
def screenshots(tmp_path: Path) -> Path:
    """Where screenshots go: docs/screenshots/ only when AUTHSVC_UPDATE_SCREENSHOTS=1."""
    if os.environ.get("AUTHSVC_UPDATE_SCREENSHOTS") == "1":
        return DOC_SCREENSHOTS
    return tmp_path
