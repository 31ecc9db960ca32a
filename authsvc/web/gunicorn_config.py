"""gunicorn hooks for the web app (`authsvc serve`, `authsvc dev`), loaded by `--config`.

A body the app refuses unread (413 for its size, 401 or 429 decided from the
headers) is drained by gunicorn before the connection is kept alive, but only
up to 64 KiB: past that gunicorn drops the connection after answering
`Connection: keep-alive`, and a client that reuses it (the dev front's pool
does) gets a reset on its next, possibly unrelated, request. A request whose
body may be larger than that is therefore answered with `Connection: close`
whatever the app does with it; the app never accepts such a body anyway.
"""

from __future__ import annotations

import json
from typing import Any

from gunicorn import util

from authsvc.problem_documents import UNREADABLE_REQUEST_DETAIL, problem_document
from authsvc.web.app import MAX_BODY_BYTES

# What gunicorn (27) reads of an unread body before keeping a connection alive.
GUNICORN_DRAIN_BYTES = 64 * 1024


def body_may_outlast_the_drain(headers: list[tuple[str, str]]) -> bool:
    """Whether a request's body may be more than gunicorn drains after an unread answer."""
    for name, value in headers:
        if name == "TRANSFER-ENCODING":
            return True  # chunked: no length to go by
        if name == "CONTENT-LENGTH":
            return not value.isdigit() or int(value) > min(MAX_BODY_BYTES, GUNICORN_DRAIN_BYTES)
    return False


def pre_request(worker: Any, req: Any) -> None:
    """Close the connection after a request whose body the app might leave unread."""
    if body_may_outlast_the_drain(req.headers):
        req.force_close()


# Codes for the answers gunicorn makes itself, to requests it cannot parse.
_PROTOCOL_CODES = {414: "uri_too_long", 431: "headers_too_large", 403: "forbidden",
                   417: "expectation_failed", 500: "internal_error", 501: "not_implemented"}


def protocol_problem(status: int, reason: str) -> bytes:
    """The whole HTTP answer to a request gunicorn could not parse: problem+json, then close.

    The detail is generic on purpose: gunicorn's own message quotes the
    request line, which may carry a link's ?token=.
    """
    code = _PROTOCOL_CODES.get(status, "invalid_request")
    body = json.dumps(problem_document(status, code, reason, UNREADABLE_REQUEST_DETAIL)).encode()
    head = (f"HTTP/1.1 {status} {reason}\r\nConnection: close\r\n"
            "Content-Type: application/problem+json\r\nCache-Control: no-store\r\n"
            f"Content-Length: {len(body)}\r\n\r\n")
    return head.encode("latin-1") + body


def _write_problem(sock: Any, status_int: int, reason: str, _mesg: str) -> None:
    util.write_nonblock(sock, protocol_problem(status_int, reason))


def post_worker_init(worker: Any) -> None:
    """gunicorn answers unparsable requests (bad request line, 414, 431) itself, in HTML.

    Its workers write those answers through gunicorn.util.write_error, looked
    up at call time; this worker's copy of the module writes problem+json
    instead, so every error a client of /api/v1 can get reads the same.
    """
    util.write_error = _write_problem
