"""Request plumbing shared by the blueprints: services, connections, headers."""

from __future__ import annotations

import hmac

from flask import Flask, Response, current_app, g, request
from psycopg import Connection

from authsvc.services import Services

# No scripts at all: the token pages must not be submittable by anything but
# a person's click, and nothing here needs JavaScript.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)


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


def database_failed() -> None:
    """After a request lost its database connection: drop every other broken one now.

    The web pool does not test a connection at each checkout (a round trip
    per request, 15% of a reset's throughput), so after a database restart
    its idle connections are all dead; checking them at the first failure
    costs that one request, not one per pooled connection.
    """
    services().pool.check()


def client_ip() -> str:
    # ProxyFix (configured from AUTHSVC_TRUSTED_PROXIES) has already rewritten
    # remote_addr when the app sits behind trusted proxies.
    return request.remote_addr or "unknown"


def bearer_token_matches(expected: str) -> bool:
    """Whether the request carries `Authorization: Bearer <expected>` (constant-time)."""
    scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        presented.strip().encode("utf-8", "surrogateescape"), expected.encode()
    )


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
