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

from typing import Any

from authsvc.flask_app import MAX_BODY_BYTES

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
