"""The OpenAPI 3.1 document for /api/v1, built from the same specs the parser enforces."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from authsvc.accounts.passwords import MIN_LENGTH as MIN_PASSWORD_LENGTH
from authsvc.apps.brands import MAX_BRAND_URL, MAX_PRODUCT_NAME
from authsvc.apps.idempotency import MAX_KEY_LENGTH
from authsvc.emails.app_templates import KINDS as TEMPLATE_KINDS
from authsvc.emails.app_templates import MAX_TEMPLATES_PER_APP
from authsvc.emails.sandbox import FILTERS, VARIABLES
from authsvc.web.api.problems import API_PREFIX, TITLES, problem_type
from authsvc.web.api.requests import (
    ACCOUNT_DELETION,
    ACCOUNT_DELETION_CONFIRM,
    EMAIL_CHANGE,
    EMAIL_CHANGE_CONFIRM,
    EMAIL_CHANGE_UNDO,
    IDEMPOTENCY_HEADER,
    LINK_REQUEST,
    PASSWORD_RESET_CONFIRM,
    SESSION,
    SIGN_IN_CONFIRM,
    SIGN_IN_REQUEST,
    SIGNUP,
    TEMPLATE_BODY,
    TEMPLATE_DRAFT,
    VERIFICATION_CONFIRM,
    BodySpec,
    Field,
)

PROBLEM_JSON = "application/problem+json"
PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}
DEFAULT_SERVER = "http://127.0.0.1:8000"


@dataclass(frozen=True)
class Operation:
    """One documented operation: what it is called and every answer it really gives.

    `problems` maps status → the `code`s that status carries; `replayable`
    says whether its outcome is stored under an Idempotency-Key (and so can
    come back with Idempotent-Replayed, or be refused with 409/422).
    """

    operation_id: str
    tag: str
    summary: str
    description: str
    spec: BodySpec
    success: tuple[int, str, str]  # status, description, response schema name
    problems: dict[int, list[str]]
    replayable: bool = True
    # A second success, as success: a change that waits for its other address.
    also: tuple[int, str, str] | None = None


# Answers every POST can give, whatever it does: rejected before it runs
# (key, body, app limit), or failed around it (a bug, a lost database).
COMMON_POST_PROBLEMS: dict[int, list[str]] = {
    400: ["invalid_request"],
    401: ["unauthorized"],
    413: ["payload_too_large"],
    415: ["unsupported_media_type"],
    429: ["rate_limited"],
    500: ["internal_error"],
    503: ["service_unavailable"],
}
# Only calls whose outcome is stored under an Idempotency-Key give these.
IDEMPOTENCY_PROBLEMS: dict[int, list[str]] = {
    409: ["idempotency_in_progress"],
    422: ["idempotency_key_reused"],
}
# Codes decided by the use case itself: stored under a key and replayed.
USE_CASE_CODES = {
    "weak_password", "invalid_token", "invalid_code", "token_expired", "token_superseded",
    "token_used", "code_exhausted", "password_required", "email_taken", "invalid_credentials",
}
_FIELD_DESCRIPTIONS = {
    "email": "One plain address (no display name, angle brackets or comments); the server"
    " trims it, applies Unicode NFC and lower-cases it.",
    "password": "The account's password.",
    "new_password": "8-256 characters; common passwords and the email itself are refused"
    " (422 weak_password, also for fewer than 8 characters).",
    "token": "The token from the emailed link; anything malformed is 400 invalid_token.",
    "url": "Where the emailed link leads (`<redirect_url>?token=…`), and where the email"
    " sends people to type the code; must be on the app's allowlist (400 redirect_not_allowed)."
    " Applies only to accounts that belong to this app (created through it and, while the"
    " address is unproven, not yet contested by a second signup or a resend); for any other"
    " account the link and code page are authsvc's own, with the same answer.",
    "code": "The 6-digit code from the email (spaces are ignored); send it with `email`."
    " Anything else is a wrong code (400 invalid_code).",
    "sign_in_code": "For an account with no password, instead of `password`: the 6-digit"
    " code of a current sign-in email (`requestSignInLink`; spaces are ignored). It is used"
    " up; a wrong one answers 401 invalid_credentials, as a wrong password does.",
    "locale": "A BCP 47 language tag (e.g. `de`, `pt-BR`) for the emails this request"
    " sends; a malformed one is 400 invalid_request. Shipped: en, de, fr, es, pt-BR, ar;"
    " another tag falls back by its language, then to the app's default_locale, then en."
    " Without one, the account's locale, then the app's default_locale, then en. A"
    " request's locale never becomes the account's: redeeming an emailed link makes that"
    " email's locale the account's (a confirm's own `locale` is only for the notice it"
    " sends); a new account keeps its signup's.",
    "template": "Jinja in a sandbox (docs/templates.md): the variables "
    + ", ".join(sorted(VARIABLES)) + "; `if`/`else`; the filters " + ", ".join(FILTERS)
    + ". Nothing else (loops, macros, includes, attribute access, calls, arithmetic)."
    " The text and HTML parts must print `{{ link }}` and `{{ code }}`; at most 64 KiB"
    " for the three parts together.",
}
_EXAMPLES = {
    "email": "ann@example.com",
    "password": "correct horse battery",
    "new_password": "correct horse battery",
    "url": "https://app.example.com/welcome",
    "code": "123456",
    "sign_in_code": "123456",
    "locale": "en",
    "template": "{{ product_name }}: {{ link }} ({{ code }})",
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


_CONFIRM_FORMS = (
    "Send either `token` (from the emailed link) or `email` and `code` (the 6-digit code"
    " from the same email), not both (400 invalid_request)."
)
_BODY_DESCRIPTIONS = {
    VERIFICATION_CONFIRM.name: _CONFIRM_FORMS + " `password` is required for a contested"
    " address (422 password_required) and replaces the signup's password when given.",
    PASSWORD_RESET_CONFIRM.name: _CONFIRM_FORMS + " `locale` is for the \"password changed\""
    " notice.",
    EMAIL_CHANGE.name: "`email` and `password` open the account (as `checkCredentials`);"
    " an account with no password (signed up by email) sends `sign_in_code`, a current"
    " sign-in code, instead (exactly one of the two, else 400 invalid_request)."
    " `new_email` is where the confirmation link and code go, and must differ from"
    " `email` (400 invalid_request).",
    ACCOUNT_DELETION.name: "`email` and `password` open the account (as `checkCredentials`);"
    " an account with no password sends `sign_in_code`, a current sign-in code, instead"
    " (exactly one of the two, else 400 invalid_request).",
    EMAIL_CHANGE_CONFIRM.name: _CONFIRM_FORMS + " `email` is the address the code was"
    " sent to: the new one to confirm, the old one to approve. `locale` is for the email"
    " with the undo link the old address gets when the change completes.",
    EMAIL_CHANGE_UNDO.name: "`token` from the undo link sent to the old address (undo"
    " links carry no code). With `password`, the account's password becomes it at once;"
    " without, the password is cleared and a reset link goes to the restored address."
    " `locale` is for the emails the undo sends (that reset link, the notice to the address"
    " moved back from).",
    ACCOUNT_DELETION_CONFIRM.name: _CONFIRM_FORMS + " `email` is the address the"
    " deletion email was sent to.",
    SIGN_IN_CONFIRM.name: _CONFIRM_FORMS,
}


def body_schema(spec: BodySpec) -> dict[str, Any]:
    """JSON Schema for a request body: exactly the members the parser accepts."""
    schema: dict[str, Any] = {
        "type": "object",
        "additionalProperties": False,
        "required": [f.name for f in spec.fields if f.required],
        "properties": {f.name: _field_schema(f) for f in spec.fields},
    }
    if spec.name in _BODY_DESCRIPTIONS:
        schema["description"] = _BODY_DESCRIPTIONS[spec.name]
    return schema


_RETRY_AFTER: dict[str, Any] = {"Retry-After": {"$ref": "#/components/headers/RetryAfter"}}
_REPLAYED: dict[str, Any] = {
    "Idempotent-Replayed": {"$ref": "#/components/headers/IdempotentReplayed"}
}
_HEADERS_BY_STATUS: dict[int, dict[str, Any]] = {
    401: {
        "WWW-Authenticate": {"schema": {"type": "string"}, "description": 'Bearer realm="authsvc"'}
    },
    409: _RETRY_AFTER,
    429: _RETRY_AFTER,
    503: _RETRY_AFTER,
}


def problem_schema_name(codes: list[str]) -> str:
    """The named schema of an answer carrying these codes: `invalid_token`, `invalid_code`
    → InvalidTokenInvalidCodeProblem."""
    return "".join(word.title() for code in codes for word in code.split("_")) + "Problem"


def _problem_schema(codes: list[str]) -> dict[str, Any]:
    # The base Problem's `code` stays an open string (a client reading Problem keeps working
    # when a code is added); each answer's own schema narrows it to what that answer carries,
    # so a TypeScript client can switch on it.
    return {
        "allOf": [
            PROBLEM_REF,
            {"type": "object", "properties": {"code": {"type": "string", "enum": codes}}},
        ],
        "description": "A problem whose `code` is one of: " + ", ".join(codes) + ".",
    }


def _problem_response(status: int, codes: list[str], replayable: bool) -> dict[str, Any]:
    headers = dict(_HEADERS_BY_STATUS.get(status, {}))
    if replayable and USE_CASE_CODES.intersection(codes):
        headers.update(_REPLAYED)
    schema = {"$ref": f"#/components/schemas/{problem_schema_name(codes)}"}
    response: dict[str, Any] = {
        "description": "; ".join(f"`{c}`: {TITLES[c]}" for c in codes),
        "content": {PROBLEM_JSON: {"schema": schema}},
        # Machine-readable: the `code` values this status carries here.
        "x-problem-codes": codes,
    }
    if headers:
        response["headers"] = headers
    return response


def operation_problems(op: Operation) -> dict[int, list[str]]:
    """Status → codes for every problem `op` can answer with."""
    merged = {status: list(codes) for status, codes in COMMON_POST_PROBLEMS.items()}
    for extra in (IDEMPOTENCY_PROBLEMS if op.replayable else {}, op.problems):
        for status, codes in extra.items():
            merged.setdefault(status, []).extend(c for c in codes if c not in merged[status])
    return dict(sorted(merged.items()))


def _success(answer: tuple[int, str, str], replayable: bool) -> dict[str, Any]:
    _status_code, description, schema_name = answer
    success: dict[str, Any] = {
        "description": description,
        "content": {
            "application/json": {"schema": {"$ref": f"#/components/schemas/{schema_name}"}}
        },
    }
    if replayable:
        success["headers"] = _REPLAYED
    return success


def _post(op: Operation) -> dict[str, Any]:
    responses: dict[str, Any] = {str(answer[0]): _success(answer, op.replayable)
                                 for answer in (op.success, op.also) if answer is not None}
    for code, codes in operation_problems(op).items():
        responses[str(code)] = _problem_response(code, codes, op.replayable)
    return {
        "operationId": op.operation_id,
        "tags": [op.tag],
        "summary": op.summary,
        "description": op.description,
        "parameters": [{"$ref": "#/components/parameters/IdempotencyKey"}],
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": {"$ref": f"#/components/schemas/{op.spec.name}"}}
            },
        },
        "responses": responses,
    }


def _status(value: str) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["status"],
        "properties": {"status": {"type": "string", "enum": [value]}},
    }


_RESPONSE_SCHEMAS: dict[str, Any] = {
    "VerificationSent": _status("verification_sent"),
    "Accepted": _status("accepted"),
    "PasswordChanged": _status("password_changed"),
    "Verified": {
        "type": "object",
        "additionalProperties": False,
        "required": ["email", "verified"],
        "properties": {
            "email": {"type": "string"},
            "verified": {"type": "boolean", "enum": [True]},
        },
    },
    "SessionUser": {
        "type": "object",
        "additionalProperties": False,
        "required": ["id", "email", "email_verified"],
        "properties": {
            "id": {"type": "integer"},
            "email": {"type": "string"},
            "email_verified": {"type": "boolean", "enum": [True]},
        },
    },
    "ConfirmationSent": _status("confirmation_sent"),
    "AwaitingOldAddress": _status("awaiting_old_address"),
    "AwaitingNewAddress": _status("awaiting_new_address"),
    "EmailChanged": {
        "type": "object",
        "additionalProperties": False,
        "required": ["email", "previous_email"],
        "properties": {"email": {"type": "string"}, "previous_email": {"type": "string"}},
    },
    "EmailRestored": {
        "type": "object",
        "additionalProperties": False,
        "required": ["email"],
        "properties": {"email": {"type": "string"}},
    },
    "AccountDeleted": {
        "type": "object",
        "additionalProperties": False,
        "required": ["deleted"],
        "properties": {"deleted": {"type": "boolean", "enum": [True]}},
    },
    "SignedIn": {
        "type": "object",
        "additionalProperties": False,
        "required": ["user", "created"],
        "properties": {
            "user": {"$ref": "#/components/schemas/SessionUser"},
            "created": {
                "type": "boolean",
                "description": "The address was unproven until now: a confirmed account came"
                " to be (an app with --sign-up-by-email created it, or a signup's account was"
                " confirmed by signing in, its password discarded).",
            },
        },
    },
    "CredentialsChecked": {
        "type": "object",
        "additionalProperties": False,
        "required": ["user"],
        "properties": {"user": {"$ref": "#/components/schemas/SessionUser"}},
    },
}
_TOKEN_PROBLEMS = {
    400: ["invalid_token", "invalid_code"],
    410: ["token_expired", "token_superseded", "token_used", "code_exhausted"],
}
_LINK_PROBLEMS = {400: ["redirect_not_allowed"]}
_SIGN_IN_REQUIRED = (
    " `email` and `password` are checked as `checkCredentials` checks them: a wrong"
    " password, an unknown or an unconfirmed account answer 401 invalid_credentials alike"
    " and count against the address's login limit (429). A `sign_in_code` is used up; a"
    " wrong one, or one sent for an account that has a password, answers the same 401."
)
OPERATIONS: dict[str, Operation] = {
    "/signups": Operation(
        "signUp", "signups", "Create an account and send its verification email",
        "Answers 202 whether or not the email already has an account (its owner gets an"
        " \"account exists\" email instead). The email carries a link and a 6-digit code.",
        SIGNUP,
        (202, "Verification sent (the same answer when the email already has an account)",
         "VerificationSent"),
        {**_LINK_PROBLEMS, 422: ["weak_password"]},
    ),
    "/verifications": Operation(
        "requestVerification", "verifications", "Send a fresh verification email",
        "Retires every earlier verification link and code of the address. Answers 202"
        " whether or not the email is known or still unconfirmed.",
        LINK_REQUEST,
        (202, "Accepted, whether or not the email is known", "Accepted"),
        _LINK_PROBLEMS,
    ),
    "/verifications/confirm": Operation(
        "confirmVerification", "verifications", "Confirm an email address with its token or code",
        "Redeems the link's token, or the address with the emailed code: once, only the"
        " newest, within its lifetime. Five wrong codes retire the code, and twenty an hour"
        " for the address, in both purposes, every code of it until the hour ends (410"
        " code_exhausted, even for the right code); never the link. An unknown address"
        " answers like a wrong code.",
        VERIFICATION_CONFIRM,
        (200, "The email is verified", "Verified"),
        {**_TOKEN_PROBLEMS, 422: ["password_required", "weak_password"]},
    ),
    "/password-resets": Operation(
        "requestPasswordReset", "password-resets", "Send a password-reset email",
        "Retires every earlier reset link and code of the address. Answers 202 whether or"
        " not the email is known.",
        LINK_REQUEST,
        (202, "Accepted, whether or not the email is known", "Accepted"),
        _LINK_PROBLEMS,
    ),
    "/password-resets/confirm": Operation(
        "confirmPasswordReset", "password-resets", "Set a new password with a reset token or code",
        "Redeems the link's token, or the address with the emailed code, and sets the"
        " password; this also confirms the address and ends every session of the account.",
        PASSWORD_RESET_CONFIRM,
        (200, "Password changed; every session of the account ended", "PasswordChanged"),
        {**_TOKEN_PROBLEMS, 422: ["weak_password"]},
    ),
    "/sessions": Operation(
        "checkCredentials", "sessions", "Check an email and password",
        "A credential check for the app; no session is kept here. Never replayed under an"
        " Idempotency-Key (the answer always reflects the current password), so it never"
        " answers 409 or 422. An address nobody has confirmed yet answers 401 exactly like"
        " a wrong password; too many failures for one address answer 429.",
        SESSION,
        (200, "The credentials are right and the address is confirmed", "CredentialsChecked"),
        {401: ["invalid_credentials"]},
        replayable=False,
    ),
    "/email-changes": Operation(
        "requestEmailChange", "email-changes", "Send a link and code to confirm a new address",
        "The new address gets a link and a 6-digit code; nothing goes to the old one yet."
        " Answers 202 whether or not `new_email` is taken: a confirmed account's mailbox"
        " there gets an \"already used; nothing changed\" notice instead. A later request"
        " replaces an earlier one; a password change cancels it." + _SIGN_IN_REQUIRED,
        EMAIL_CHANGE,
        (202, "Confirmation sent (the same answer when the new address is taken)",
         "ConfirmationSent"),
        {**_LINK_PROBLEMS, 401: ["invalid_credentials"]},
    ),
    "/email-changes/confirm": Operation(
        "confirmEmailChange", "email-changes", "Confirm a new address with its token or code",
        "Redeems the change link's token, or the new address with the emailed code: once,"
        " only the newest. The account moves to the new address; every outstanding link and"
        " code of it dies (earlier undo links excepted); an unconfirmed account holding the"
        " new address is deleted; the old address gets one email with an undo link."
        " With AUTHSVC_EMAIL_CHANGE_CONFIRM_OLD on, the move waits for the old address's"
        " approval (`/email-changes/approve`): until it is in, 202 awaiting_old_address."
        " 409 email_taken when a confirmed account took the new address meanwhile.",
        EMAIL_CHANGE_CONFIRM,
        (200, "The account's address is the new one", "EmailChanged"),
        {**_TOKEN_PROBLEMS, 409: ["email_taken"]},
        also=(202, "Confirmed; the change waits for the old address's approval",
              "AwaitingOldAddress"),
    ),
    "/email-changes/approve": Operation(
        "approveEmailChange", "email-changes",
        "Approve an address change from the old address, with its token or code",
        "With AUTHSVC_EMAIL_CHANGE_CONFIRM_OLD on, a change request also sends the account's"
        " own address a link and a 6-digit code (the same version as the change link: a later"
        " request or a password change retires both). Redeems either: once, only the newest."
        " The change takes effect when both addresses are in, in either order: 200 as"
        " `/email-changes/confirm` when the new address had confirmed, else 202"
        " awaiting_new_address.",
        EMAIL_CHANGE_CONFIRM,
        (200, "Both addresses are in: the account's address is the new one", "EmailChanged"),
        {**_TOKEN_PROBLEMS, 409: ["email_taken"]},
        also=(202, "Approved; the change waits for the new address's confirmation",
              "AwaitingNewAddress"),
    ),
    "/email-changes/undo": Operation(
        "undoEmailChange", "email-changes", "Undo an address change with the old address's link",
        "Restores the address the undo link was sent to: every session ends, every outstanding"
        " link and code dies (the undo links of later changes too: the oldest address wins)."
        " An undo link is not retired by later links; it works once, within its lifetime,"
        " while no undo to an older address ended it (410 token_used).",
        EMAIL_CHANGE_UNDO,
        (200, "The address is restored", "EmailRestored"),
        {400: ["invalid_token"], 410: ["token_expired", "token_used"], 409: ["email_taken"],
         422: ["weak_password"]},
    ),
    "/account-deletions": Operation(
        "requestAccountDeletion", "account-deletions", "Send a link and code to delete an account",
        "The link and code go to the account's address, or, while an undo link of the account"
        " lives, to the oldest address holding one." + _SIGN_IN_REQUIRED,
        ACCOUNT_DELETION,
        (202, "Confirmation sent", "ConfirmationSent"),
        {401: ["invalid_credentials"]},
    ),
    "/account-deletions/confirm": Operation(
        "confirmAccountDeletion", "account-deletions", "Delete an account with its token or code",
        "Redeems the deletion link's token, or the address with the emailed code: the account,"
        " its sessions, codes and pending emails are gone, and the address can sign up again."
        " A used link then answers 400 invalid_token, like every link of a deleted account.",
        ACCOUNT_DELETION_CONFIRM,
        (200, "The account is deleted", "AccountDeleted"),
        {400: ["invalid_token", "invalid_code"],
         410: ["token_expired", "token_superseded", "code_exhausted"]},
    ),
    "/sign-in-links": Operation(
        "requestSignInLink", "sign-in-links", "Send a sign-in email (a link and a code)",
        "A known address gets a link and a 6-digit code that sign the person in; it retires"
        " every earlier sign-in link and code of the address. An unknown address gets"
        " nothing, unless the app was registered with `--sign-up-by-email`: then its link,"
        " used, creates a confirmed account with no password. Answers 202 for any address.",
        SIGN_IN_REQUEST,
        (202, "Accepted, whether or not the email is known", "Accepted"),
        _LINK_PROBLEMS,
    ),
    "/sign-in-links/confirm": Operation(
        "confirmSignInLink", "sign-in-links", "Sign in with a sign-in token or code",
        "Redeems the link's token, or the address with the emailed code: once, only the"
        " newest, within its lifetime; five wrong codes retire the code, never the link."
        " It proves the address: an unconfirmed account is confirmed, and a password set"
        " before that is discarded (the person may choose one with a reset). A login"
        " lockout does not apply, and the address's failed-login count is cleared.",
        SIGN_IN_CONFIRM,
        (200, "Signed in: the account, and whether it was created now", "SignedIn"),
        _TOKEN_PROBLEMS,
        # Never replayed, as /sessions: a stored 200 would sign in again whoever
        # repeats a used token under the same key.
        replayable=False,
    ),
}

@dataclass(frozen=True)
class ResourceOperation:
    """One documented operation on the calling app's own settings (SPEC §14), with its
    method and path parameters; `body` names its request schema, if it takes one."""

    method: str
    path: str
    operation_id: str
    tag: str
    summary: str
    description: str
    success: tuple[int, str, str | None]  # status, description, schema (None: no body)
    problems: dict[int, list[str]]
    body: str | None = None
    body_required: bool = True


# Answers every call on the app's settings can give (the key, its budget, a bug, the database).
_SETTINGS_PROBLEMS: dict[int, list[str]] = {401: ["unauthorized"], 429: ["rate_limited"],
                                            500: ["internal_error"],
                                            503: ["service_unavailable"]}
# And those of a call with a JSON body.
_BODY_PROBLEMS: dict[int, list[str]] = {400: ["invalid_request"],
                                        413: ["payload_too_large"],
                                        415: ["unsupported_media_type"]}
_TEMPLATE_PATH = "/templates/{kind}/{locale}"
_TEMPLATE_RULES = (
    " The kind is one of " + ", ".join(TEMPLATE_KINDS) + " (any other: 404 not_found); the"
    " locale a BCP 47 tag (malformed: 400 invalid_request). Emails of this app's own accounts"
    " use the app's template for the email's locale, else for its language, else for the"
    " app's default locale, else the built-in one."
)
_REFUSED = (" A template that does not parse or compile, nests too deep or uses anything"
            " outside the sandbox is 422 template_invalid, naming the part and the line in"
            " `errors`.")
_CAPPED = (f" An app stores at most {MAX_TEMPLATES_PER_APP} templates: a new one past that is"
           " 422 template_invalid; replacing one is always allowed.")
RESOURCE_OPERATIONS: tuple[ResourceOperation, ...] = (
    ResourceOperation(
        "get", "/app", "getAppBrand", "app", "The calling app's brand",
        "The brand this app's own accounts see in their emails and on the pages their links"
        " open; a null field is the service's own. `mail_from` is set by operators only.",
        (200, "The app's brand", "AppBrand"), dict(_SETTINGS_PROBLEMS)),
    ResourceOperation(
        "patch", "/app", "updateAppBrand", "app", "Change the calling app's brand",
        f"Send any of product_name (plain text, 1-{MAX_PRODUCT_NAME} characters), logo_url"
        " (https only), brand_color (#rrggbb), support_url (http or https) and default_locale"
        " (a BCP 47 tag); null clears a field. A refused value, an unknown field or"
        " `mail_from` (operators only) is 400 invalid_request naming the field.",
        (200, "The brand as it is now", "AppBrand"),
        {**_SETTINGS_PROBLEMS, **_BODY_PROBLEMS}, body="AppBrandChange"),
    ResourceOperation(
        "get", "/templates", "listEmailTemplates", "templates", "The calling app's templates",
        "Every email template this app stored, by kind then locale.",
        (200, "The app's templates", "EmailTemplates"), dict(_SETTINGS_PROBLEMS)),
    ResourceOperation(
        "put", _TEMPLATE_PATH, "putEmailTemplate", "templates",
        "Store the calling app's template for a kind and locale",
        "Replaces the one stored for the kind and locale, if any." + _TEMPLATE_RULES + _REFUSED
        + _CAPPED,
        (200, "The stored template", "StoredEmailTemplate"),
        {**_SETTINGS_PROBLEMS, **_BODY_PROBLEMS, 404: ["not_found"],
         422: ["template_invalid"]}, body=TEMPLATE_BODY.name),
    ResourceOperation(
        "delete", _TEMPLATE_PATH, "deleteEmailTemplate", "templates",
        "Remove the calling app's template for a kind and locale",
        "Its emails then use the next template in the lookup order." + _TEMPLATE_RULES,
        (204, "Removed", None),
        {**_SETTINGS_PROBLEMS, 400: ["invalid_request"],
         404: ["not_found", "template_not_found"]}),
    ResourceOperation(
        "post", _TEMPLATE_PATH + "/preview", "previewEmailTemplate", "templates",
        "Render a draft or the stored template with sample values",
        "With `subject`, `text` and `html`: that draft; with `{}` or no body at all: the"
        " stored template (404"
        " template_not_found when there is none). Rendered exactly as the worker would, with"
        " sample values (a link and a code that redeem nothing); nothing is stored or sent,"
        " and an Idempotency-Key is checked but never replayed." + _TEMPLATE_RULES + _REFUSED,
        (200, "The rendered parts", "RenderedEmail"),
        {**COMMON_POST_PROBLEMS, 404: ["not_found", "template_not_found"],
         422: ["template_invalid"]}, body=TEMPLATE_DRAFT.name,
        body_required=not TEMPLATE_DRAFT.optional),
)
_PATH_PARAMETERS = [
    {"name": "kind", "in": "path", "required": True,
     "schema": {"type": "string", "enum": list(TEMPLATE_KINDS)}},
    {"name": "locale", "in": "path", "required": True, "description": "A BCP 47 tag",
     "schema": {"type": "string", "maxLength": 35, "examples": ["de"]}},
]


def _resource(op: ResourceOperation) -> dict[str, Any]:
    status, description, schema_name = op.success
    success: dict[str, Any] = {"description": description}
    if schema_name is not None:
        success["content"] = {
            "application/json": {"schema": {"$ref": f"#/components/schemas/{schema_name}"}}}
    responses: dict[str, Any] = {str(status): success}
    for code, codes in sorted(op.problems.items()):
        responses[str(code)] = _problem_response(code, codes, False)
    parameters: list[dict[str, Any]] = list(_PATH_PARAMETERS) if "{kind}" in op.path else []
    if op.method == "post":
        parameters.append({"$ref": "#/components/parameters/IdempotencyKey"})
    operation: dict[str, Any] = {
        "operationId": op.operation_id, "tags": [op.tag], "summary": op.summary,
        "description": op.description, "responses": responses,
    }
    if parameters:
        operation["parameters"] = parameters
    if op.body is not None:
        operation["requestBody"] = {"required": op.body_required, "content": {
            "application/json": {"schema": {"$ref": f"#/components/schemas/{op.body}"}}}}
    return operation


_NULLABLE_TEXT: dict[str, Any] = {"type": ["string", "null"]}
_BRAND_FIELDS: dict[str, Any] = {
    "product_name": {**_NULLABLE_TEXT, "maxLength": MAX_PRODUCT_NAME,
                     "description": "Plain text; escaped wherever it is shown"},
    "logo_url": {**_NULLABLE_TEXT, "maxLength": MAX_BRAND_URL,
                 "description": "https only; an <img> in the HTML part of emails"},
    "brand_color": {**_NULLABLE_TEXT, "pattern": "^#[0-9a-fA-F]{6}$"},
    "support_url": {**_NULLABLE_TEXT, "maxLength": MAX_BRAND_URL},
    "default_locale": {**_NULLABLE_TEXT, "maxLength": 35,
                       "description": "The emails this app's calls queue when neither the"
                       " request nor the account names a locale"},
}
_TEMPLATE_FIELDS: dict[str, Any] = {name: {"type": "string"} for name in ("subject", "text",
                                                                           "html")}
_SETTINGS_SCHEMAS: dict[str, Any] = {
    "AppBrand": {
        "type": "object", "additionalProperties": False,
        "required": ["id", "name", *_BRAND_FIELDS, "mail_from"],
        "properties": {"id": {"type": "string", "format": "uuid"}, "name": {"type": "string"},
                       **_BRAND_FIELDS,
                       "mail_from": {**_NULLABLE_TEXT,
                                     "description": "Set by operators only"}},
    },
    "AppBrandChange": {"type": "object", "additionalProperties": False,
                       "properties": _BRAND_FIELDS},
    "StoredEmailTemplate": {
        "type": "object", "additionalProperties": False,
        "required": ["kind", "locale", "subject", "text", "html", "updated_at"],
        "properties": {"kind": {"type": "string", "enum": list(TEMPLATE_KINDS)},
                       "locale": {"type": "string"}, **_TEMPLATE_FIELDS,
                       "updated_at": {"type": "string", "format": "date-time"}},
    },
    "EmailTemplates": {
        "type": "object", "additionalProperties": False, "required": ["templates"],
        "properties": {"templates": {"type": "array", "items": {
            "$ref": "#/components/schemas/StoredEmailTemplate"}}},
    },
    "RenderedEmail": {"type": "object", "additionalProperties": False,
                      "required": ["subject", "text", "html"], "properties": _TEMPLATE_FIELDS},
}

_PROBLEM_SCHEMA = {
    "type": "object",
    "description": "RFC 9457 problem details; `code` is stable, `detail` is for people.",
    "required": ["type", "title", "status", "detail", "code"],
    "properties": {
        "type": {"type": "string", "description": "urn:authsvc:problem:<code>"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "code": {
            "type": "string",
            # Not an enum here: a client built today must still read a code added later.
            # Each answer's own schema (InvalidTokenInvalidCodeProblem, …) has the enum.
            "description": "Stable error code; each response's schema narrows it to the codes"
            " it carries (also in `x-problem-codes`). Known codes: "
            + ", ".join(sorted(TITLES)) + ".",
        },
        "errors": {
            "type": "array",
            "description": "Field problems, for invalid_request and redirect_not_allowed.",
            "items": {"$ref": "#/components/schemas/FieldProblem"},
        },
    },
}
_FIELD_PROBLEM_SCHEMA = {
    "type": "object",
    "required": ["pointer", "detail"],
    "properties": {
        "pointer": {"type": "string", "description": "JSON pointer into the body, e.g. #/email"},
        "detail": {"type": "string"},
    },
}
_DESCRIPTION = f"""\
JSON API for apps that embed signup verification, password resets, address
changes, account deletion and sign-in by email.

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
`checkCredentials` validates the key but never stores or replays its answer.

**Codes.** Every verification, reset and sign-in email carries a link and a 6-digit code
for the same request. The confirm calls take either `{{token}}` or `{{email, code}}`.
"""


def openapi_document(base_url: str = DEFAULT_SERVER) -> dict[str, Any]:
    """The whole document, as served at GET /api/v1/openapi.json (`base_url`: this server)."""
    paths: dict[str, Any] = {
        API_PREFIX + path: {"post": _post(op)} for path, op in OPERATIONS.items()
    }
    for op in RESOURCE_OPERATIONS:
        paths.setdefault(API_PREFIX + op.path, {})[op.method] = _resource(op)
    paths[f"{API_PREFIX}/openapi.json"] = {
        "get": {
            "operationId": "getOpenApiDocument",
            "tags": ["meta"],
            "summary": "This document",
            "description": "The OpenAPI 3.1 description of this API; no key needed.",
            "security": [],
            "responses": {
                "200": {
                    "description": "OpenAPI 3.1 document",
                    "content": {"application/json": {"schema": {"type": "object"}}},
                },
                # Built from code alone: no database, so never 503.
                "500": _problem_response(500, ["internal_error"], False),
            },
        }
    }
    specs = (SIGNUP, LINK_REQUEST, VERIFICATION_CONFIRM, PASSWORD_RESET_CONFIRM, SESSION,
             EMAIL_CHANGE, EMAIL_CHANGE_CONFIRM, EMAIL_CHANGE_UNDO, ACCOUNT_DELETION,
             ACCOUNT_DELETION_CONFIRM, SIGN_IN_REQUEST, SIGN_IN_CONFIRM, TEMPLATE_BODY,
             TEMPLATE_DRAFT)
    problem_schemas = {
        problem_schema_name(codes): _problem_schema(codes)
        for item in paths.values() for operation in item.values()
        for response in operation["responses"].values()
        if (codes := response.get("x-problem-codes"))
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "authsvc API", "version": "1", "description": _DESCRIPTION},
        "servers": [{"url": base_url, "description": "This authsvc (AUTHSVC_BASE_URL)"}],
        "security": [{"appKey": []}],
        "tags": [
            {"name": "signups", "description": "Accounts and their verification email"},
            {"name": "verifications", "description": "Confirming an email address"},
            {"name": "password-resets", "description": "Choosing a new password by email"},
            {"name": "sessions", "description": "Checking credentials"},
            {"name": "email-changes", "description": "Changing an address, and undoing it"},
            {"name": "account-deletions", "description": "Deleting an account"},
            {"name": "sign-in-links", "description": "Signing in by email"},
            {"name": "app", "description": "The calling app's brand"},
            {"name": "templates", "description": "The calling app's own email templates"},
            {"name": "meta", "description": "About this API"},
        ],
        "paths": paths,
        "components": {
            "securitySchemes": {
                "appKey": {"type": "http", "scheme": "bearer", "description": "The app's API key"}
            },
            "schemas": {
                "Problem": _PROBLEM_SCHEMA,
                "FieldProblem": _FIELD_PROBLEM_SCHEMA,
                **problem_schemas,
                **_RESPONSE_SCHEMAS,
                **_SETTINGS_SCHEMAS,
                **{s.name: body_schema(s) for s in specs},
            },
            "parameters": {
                "IdempotencyKey": {
                    "name": IDEMPOTENCY_HEADER,
                    "in": "header",
                    "required": False,
                    "description": "Makes retries safe: the first outcome is replayed for 24 h"
                    " (not on checkCredentials, which only validates it).",
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
