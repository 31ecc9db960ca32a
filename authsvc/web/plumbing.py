"""Request plumbing shared by the blueprints: services, connections, headers."""

from __future__ import annotations

import logging
import threading
from urllib.parse import urlsplit

import psycopg
from flask import Flask, Response, current_app, g, request
from psycopg import Connection
from psycopg_pool import ConnectionPool
from werkzeug.routing import RequestRedirect

from authsvc.observability.bearer import authorization_presents
from authsvc.observability.logs import log_event
from authsvc.services import Services

logger = logging.getLogger(__name__)
POOL_RECOVERY = "authsvc_pool_recovery"  # app.extensions key

# No scripts at all: the token pages must not be submittable by anything but
# a person's click, and nothing here needs JavaScript.
def content_security_policy(img_sources: tuple[str, ...] = (),
                            style_sources: tuple[str, ...] = ()) -> str:
    """The policy of every response; a branded page adds its logo's origin (images only)
    and the hash of its one colour rule (styles only), each checked by its caller."""
    styles = " ".join(("'self'", *style_sources))
    images = " ".join(("'self'", *img_sources))
    return (
        f"default-src 'none'; style-src {styles}; img-src {images}; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    )


CONTENT_SECURITY_POLICY = content_security_policy()


def services() -> Services:
    """The process's shared services, registered by create_app."""
    svc: Services = current_app.extensions["authsvc"]
    return svc


def db() -> Connection:
    """This request's connection, checked out of the pool on first use."""
    if "db_conn" not in g:
        g.db_conn = services().pool.getconn()
    conn: Connection = g.db_conn
    return conn


class PoolRecovery:
    """Checks the pool once, off the request thread, after a request found its connection dead.

    The web pool does not test a connection at each checkout (a round trip
    per request, 15% of a reset's throughput), so after a database restart
    its idle connections are all dead; checking them at the first failure
    costs about that one request, not one per pooled connection. One check
    at a time: a burst of failures starts one, not one each.
    """

    def __init__(self, pool: ConnectionPool) -> None:
        self._pool = pool
        self._running = threading.Lock()

    @property
    def checking(self) -> bool:
        return self._running.locked()

    def connection_lost(self) -> None:
        if not self._running.acquire(blocking=False):
            return  # a check is already under way
        threading.Thread(target=self._check, name="pool-check", daemon=True).start()

    def _check(self) -> None:
        try:
            self._pool.check()
        finally:
            self._running.release()


def database_failed(conn: Connection | None = None) -> None:
    """A request's database call failed: if its connection is dead, have the pool checked.

    `conn` defaults to the request's own connection. An error the server
    answered (a timeout, a deadlock, a pooler's wait for a server) leaves
    the connection usable, and the pool needs no check.
    """
    conn = conn if conn is not None else g.get("db_conn")
    if conn is not None and not conn.broken and not conn.closed:
        return
    recovery: PoolRecovery = current_app.extensions[POOL_RECOVERY]
    recovery.connection_lost()


def _database_unavailable(exc: psycopg.OperationalError) -> Response:
    # For routes without a blueprint handler of their own (the API's and the
    # pages' answer in their own formats): provider webhooks, the inbox.
    log_event(logger, "database_unavailable", path=request.path, error=type(exc).__name__)
    database_failed()
    return Response("The database is unavailable; retry shortly.\n", status=503,
                    content_type="text/plain; charset=utf-8", headers={"Retry-After": "2"})


def _relative_redirect() -> Response | None:
    """A slash-adding redirect (`/path` → `/path/`) names no host.

    Werkzeug builds it from the request's Host header, which the client
    chose; a path-only Location sends the browser to the same place.
    """
    exc = request.routing_exception
    if not isinstance(exc, RequestRedirect):
        return None
    parts = urlsplit(exc.new_url)
    location = parts.path + (f"?{parts.query}" if parts.query else "")
    return Response(status=exc.code, headers={"Location": location})


def client_ip() -> str:
    # ProxyFix (configured from AUTHSVC_TRUSTED_PROXIES) has already rewritten
    # remote_addr when the app sits behind trusted proxies.
    return request.remote_addr or "unknown"


def bearer_token_matches(expected: str) -> bool:
    """Whether the request carries `Authorization: Bearer <expected>` (constant-time)."""
    return authorization_presents(request.headers.get("Authorization", ""), expected)


def _return_connection(_exc: BaseException | None) -> None:
    conn = g.pop("db_conn", None)
    if conn is not None:
        services().pool.putconn(conn)


def _security_headers(response: Response) -> Response:
    response.headers.setdefault("Referrer-Policy", "no-referrer")
    response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
    response.headers.setdefault("X-Frame-Options", "DENY")
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    return response


def install_request_plumbing(app: Flask) -> None:
    app.teardown_appcontext(_return_connection)
    app.after_request(_security_headers)
    app.before_request(_relative_redirect)
    app.extensions[POOL_RECOVERY] = PoolRecovery(app.extensions["authsvc"].pool)
    app.register_error_handler(psycopg.OperationalError, _database_unavailable)
