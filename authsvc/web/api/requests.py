"""Strict request parsing: a JSON object with known fields of the right types.

Each body is described once (a BodySpec); the parser enforces it and the
OpenAPI document is generated from it, so the two cannot drift apart.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from flask import request

from authsvc.accounts.addresses import MAX_ADDRESS_LENGTH, InvalidAddress, parse_address
from authsvc.accounts.passwords import MAX_LENGTH as MAX_PASSWORD_LENGTH
from authsvc.accounts.tokens import MAX_CODE_LENGTH
from authsvc.apps.idempotency import InvalidIdempotencyKey, check_key
from authsvc.apps.keys import MAX_REDIRECT_URL_LENGTH, App
from authsvc.emails.sandbox import MAX_TEMPLATE_BYTES
from authsvc.locales import MAX_LOCALE_TAG_LENGTH, parse_locale_tag
from authsvc.problem_documents import NOT_JSON_DETAIL, declares_json
from authsvc.web.api.problems import ApiProblem, invalid_request, problem_reply

IDEMPOTENCY_HEADER = "Idempotency-Key"

_MAX_LENGTHS = {
    "email": MAX_ADDRESS_LENGTH,
    "password": MAX_PASSWORD_LENGTH,
    "new_password": MAX_PASSWORD_LENGTH,
    "url": MAX_REDIRECT_URL_LENGTH,
    "code": MAX_CODE_LENGTH,
    "sign_in_code": MAX_CODE_LENGTH,
    "locale": MAX_LOCALE_TAG_LENGTH,
    # Each part; the 64 KiB of all three together is the sandbox's rule (422, not 400).
    "template": 2 * MAX_TEMPLATE_BYTES,
}


@dataclass(frozen=True)
class Field:
    """One body member: `kind` is email, password, new_password, token, code, sign_in_code,
    url, locale or template."""

    name: str
    kind: str
    required: bool = True

    @property
    def max_length(self) -> int | None:
        return _MAX_LENGTHS.get(self.kind)

    @property
    def nullable(self) -> bool:
        # Clients often serialise an absent optional value as null.
        return not self.required


@dataclass(frozen=True)
class BodySpec:
    name: str
    fields: tuple[Field, ...]
    # The body may be left out: no body at all reads as `{}`.
    optional: bool = False

    def field(self, name: str) -> Field | None:
        return next((f for f in self.fields if f.name == name), None)


EMAIL = Field("email", "email")
PASSWORD = Field("password", "password")
NEW_PASSWORD = Field("password", "new_password")
TOKEN = Field("token", "token")
REDIRECT_URL = Field("redirect_url", "url", required=False)
CHOSEN_PASSWORD = Field("password", "new_password", required=False)
# A confirm body carries the link's token, or the address and the emailed code.
LINK_TOKEN = Field("token", "token", required=False)
CODE_EMAIL = Field("email", "email", required=False)
CODE = Field("code", "code", required=False)

# The language of the emails a request sends (SPEC §14); malformed: 400.
LOCALE = Field("locale", "locale", required=False)
SIGNUP = BodySpec("SignupRequest", (EMAIL, NEW_PASSWORD, REDIRECT_URL, LOCALE))
LINK_REQUEST = BodySpec("LinkRequest", (EMAIL, REDIRECT_URL, LOCALE))
VERIFICATION_CONFIRM = BodySpec(
    "VerificationConfirm", (LINK_TOKEN, CODE_EMAIL, CODE, CHOSEN_PASSWORD)
)
# A confirm that sends a notice takes the notice's locale too (SPEC §14).
PASSWORD_RESET_CONFIRM = BodySpec(
    "PasswordResetConfirm", (LINK_TOKEN, CODE_EMAIL, CODE, NEW_PASSWORD, LOCALE)
)
SESSION = BodySpec("SessionRequest", (EMAIL, PASSWORD))
# An address over its life (SPEC §12).
NEW_EMAIL = Field("new_email", "email")
# An account with no password proves itself with a current sign-in code instead (SPEC §12).
OPTIONAL_PASSWORD = Field("password", "password", required=False)
SIGN_IN_CODE = Field("sign_in_code", "sign_in_code", required=False)
EMAIL_CHANGE = BodySpec("EmailChangeRequest", (EMAIL, OPTIONAL_PASSWORD, SIGN_IN_CODE, NEW_EMAIL,
                                               REDIRECT_URL, LOCALE))
EMAIL_CHANGE_CONFIRM = BodySpec("EmailChangeConfirm", (LINK_TOKEN, CODE_EMAIL, CODE, LOCALE))
EMAIL_CHANGE_UNDO = BodySpec("EmailChangeUndo", (TOKEN, CHOSEN_PASSWORD, LOCALE))
ACCOUNT_DELETION = BodySpec("AccountDeletionRequest", (EMAIL, OPTIONAL_PASSWORD, SIGN_IN_CODE,
                                                       LOCALE))
ACCOUNT_DELETION_CONFIRM = BodySpec("AccountDeletionConfirm", (LINK_TOKEN, CODE_EMAIL, CODE))
# An app's own email template (SPEC §14): the three parts, all stored, or all
# previewed as a draft (none, or no body at all: the stored one is previewed).
TEMPLATE_BODY = BodySpec("EmailTemplate", (Field("subject", "template"),
                                           Field("text", "template"), Field("html", "template")))
TEMPLATE_DRAFT = BodySpec("EmailTemplateDraft", tuple(
    Field(f.name, f.kind, required=False) for f in TEMPLATE_BODY.fields), optional=True)
# Sign in by email (SPEC §13).
SIGN_IN_REQUEST = BodySpec("SignInLinkRequest", (EMAIL, REDIRECT_URL, LOCALE))
SIGN_IN_CONFIRM = BodySpec("SignInLinkConfirm", (LINK_TOKEN, CODE_EMAIL, CODE))


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document = dict(pairs)
    if len(document) != len(pairs):
        raise ValueError("duplicate member names")
    return document


def read_json_object(*, empty_is_object: bool = False) -> dict[str, Any]:
    """The body as a JSON object; ApiProblem (400/413/415) otherwise.

    `empty_is_object`: an empty body, whatever its Content-Type (or none), reads as `{}`.
    """
    if empty_is_object and not request.get_data(cache=True):
        return {}
    if not declares_json(request.mimetype):
        raise ApiProblem(problem_reply(415, "unsupported_media_type", NOT_JSON_DETAIL))
    raw = request.get_data(cache=True)  # 413 above MAX_CONTENT_LENGTH, as a problem
    try:
        document = json.loads(
            raw, parse_constant=_reject_constant, object_pairs_hook=_no_duplicates
        )
    except (ValueError, RecursionError) as exc:
        # ValueError covers bad UTF-8, syntax, duplicate names and huge numbers.
        raise invalid_request("", f"not valid JSON ({type(exc).__name__})") from None
    if not isinstance(document, dict):
        raise invalid_request("", "must be a JSON object")
    return document


def _check_string(field: Field, value: object) -> str:
    pointer = "/" + field.name
    if not isinstance(value, str):
        raise invalid_request(pointer, "must be a string")
    if field.max_length is not None and len(value) > field.max_length:
        raise invalid_request(pointer, f"must be at most {field.max_length} characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise invalid_request(pointer, "contains an unpaired surrogate") from None
    if "\x00" in value:  # PostgreSQL text cannot hold NUL
        raise invalid_request(pointer, "contains a NUL character")
    return value


def parse_body(spec: BodySpec) -> tuple[dict[str, str | None], dict[str, Any]]:
    """(checked values with emails normalised, the document as sent)."""
    document = read_json_object(empty_is_object=spec.optional)
    unknown = sorted(name for name in document if spec.field(name) is None)
    if unknown:
        raise invalid_request("/" + unknown[0], "is not a known field")
    values: dict[str, str | None] = {}
    for field in spec.fields:
        value = document.get(field.name)
        if value is None:
            if field.required:
                raise invalid_request("/" + field.name, "is required")
            values[field.name] = None
            continue
        text = _check_string(field, value)
        if field.kind == "email":
            try:
                text = parse_address(text)
            except InvalidAddress as exc:
                raise invalid_request("/" + field.name, str(exc)) from None
        if field.kind == "locale":
            try:
                text = parse_locale_tag(text)
            except ValueError:
                raise invalid_request("/" + field.name,
                                      "must be a BCP 47 tag, e.g. de or pt-BR") from None
        values[field.name] = text
    return values, document


@dataclass(frozen=True)
class CodeRedemption:
    """A confirm call made with the emailed code instead of the link's token."""

    email: str
    code: str


def token_or_code(values: dict[str, str | None]) -> CodeRedemption | None:
    """The code form of a confirm body, None for the token form; 400 if it is neither.

    Exactly one form: `token`, or `email` and `code` together.
    """
    token, email, code = values["token"], values["email"], values["code"]
    if token is not None:
        extra = "email" if email is not None else "code" if code is not None else None
        if extra is not None:
            raise invalid_request("/" + extra, "send either token, or email and code")
        return None
    if email is None and code is None:
        raise invalid_request("/token", "is required (or email and code)")
    if email is None:
        raise invalid_request("/email", "is required with code")
    if code is None:
        raise invalid_request("/code", "is required with email")
    return CodeRedemption(email, code)


def password_or_sign_in_code(values: dict[str, str | None]) -> tuple[str | None, str | None]:
    """The proof an account-changing body carries: `password`, or `sign_in_code` (an
    account with no password); exactly one, else 400."""
    password, code = values["password"], values["sign_in_code"]
    if password is not None and code is not None:
        raise invalid_request("/sign_in_code", "send either password or sign_in_code")
    if password is None and code is None:
        raise invalid_request("/password", "is required (or sign_in_code)")
    return password, code


def allowed_redirect(app: App, url: str | None) -> str | None:
    """The redirect URL if the app's allowlist permits it; 400 redirect_not_allowed otherwise."""
    if url is None:
        return None
    if not app.allows_redirect(url):
        raise ApiProblem(problem_reply(
            400,
            "redirect_not_allowed",
            "redirect_url must be on this app's allowlist"
            " (same scheme, host, port and path prefix).",
            errors=[{"pointer": "#/redirect_url", "detail": "is not on the allowlist"}],
        ))
    return url


def read_idempotency_key() -> str | None:
    """The Idempotency-Key header, if sent; 400 invalid_request when malformed."""
    value = request.headers.get(IDEMPOTENCY_HEADER)
    if value is None:
        return None
    try:
        return check_key(value)
    except InvalidIdempotencyKey as exc:
        raise ApiProblem(problem_reply(
            400, "invalid_request", f"{IDEMPOTENCY_HEADER} {exc}.")) from None
