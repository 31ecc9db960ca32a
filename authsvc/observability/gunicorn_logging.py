"""gunicorn's logger, speaking authsvc's JSON lines on stderr (`authsvc serve`, `authsvc dev`).

gunicorn writes its own lines ("Booting worker …") in a text format of its
own and access lines to stdout; this class gives both the shape every
authsvc line has (authsvc.logs) on the one stream the app logs to. Access
lines carry the path without its query string, and gunicorn's own lines
about malformed requests lose theirs, so no ?token= reaches a log.
"""

from __future__ import annotations

import datetime
import logging
import sys
from typing import Any

from gunicorn.glogging import Logger

from authsvc.observability.log_redaction import QueryStringFilter
from authsvc.observability.logs import JsonFormatter, log_event


class JsonGunicornLogger(Logger):  # type: ignore[misc]  # gunicorn ships no type hints
    """gunicorn.error and gunicorn.access as JSON lines on stderr."""

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        # "Invalid request from ip=…: Invalid HTTP request line: 'GET /verify?token=…'"
        self.error_log.addFilter(QueryStringFilter())
        for log in (self.error_log, self.access_log):
            for handler in log.handlers:
                if getattr(handler, "_gunicorn", False):  # the ones gunicorn made, not ours
                    handler.setFormatter(JsonFormatter())
                    if isinstance(handler, logging.StreamHandler) and handler.stream is sys.stdout:
                        handler.setStream(sys.stderr)

    def access(self, resp: Any, req: Any, environ: dict[str, Any],
               request_time: datetime.timedelta) -> None:
        """One `http_request` event per response (gunicorn's format string is not used)."""
        if not self.access_log_enabled:
            return
        status = resp.status
        if isinstance(status, str):
            status = status.split(None, 1)[0]
        sent = getattr(resp, "sent", None)
        log_event(
            self.access_log,
            "http_request",
            remote=environ.get("REMOTE_ADDR", "-"),
            method=environ.get("REQUEST_METHOD"),
            path=environ.get("PATH_INFO"),  # never QUERY_STRING: links carry tokens there
            status=int(status),
            bytes=sent,
            duration_ms=round(request_time.total_seconds() * 1000, 1),
        )
