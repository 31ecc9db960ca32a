"""The OpenAPI 3.1 document for /api/v1, built from the same specs the parser enforces."""

from __future__ import annotations

from typing import Any

from authsvc.api.problems import API_PREFIX, TITLES, problem_type
from authsvc.api.requests import (
    IDEMPOTENCY_HEADER,
    LINK_REQUEST,
    PASSWORD_RESET_CONFIRM,
    SESSION,
    SIGNUP,
    VERIFICATION_CONFIRM,
    BodySpec,
    Field,
)
from authsvc.idempotency import MAX_KEY_LENGTH
from authsvc.passwords import MIN_LENGTH as MIN_PASSWORD_LENGTH

PROBLEM_JSON = "application/problem+json"
# Failures every keyed POST can answer with, beside its own (status → codes).
COMMON_POST_PROBLEMS: dict[int, list[str]] = {
    400: ["invalid_request"],
    401: ["unauthorized"],
    409: ["idempotency_in_progress"],
    413: ["payload_too_large"],
    415: ["unsupported_media_type"],
    422: ["idempotency_key_reused"],
    429: ["rate_limited"],
    503: ["service_unavailable"],
}
_FIELD_DESCRIPTIONS = {
    "email": "One plain address (no display name, angle brackets or comments); the server"
    " trims it, applies Unicode NFC and lower-cases it.",
    "password": "The account's password.",
    "new_password": "8-256 characters; common passwords and the email itself are refused"
    " (422 weak_password, also for fewer than 8 characters).",
    "token": "The token from the emailed link; anything malformed is 400 invalid_token.",
    "url": "Where the emailed link leads; must be on the app's allowlist"
    " (400 redirect_not_allowed).",
}
_EXAMPLES = {
    "email": "ann@example.com",
    "password": "correct horse battery",
    "new_password": "correct horse battery",
    "url": "https://app.example.com/welcome",
}


def _field_schema(field: Field) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": ["string", "null"] if field.nullable else "string"}
    if field.kind == "new_password":
        schema["minLength"] = MIN_PASSWORD_LENGTH
    if field.max_length is not None:
        schema["maxLength"] = field.max_length
    if field.kind == "email":
        schema["format"] = "email"  # the server's parser is stricter: a plain addr-spec
    schema["description"] = _FIELD_DESCRIPTIONS[field.kind]
    if field.kind in _EXAMPLES:
        schema["examples"] = [_EXAMPLES[field.kind]]
    return schema


def body_schema(spec: BodySpec) -> dict[str, Any]:
    """JSON Schema for a request body: exactly the members the parser accepts."""
    return {
        "type": "object",
        "additionalProperties": False,
        "required": [f.name for f in spec.fields if f.required],
        "properties": {f.name: _field_schema(f) for f in spec.fields},
    }


def _problem(
    description: str, codes: list[str], headers: dict[str, Any] | None = None
) -> dict[str, Any]:
    schema = {
        "allOf": [
            {"$ref": "#/components/schemas/Problem"},
            {"type": "object", "properties": {"code": {"enum": codes}}},
        ]
    }
    response: dict[str, Any] = {
        "description": description,
        "content": {PROBLEM_JSON: {"schema": schema}},
    }
    if headers:
        response["headers"] = headers
    return response


_RETRY_AFTER: dict[str, Any] = {"Retry-After": {"$ref": "#/components/headers/RetryAfter"}}
_HEADERS_BY_STATUS: dict[int, dict[str, Any]] = {
    401: {
        "WWW-Authenticate": {"schema": {"type": "string"}, "description": 'Bearer realm="authsvc"'}
    },
    409: _RETRY_AFTER,
    429: _RETRY_AFTER,
    503: _RETRY_AFTER,
}


def _post(
    summary: str,
    spec: BodySpec,
    success: tuple[int, str, dict[str, Any]],
    problems: dict[int, list[str]],
) -> dict[str, Any]:
    status, description, schema = success
    responses: dict[str, Any] = {
        str(status): {
            "description": description,
            "headers": {"Idempotent-Replayed": {"$ref": "#/components/headers/IdempotentReplayed"}},
            "content": {"application/json": {"schema": schema}},
        }
    }
    merged = {code: list(codes) for code, codes in COMMON_POST_PROBLEMS.items()}
    for code, codes in problems.items():
        merged.setdefault(code, []).extend(c for c in codes if c not in merged.get(code, []))
    for code in sorted(merged):
        title = "; ".join(TITLES[c] for c in merged[code])
        responses[str(code)] = _problem(title, merged[code], _HEADERS_BY_STATUS.get(code))
    return {
        "summary": summary,
        "parameters": [{"$ref": "#/components/parameters/IdempotencyKey"}],
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": {"$ref": f"#/components/schemas/{spec.name}"}}
            },
        },
        "responses": responses,
    }


def _status(value: str) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["status"],
        "properties": {"status": {"const": value}},
    }


_USER = {
    "type": "object",
    "additionalProperties": False,
    "required": ["user"],
    "properties": {
        "user": {
            "type": "object",
            "additionalProperties": False,
            "required": ["id", "email", "email_verified"],
            "properties": {
                "id": {"type": "integer"},
                "email": {"type": "string"},
                "email_verified": {"const": True},
            },
        }
    },
}
_VERIFIED = {
    "type": "object",
    "additionalProperties": False,
    "required": ["email", "verified"],
    "properties": {"email": {"type": "string"}, "verified": {"const": True}},
}
_TOKEN_PROBLEMS = {400: ["invalid_token"], 410: ["token_expired", "token_superseded", "token_used"]}
_PROBLEM_SCHEMA = {
    "type": "object",
    "description": "RFC 9457 problem details; `code` is stable, `detail` is for people.",
    "required": ["type", "title", "status", "detail", "code"],
    "properties": {
        "type": {"type": "string", "description": "urn:authsvc:problem:<code>"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "code": {"type": "string", "enum": sorted(TITLES)},
        "errors": {
            "type": "array",
            "description": "Field problems, for invalid_request and redirect_not_allowed.",
            "items": {
                "type": "object",
                "required": ["pointer", "detail"],
                "properties": {
                    "pointer": {
                        "type": "string",
                        "description": "JSON pointer into the body, e.g. #/email",
                    },
                    "detail": {"type": "string"},
                },
            },
        },
    },
}
_DESCRIPTION = f"""\
JSON API for apps that embed signup verification and password resets.

Every call except this document needs `Authorization: Bearer <app key>`.
Errors are `application/problem+json` (RFC 9457) whose `code` member is
stable; `type` is `{problem_type("<code>")}`. Unknown paths answer 404
`not_found` and wrong methods 405 `method_not_allowed`, also as problems.

**Idempotent retries.** Every POST accepts `{IDEMPOTENCY_HEADER}` (1-{MAX_KEY_LENGTH}
printable ASCII characters), scoped to the app. The first outcome is stored with
the request's effects in one transaction; a repeat with the same key and body
within 24 h returns it byte for byte (with `Idempotent-Replayed: true`) and does
nothing again. Same key, different body: 422 `idempotency_key_reused`. A repeat
while the first is still running: 409 `idempotency_in_progress` at once (retry
after `Retry-After`). 429 and 5xx outcomes, and requests rejected before they
ran (401, 400 `invalid_request`, `redirect_not_allowed`, 413, 415) are not stored.
"""


def openapi_document() -> dict[str, Any]:
    """The whole document, as served at GET /api/v1/openapi.json."""
    p = API_PREFIX
    link_problems = {400: ["redirect_not_allowed"]}
    paths = {
        f"{p}/signups": {
            "post": _post(
                "Create an account and send its verification email",
                SIGNUP,
                (
                    202,
                    "Verification sent (the same answer when the email already has an account)",
                    _status("verification_sent"),
                ),
                {**link_problems, 422: ["weak_password"]},
            )
        },
        f"{p}/verifications": {
            "post": _post(
                "Send a fresh verification link",
                LINK_REQUEST,
                (202, "Accepted, whether or not the email is known", _status("accepted")),
                link_problems,
            )
        },
        f"{p}/verifications/confirm": {
            "post": _post(
                "Redeem a verification token (a contested address also needs `password`)",
                VERIFICATION_CONFIRM,
                (200, "The email is verified", _VERIFIED),
                {**_TOKEN_PROBLEMS, 422: ["password_required", "weak_password"]},
            )
        },
        f"{p}/password-resets": {
            "post": _post(
                "Send a password-reset link",
                LINK_REQUEST,
                (202, "Accepted, whether or not the email is known", _status("accepted")),
                link_problems,
            )
        },
        f"{p}/password-resets/confirm": {
            "post": _post(
                "Redeem a reset token and set a new password",
                PASSWORD_RESET_CONFIRM,
                (
                    200,
                    "Password changed; every session of the account ended",
                    _status("password_changed"),
                ),
                {**_TOKEN_PROBLEMS, 422: ["weak_password"]},
            )
        },
        f"{p}/sessions": {
            "post": _post(
                "Check an email and password (never replayed under an Idempotency-Key:"
                " the answer always reflects the current password). An address nobody"
                " has confirmed yet answers 401 exactly like a wrong password.",
                SESSION,
                (200, "The credentials are right and the address is confirmed", _USER),
                {401: ["invalid_credentials"]},
            )
        },
        f"{p}/openapi.json": {
            "get": {
                "summary": "This document",
                "security": [],
                "responses": {
                    "200": {
                        "description": "OpenAPI 3.1 document",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    }
                },
            }
        },
    }
    specs = (SIGNUP, LINK_REQUEST, VERIFICATION_CONFIRM, PASSWORD_RESET_CONFIRM, SESSION)
    return {
        "openapi": "3.1.0",
        "info": {"title": "authsvc API", "version": "1", "description": _DESCRIPTION},
        "security": [{"appKey": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {
                "appKey": {"type": "http", "scheme": "bearer", "description": "The app's API key"}
            },
            "schemas": {"Problem": _PROBLEM_SCHEMA, **{s.name: body_schema(s) for s in specs}},
            "parameters": {
                "IdempotencyKey": {
                    "name": IDEMPOTENCY_HEADER,
                    "in": "header",
                    "required": False,
                    "description": "Makes retries safe: the first outcome is replayed for 24 h.",
                    "schema": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": MAX_KEY_LENGTH,
                        "pattern": "^[ -~]+$",
                    },
                }
            },
            "headers": {
                "RetryAfter": {"description": "Seconds to wait", "schema": {"type": "integer"}},
                "IdempotentReplayed": {
                    "description": "`true` when this is the stored answer to an earlier request"
                    " with the same key",
                    "schema": {"type": "string", "enum": ["true"]},
                },
            },
        },
    }
