"""RFC 9457 problem documents, one shape for every JSON error the service answers.

The JSON API (authsvc/web/api/problems.py) and the test inbox's HTTP server
(authsvc/inbox/server.py) both build their bodies here, so a client reads
`type` the same way everywhere: `urn:authsvc:problem:<code>`, beside the
same `code`.
"""

from __future__ import annotations

from typing import Any

# What the servers answer, themselves, to a request they cannot parse (gunicorn's
# hook, the inbox server's): nothing of the request, which may carry ?token=.
UNREADABLE_REQUEST_DETAIL = "The request could not be read as HTTP; nothing was done."


def problem_type(code: str) -> str:
    """The problem's `type` URI for a stable `code`."""
    return f"urn:authsvc:problem:{code}"


def problem_document(
    status: int, code: str, title: str, detail: str, **extra: Any
) -> dict[str, Any]:
    """A problem+json body; `extra` adds members (field errors, counts)."""
    body = {
        "type": problem_type(code),
        "title": title,
        "status": status,
        "detail": detail,
        "code": code,
    }
    return {**body, **extra}
