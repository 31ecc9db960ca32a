"""The OpenAPI 3.1 document of the /_inbox API, served at GET /_inbox/openapi.json."""

from __future__ import annotations

from typing import Any

from authsvc.inbox.params import (
    DEFAULT_SETTLE_SECONDS,
    DEFAULT_TIMEOUT_SECONDS,
    MAX_FILTER_LENGTH,
    MAX_ID,
    MAX_LISTED,
    MAX_SETTLE_SECONDS,
    MAX_WAIT_SECONDS,
)
from authsvc.inbox.scopes import MAX_SCOPE_LENGTH

_JSON = "application/json"
_PROBLEM = "application/problem+json"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(description: str, schema: dict[str, Any], media: str = _JSON) -> dict[str, Any]:
    return {"description": description, "content": {media: {"schema": schema}}}


def _problem(description: str) -> dict[str, Any]:
    return _json(description, _ref("Problem"), _PROBLEM)


def _query(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "description": description,
            "schema": schema}


def _seconds(name: str, description: str, default: float, maximum: float) -> dict[str, Any]:
    schema = {"type": "number", "minimum": 0, "maximum": maximum, "default": default}
    return _query(name, description, schema)


_SCOPE = {
    "name": "scope", "in": "path", "required": True,
    "description": "Case-insensitive; the tag after the last + of the recipient's local part.",
    "schema": {"type": "string", "minLength": 1, "maxLength": MAX_SCOPE_LENGTH},
}
_MESSAGE_ID = {"name": "id", "in": "path", "required": True,
               "schema": {"type": "integer", "minimum": 0}}
_SINCE = _query("since", "Only messages newer than this message id.",
                {"type": "integer", "minimum": 0, "maximum": MAX_ID, "default": 0})
_FILTERS = [
    _query(name, description, {"type": "string", "maxLength": MAX_FILTER_LENGTH})
    for name, description in (
        ("to", "Case-insensitive substring of an envelope recipient."),
        ("subject", "Case-insensitive substring of the subject."),
        ("q", "Case-insensitive substring of the subject, sender, recipients or text part."),
    )
]
_BAD_REQUEST = _problem("A malformed parameter or scope name (code invalid_request).")
_UNAUTHORIZED = _problem(
    "AUTHSVC_TEST_INBOX_TOKEN is set and the bearer token is missing or wrong."
)
_TOO_LARGE = _problem(
    "A request body too large to buffer (code payload_too_large); the connection closes."
)
_BUSY = _problem(
    "The database is unavailable (code service_unavailable, Retry-After: 2). Retry."
)


def _answers(
    own: dict[str, Any], *, parameters: bool = True, database: bool = True
) -> dict[str, Any]:
    """An operation's own answers, then those of the server's door: 401 without the token and
    413 for an oversized body on every route, 400 where it reads parameters, 503 where it
    queries the database."""
    answers = dict(own)
    if parameters:
        answers["400"] = _BAD_REQUEST
    answers["401"] = _UNAUTHORIZED
    answers["413"] = _TOO_LARGE
    if database:
        answers["503"] = _BUSY
    return answers


_SCHEMAS: dict[str, Any] = {
    "Problem": {
        "type": "object",
        "required": ["type", "title", "status", "code", "detail"],
        "properties": {
            "type": {"type": "string"}, "title": {"type": "string"},
            "status": {"type": "integer"}, "code": {"type": "string"},
            "detail": {"type": "string"},
        },
    },
    "Message": {
        "type": "object",
        "required": ["id", "scope", "to", "from", "subject", "received_at", "message_id", "text",
                     "html", "links", "headers", "size", "body_omitted"],
        "properties": {
            "id": {"type": "integer"},
            "scope": {"type": "string"},
            "to": {"type": "array", "items": {"type": "string"},
                   "description": "Envelope recipients in this scope."},
            "from": {"type": ["string", "null"]},
            "subject": {"type": ["string", "null"]},
            "received_at": {"type": "string", "format": "date-time"},
            "message_id": {"type": ["string", "null"]},
            "text": {"type": ["string", "null"]},
            "html": {"type": ["string", "null"]},
            "links": {"type": "array", "items": {"type": "string"}},
            "headers": {"type": "object",
                        "additionalProperties": {"type": "array", "items": {"type": "string"}}},
            "size": {"type": "integer", "description": "Bytes of the raw message."},
            "body_omitted": {
                "type": "boolean",
                "description": "true: text and html were left out of this answer (too large for "
                "its byte budget, or bodies=0); GET the message by id for them.",
            },
        },
    },
    "MessagePage": {
        "type": "object",
        "required": ["messages", "more", "next_since"],
        "properties": {
            "messages": {"type": "array", "items": _ref("Message")},
            "more": {"type": "boolean", "description": "More messages follow this page."},
            "next_since": {"type": "integer", "description": "Pass as since= for the next page."},
        },
    },
    "Scope": {
        "type": "object",
        "required": ["scope", "messages", "last_id", "last_subject", "last_received_at"],
        "properties": {
            "scope": {"type": "string"}, "messages": {"type": "integer"},
            "last_id": {"type": "integer"}, "last_subject": {"type": ["string", "null"]},
            "last_received_at": {"type": "string", "format": "date-time"},
        },
    },
}


def openapi_document() -> dict[str, Any]:
    """The whole document."""
    scope_path = [_SCOPE]
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "authsvc test inbox",
            "version": "1",
            "description": "Scoped SMTP test inbox for QA (SPEC §8). Never in production.",
        },
        "servers": [{"url": "/_inbox"}],
        "components": {
            "schemas": _SCHEMAS,
            "securitySchemes": {"inboxToken": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{}, {"inboxToken": []}],
        "paths": {
            "/scopes": {
                "post": {
                    "operationId": "createScope",
                    "summary": "A fresh, unguessable scope and the address that lands in it.",
                    "responses": _answers({
                        "201": _json("Created.", {
                            "type": "object", "required": ["scope", "address"],
                            "properties": {"scope": {"type": "string"},
                                           "address": {"type": "string"}},
                        }),
                    }, parameters=False, database=False),
                },
                "get": {
                    "operationId": "listScopes",
                    "summary": "Recent scopes, the most recently written first.",
                    "parameters": [_query("limit", "At most this many.",
                                          {"type": "integer", "minimum": 1, "maximum": 500,
                                           "default": 50})],
                    "responses": _answers({
                        "200": _json("The scopes.", {
                            "type": "object", "required": ["scopes"],
                            "properties": {"scopes": {"type": "array", "items": _ref("Scope")}},
                        }),
                    }),
                },
            },
            "/scopes/{scope}/messages": {
                "get": {
                    "operationId": "listMessages",
                    "summary": "Messages oldest first, waiting up to `wait` s for at least `min`.",
                    "parameters": [
                        *scope_path,
                        _seconds("wait", "Seconds to wait for `min` messages.", 0,
                                 MAX_WAIT_SECONDS),
                        _query("min", "How many messages to wait for.",
                               {"type": "integer", "minimum": 0, "maximum": MAX_LISTED,
                                "default": 1}),
                        _SINCE,
                        _query("limit", "Page size.", {"type": "integer", "minimum": 1,
                                                       "maximum": MAX_LISTED,
                                                       "default": MAX_LISTED}),
                        _query("bodies", "0 leaves text and html out of every message.",
                               {"type": "string", "enum": ["1", "0", "true", "false"],
                                "default": "1"}),
                        *_FILTERS,
                    ],
                    "responses": _answers({"200": _json("A page.", _ref("MessagePage"))}),
                },
            },
            "/scopes/{scope}/expect-one": {
                "get": {
                    "operationId": "expectOne",
                    "summary": "Exactly one message within `timeout`, none more within `settle`.",
                    "parameters": [
                        *scope_path,
                        _seconds("timeout", "Seconds to wait for a first message.",
                                 DEFAULT_TIMEOUT_SECONDS, MAX_WAIT_SECONDS),
                        _seconds("settle", "Seconds after its arrival to watch for a second.",
                                 DEFAULT_SETTLE_SECONDS, MAX_SETTLE_SECONDS),
                        _SINCE,
                        *_FILTERS,
                    ],
                    "responses": _answers({
                        "200": _json("Exactly one.", {
                            "type": "object", "required": ["message"],
                            "properties": {"message": _ref("Message")},
                        }),
                        "408": _problem("None arrived (code no_message, count 0)."),
                        "409": _json("More than one.", {
                            "type": "object", "required": ["count", "messages", "duplicates"],
                            "properties": {
                                "count": {"type": "integer"},
                                "messages": {"type": "array", "items": _ref("Message")},
                                "duplicates": {
                                    "type": "array",
                                    "description": "Groups of ids sharing a Message-ID "
                                    "(re-sends of one job).",
                                    "items": {"type": "array", "items": {"type": "integer"}},
                                },
                            },
                        }),
                    }),
                },
            },
            "/scopes/{scope}/messages/{id}": {
                "get": {
                    "operationId": "getMessage",
                    "summary": "One message, bodies included.",
                    "parameters": [*scope_path, _MESSAGE_ID],
                    "responses": _answers({
                        "200": _json("The message.", {
                            "type": "object", "required": ["message"],
                            "properties": {"message": _ref("Message")},
                        }),
                        "404": _problem("No such message in this scope."),
                    }),
                },
            },
            "/scopes/{scope}/messages/{id}/raw": {
                "get": {
                    "operationId": "getRawMessage",
                    "summary": "The message exactly as received.",
                    "parameters": [*scope_path, _MESSAGE_ID],
                    "responses": _answers({
                        "200": {"description": "The bytes.",
                                "content": {"message/rfc822": {"schema": {"type": "string"}}}},
                        "404": _problem("No such message in this scope."),
                    }),
                },
            },
            "/scopes/{scope}": {
                "delete": {
                    "operationId": "emptyScope",
                    "summary": "Empty the scope; later mail still lands in it.",
                    "parameters": scope_path,
                    "responses": _answers({"204": {"description": "Emptied."}}),
                },
            },
            "/events": {
                "get": {
                    "operationId": "scopeEvents",
                    "summary": "Server-sent events: `scopes` with the recent scopes, again "
                    "whenever they change.",
                    "description": "The 200 is sent before the first query, so the database "
                    "being unavailable never answers 503 here: the stream ends instead, and "
                    "EventSource reconnects after the stream's `retry`.",
                    "responses": _answers({
                        "200": {"description": "An event stream.",
                                "content": {"text/event-stream": {"schema": {"type": "string"}}}},
                    }, parameters=False, database=False),
                },
            },
            "/openapi.json": {
                "get": {
                    "operationId": "openapi",
                    "summary": "This document.",
                    "responses": _answers({"200": _json("The document.", {"type": "object"})},
                                          parameters=False, database=False),
                },
            },
        },
    }
