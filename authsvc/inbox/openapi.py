"""The OpenAPI 3.1 document of the /_inbox API, served at GET /_inbox/openapi.json."""

from __future__ import annotations

from typing import Any

from authsvc.accounts.tokens import PURPOSES
from authsvc.inbox.faults import MAX_COUNT as FAULT_MAX_COUNT
from authsvc.inbox.faults import MAX_TEXT as FAULT_MAX_TEXT
from authsvc.inbox.faults import REPLY_PATTERN as FAULT_REPLY_PATTERN
from authsvc.inbox.link_states import LABELS
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
from authsvc.inbox.search import DEFAULT_PAGE as SEARCH_DEFAULT_PAGE
from authsvc.inbox.search import MAX_PAGE as SEARCH_MAX_PAGE
from authsvc.inbox.search import MAX_QUERY_LENGTH
from authsvc.inbox.search import SLOTS as SEARCH_SLOTS

_JSON = "application/json"
_PROBLEM = "application/problem+json"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(description: str, schema: dict[str, Any], media: str = _JSON) -> dict[str, Any]:
    return {"description": description, "content": {media: {"schema": schema}}}


def _problem(description: str, schema: str) -> dict[str, Any]:
    return _json(description, _ref(schema), _PROBLEM)


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
# Each error answer names the codes it can carry, so a generated client can
# narrow on `code` (TypeScript: a union of string literals).
_PROBLEM_CODES = {
    "InvalidRequestProblem": ["invalid_request"],
    "UnauthorizedProblem": ["unauthorized"],
    "NotFoundProblem": ["not_found"],
    "PayloadTooLargeProblem": ["payload_too_large"],
    "UnsupportedMediaTypeProblem": ["unsupported_media_type"],
    "ServiceUnavailableProblem": ["service_unavailable"],
    "SearchUnavailableProblem": ["service_unavailable", "search_timeout", "search_busy"],
}
_BAD_REQUEST = _problem("A malformed parameter, body or scope name (code invalid_request).",
                        "InvalidRequestProblem")
_UNAUTHORIZED = _problem(
    "AUTHSVC_TEST_INBOX_TOKEN is set and the bearer token is missing or wrong.",
    "UnauthorizedProblem",
)
_TOO_LARGE = _problem(
    "A request body too large to buffer (code payload_too_large); the connection closes.",
    "PayloadTooLargeProblem",
)
_BUSY = _problem(
    "The database is unavailable (code service_unavailable, Retry-After: 2). Retry.",
    "ServiceUnavailableProblem",
)
_NOT_FOUND = _problem("No such message in this scope (code not_found).", "NotFoundProblem")


def _answers(
    own: dict[str, Any], *, parameters: bool = True, database: bool = True
) -> dict[str, Any]:
    """An operation's own answers, then those of the server's door: 401 without the token and
    413 for an oversized body on every route, 400 where it reads parameters, 503 where it
    queries the database."""
    answers = dict(own)
    if parameters:
        answers.setdefault("400", _BAD_REQUEST)
    answers["401"] = _UNAUTHORIZED
    answers["413"] = _TOO_LARGE
    if database:
        answers.setdefault("503", _BUSY)
    return answers


def _object(required: list[str], properties: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"type": "object", "required": required, "properties": properties, **more}


_PROBLEM_FIELDS = {
    "type": {"type": "string"}, "title": {"type": "string"},
    "status": {"type": "integer"}, "code": {"type": "string"},
    "detail": {"type": "string"},
}
_SCHEMAS: dict[str, Any] = {
    "Problem": _object(["type", "title", "status", "code", "detail"], _PROBLEM_FIELDS,
                       description="RFC 9457 problem details with a stable `code`."),
    **{
        name: {"allOf": [_ref("Problem"), {"type": "object", "properties": {
            "code": {"type": "string", "enum": codes}}}]}
        for name, codes in _PROBLEM_CODES.items()
    },
    "NoMessageProblem": {"allOf": [_ref("Problem"), _object(
        ["count", "messages", "duplicates"],
        {"code": {"type": "string", "enum": ["no_message"]},
         "count": {"type": "integer", "enum": [0]},
         "messages": {"type": "array", "maxItems": 0, "items": _ref("Message")},
         "duplicates": {"type": "array", "maxItems": 0,
                        "items": {"type": "array", "items": {"type": "integer"}}}},
    )]},
    "LinkState": _object(["url", "purpose", "state"], {
        "url": {"type": "string"},
        "purpose": {"type": ["string", "null"], "enum": [*PURPOSES, None],
                    "description": "Which kind of authsvc link; null when the token is invalid."},
        "state": {"type": "string", "enum": list(LABELS),
                  "description": "What the link would do if clicked now; reading it "
                  "consumes nothing."},
    }, description="An authsvc link of the message (AUTHSVC_BASE_URL, with a token)."),
    "Message": _object(
        ["id", "scope", "to", "from", "subject", "received_at", "message_id", "text",
         "html", "links", "headers", "size", "body_omitted", "code", "link_states"],
        {
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
                "its byte budget, bodies=0, or a search); GET the message by id for them.",
            },
            "code": {"type": ["string", "null"], "pattern": "^[0-9]{6}$",
                     "description": "The 6-digit code of the text part, or null."},
            "link_states": {"type": "array", "items": _ref("LinkState"),
                            "description": "Each authsvc link's state, read when answering."},
        },
    ),
    "OneMessage": _object(["message"], {"message": _ref("Message")}),
    "MessagePage": _object(["messages", "more", "next_since"], {
        "messages": {"type": "array", "items": _ref("Message")},
        "more": {"type": "boolean", "description": "More messages follow this page."},
        "next_since": {"type": "integer", "description": "Pass as since= for the next page."},
    }),
    "ExpectOneConflict": _object(["count", "messages", "duplicates"], {
        "count": {"type": "integer", "minimum": 2},
        "messages": {"type": "array", "items": _ref("Message")},
        "duplicates": {
            "type": "array",
            "description": "Groups of ids sharing a Message-ID (re-sends of one job).",
            "items": {"type": "array", "items": {"type": "integer"}},
        },
    }, description="More than one message arrived."),
    "NewScope": _object(["scope", "address"], {
        "scope": {"type": "string"}, "address": {"type": "string"}}),
    "Scope": _object(["scope", "messages", "last_id", "last_subject", "last_received_at"], {
        "scope": {"type": "string"}, "messages": {"type": "integer"},
        "last_id": {"type": "integer"}, "last_subject": {"type": ["string", "null"]},
        "last_received_at": {"type": "string", "format": "date-time"},
    }),
    "ScopeList": _object(["scopes"], {"scopes": {"type": "array", "items": _ref("Scope")}}),
    "FaultRequest": _object(["reply"], {
        "reply": {"type": "string", "pattern": FAULT_REPLY_PATTERN,
                  "maxLength": 4 + FAULT_MAX_TEXT,
                  "description": "One SMTP reply line: a 4xx or 5xx code, then printable "
                  "ASCII, e.g. \"451 4.3.0 Try again later\"."},
        "count": {"type": "integer", "minimum": 1, "maximum": FAULT_MAX_COUNT, "default": 1,
                  "description": "How many of the next deliveries to the scope get it."},
    }, additionalProperties=False),
    "Fault": _object(["scope", "reply", "count"], {
        "scope": {"type": "string"}, "reply": {"type": "string"},
        "count": {"type": "integer", "description": "Deliveries it will answer."},
    }),
    "OpenApiDocument": {"type": "object", "description": "An OpenAPI 3.1 document (this one)."},
    "SearchPage": _object(["query", "messages", "more", "next_older_than"], {
        "query": {"type": "string"},
        "messages": {"type": "array", "items": _ref("Message"),
                     "description": "Newest first, bodies omitted."},
        "more": {"type": "boolean"},
        "next_older_than": {"type": ["integer", "null"],
                            "description": "Pass as older_than= for the next page."},
    }),
}


_TAGS = [
    {"name": "scopes", "description": "Fresh scopes, recent scopes, emptying one."},
    {"name": "messages", "description": "Reading what arrived: long polls, expect-one, one "
     "message, its raw bytes, deleting it."},
    {"name": "faults", "description": "Faults on demand: the SMTP sink refuses a scope's next "
     "deliveries with a chosen reply."},
    {"name": "search", "description": "Search across every scope."},
    {"name": "live", "description": "Server-sent events for the pages (and anyone)."},
    {"name": "document", "description": "This document."},
]
_SEARCH_LANGUAGE = (
    "Terms, all of which must match: `to:`, `from:` and `subject:` (a case-insensitive "
    "substring of an envelope recipient, the From header, the subject), `after:` and "
    "`before:` (a date, meaning its midnight UTC, or an ISO 8601 time; a time without a zone "
    "is UTC; after: is inclusive, before: exclusive), and free words (a substring of the "
    "subject, sender, recipients, scope or text part). Quote a value with spaces: "
    "`subject:\"reset your\"`. `%` and `_` match themselves. A prefix that is not one of "
    "these (`https:`) is part of a free word. A malformed term (an unclosed quote, an empty "
    "value, a date that is not one) is 400 naming it."
)


def _op(operation_id: str, tag: str, summary: str, responses: dict[str, Any],
        **more: Any) -> dict[str, Any]:
    return {"operationId": operation_id, "tags": [tag], "summary": summary,
            "responses": responses, **more}


def openapi_document() -> dict[str, Any]:
    """The whole document."""
    scope_path = [_SCOPE]
    message_path = [_SCOPE, _MESSAGE_ID]
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "authsvc test inbox",
            "version": "1",
            "description": "Scoped SMTP test inbox for QA (SPEC §8, §16). Never in production.",
        },
        "servers": [{"url": "/_inbox"}],
        "tags": _TAGS,
        "components": {
            "schemas": _SCHEMAS,
            "securitySchemes": {"inboxToken": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{}, {"inboxToken": []}],
        "paths": {
            "/scopes": {
                "post": _op(
                    "createScope", "scopes",
                    "A fresh, unguessable scope and the address that lands in it.",
                    _answers({"201": _json("Created.", _ref("NewScope"))},
                             parameters=False, database=False),
                ),
                "get": _op(
                    "listScopes", "scopes", "Recent scopes, the most recently written first.",
                    _answers({"200": _json("The scopes.", _ref("ScopeList"))}),
                    parameters=[_query("limit", "At most this many.",
                                       {"type": "integer", "minimum": 1, "maximum": 500,
                                        "default": 50})],
                ),
            },
            "/scopes/{scope}": {
                "delete": _op(
                    "emptyScope", "scopes", "Empty the scope; later mail still lands in it.",
                    _answers({"204": {"description": "Emptied."}}), parameters=scope_path,
                ),
            },
            "/scopes/{scope}/messages": {
                "get": _op(
                    "listMessages", "messages",
                    "Messages oldest first, waiting up to `wait` s for at least `min`.",
                    _answers({"200": _json("A page.", _ref("MessagePage"))}),
                    parameters=[
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
                ),
            },
            "/scopes/{scope}/expect-one": {
                "get": _op(
                    "expectOne", "messages",
                    "Exactly one message within `timeout`, none more within `settle`.",
                    _answers({
                        "200": _json("Exactly one.", _ref("OneMessage")),
                        "408": _problem("None arrived (code no_message, count 0).",
                                        "NoMessageProblem"),
                        "409": _json("More than one.", _ref("ExpectOneConflict")),
                    }),
                    parameters=[
                        *scope_path,
                        _seconds("timeout", "Seconds to wait for a first message.",
                                 DEFAULT_TIMEOUT_SECONDS, MAX_WAIT_SECONDS),
                        _seconds("settle", "Seconds after its arrival to watch for a second.",
                                 DEFAULT_SETTLE_SECONDS, MAX_SETTLE_SECONDS),
                        _SINCE,
                        *_FILTERS,
                    ],
                ),
            },
            "/scopes/{scope}/messages/{id}": {
                "get": _op(
                    "getMessage", "messages", "One message, bodies included.",
                    _answers({"200": _json("The message.", _ref("OneMessage")),
                              "404": _NOT_FOUND}),
                    parameters=message_path,
                ),
                "delete": _op(
                    "deleteMessage", "messages", "Delete one message of the scope.",
                    _answers({"204": {"description": "Deleted."}, "404": _NOT_FOUND}),
                    parameters=message_path,
                ),
            },
            "/scopes/{scope}/messages/{id}/raw": {
                "get": _op(
                    "getRawMessage", "messages", "The message exactly as received.",
                    _answers({
                        "200": {"description": "The bytes.",
                                "content": {"message/rfc822": {"schema": {"type": "string",
                                                                           "format": "binary"}}}},
                        "404": _NOT_FOUND,
                    }),
                    parameters=message_path,
                ),
            },
            "/scopes/{scope}/faults": {
                "post": _op(
                    "setFault", "faults",
                    "The SMTP sink answers the scope's next `count` deliveries with `reply`.",
                    _answers({
                        "201": _json("Set (replacing any fault the scope had).", _ref("Fault")),
                        "415": _problem(
                            "The body is not sent as Content-Type: application/json (code "
                            "unsupported_media_type); nothing is set. A web page elsewhere "
                            "can post a form or text/plain without asking, never JSON.",
                            "UnsupportedMediaTypeProblem"),
                    }),
                    description="Each refused RCPT TO for the scope uses up one. A 4xx reply "
                    "makes a sender retry; a 5xx one makes it give up. The reply is one line: "
                    "a CR or LF anywhere is 400, as is a count over "
                    f"{FAULT_MAX_COUNT}.",
                    parameters=scope_path,
                    requestBody={"required": True, "content": {
                        _JSON: {"schema": _ref("FaultRequest")}}},
                ),
                "delete": _op(
                    "clearFaults", "faults", "The scope's deliveries are stored again.",
                    _answers({"204": {"description": "Cleared."}}), parameters=scope_path,
                ),
            },
            "/search": {
                "get": _op(
                    "search", "search",
                    "Messages of every scope matching a query, newest first, paged.",
                    _answers({
                        "200": _json("A page of matches.", _ref("SearchPage")),
                        "503": _problem(
                            "The database is unavailable (service_unavailable, Retry-After: "
                            "2), the search ran past its time bound (search_timeout: "
                            f"narrow it), or {SEARCH_SLOTS} other searches kept every search "
                            "slot for a second (search_busy, Retry-After: 1).",
                            "SearchUnavailableProblem"),
                    }),
                    description=_SEARCH_LANGUAGE,
                    parameters=[
                        _query("q", "The query.", {"type": "string",
                                                   "maxLength": MAX_QUERY_LENGTH,
                                                   "default": ""}),
                        _query("limit", "Page size.", {"type": "integer", "minimum": 1,
                                                       "maximum": SEARCH_MAX_PAGE,
                                                       "default": SEARCH_DEFAULT_PAGE}),
                        _query("older_than", "Only messages older than this id (the last "
                               "page's next_older_than).",
                               {"type": "integer", "minimum": 1, "maximum": MAX_ID}),
                    ],
                ),
            },
            "/events": {
                "get": _op(
                    "events", "live",
                    "Server-sent events: `scopes` (no query), `messages` (?scope=, with its "
                    "filters) or `message` (?scope=&message=), now and whenever they change.",
                    _answers({
                        "200": {"description": "An event stream. Each event's data is JSON: "
                                "`scopes` a ScopeList; `messages` {scope, messages (Message, "
                                "newest first, bodies omitted), more, duplicates}; `message` "
                                "{message: Message or null once deleted}, sent again when a "
                                "link's state changes.",
                                "content": {"text/event-stream": {"schema": {"type": "string"}}}},
                    }, database=False),
                    description="The 200 is sent before the first query, so the database "
                    "being unavailable never answers 503 here: the stream ends instead, and "
                    "EventSource reconnects after the stream's `retry`.",
                    parameters=[
                        _query("scope", "Stream this scope's messages.",
                               {"type": "string", "minLength": 1,
                                "maxLength": MAX_SCOPE_LENGTH}),
                        _query("message", "With scope: stream this one message.",
                               {"type": "integer", "minimum": 0}),
                        *_FILTERS,
                    ],
                ),
            },
            "/openapi.json": {
                "get": _op(
                    "openapi", "document", "This document.",
                    _answers({"200": _json("The document.", _ref("OpenApiDocument"))},
                             parameters=False, database=False),
                ),
            },
        },
    }
