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
# The 415 of a JSON body sent as anything else (the API's and the inbox's).
NOT_JSON_DETAIL = "Send the body as Content-Type: application/json."


def declares_json(mimetype: str) -> bool:
    """Whether a request's media type (without parameters) says its body is JSON.

    Required of every JSON body, not only to read it right: a web page can post
    text/plain or a form anywhere without asking, while a JSON body needs a
    CORS preflight that neither server grants.
    """
    mimetype = mimetype.lower()
    return mimetype == "application/json" or (
        mimetype.startswith("application/") and mimetype.endswith("+json")
    )


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
