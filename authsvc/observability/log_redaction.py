"""Query strings out of server log lines: links carry tokens there (`?token=`).

gunicorn and aiohttp quote a malformed request line whole in their own
lines ("Invalid HTTP request line: 'GET /verify?token=… HTTP/1.1 x'"); the
filters here keep the path and drop everything from the `?` on.
"""

from __future__ import annotations

import logging
import re

_QUERY = re.compile(r"\?[^\s'\"]*")
REDACTED = "?[query removed]"


def without_query_strings(text: str) -> str:
    """`text` with every query string (from `?` to the next space or quote) replaced."""
    return _QUERY.sub(REDACTED, text)


class QueryStringFilter(logging.Filter):
    """Rewrites a record's message, and drops its traceback text, when they quote a query."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = without_query_strings(message)
        if redacted != message:
            record.msg, record.args = redacted, ()
        if record.exc_info and record.exc_info[1] is not None:
            text = str(record.exc_info[1])
            if without_query_strings(text) != text:
                # The exception's own text quotes the request: keep its type only.
                record.error = type(record.exc_info[1]).__name__
                record.exc_info, record.exc_text = None, None
        return True
