"""SQL metacharacters, NUL bytes and other hostile text in every field of every input.

Each value goes into one field at a time (the rest valid) of every API
operation, every form and the test-inbox routes. Nothing may answer 5xx, and
afterwards the database must hold exactly what it held plus what a
well-behaved request could add: no table dropped, no row changed.
"""

from __future__ import annotations

from urllib.parse import quote

import pytest
from flask.testing import FlaskClient

from authsvc.accounts import actions
from authsvc.apps.keys import register_app
from authsvc.web.api.openapi import openapi_document
from tests.inbox_support import HttpClient
from tests.pages_support import PASSWORD, csrf_token, make_account

HOSTILE = [
    "' OR '1'='1",
    "'; DROP TABLE users; --",
    "\" OR \"\"=\"",
    "%' OR 1=1 --",
    "1); SELECT pg_sleep(10); --",
    "$$; DROP TABLE users; $$",
    "\\'; TRUNCATE users CASCADE; --",
    "%(email)s %s {email}",
    "\x00",
    "a\x00b",
    "canary@example.com\x00' OR '1'='1",
    "x'--@example.com",
    "robert'); DROP TABLE users;--@example.com",
    "ann\u2028@example.com",
    "\ud800",  # a lone surrogate: valid in JSON, unencodable as UTF-8
    "\ufeff\u202e@example.com",
]
CANARY = "canary@example.com"
# Forms and URLs travel as UTF-8: a lone surrogate cannot even be sent there.
ENCODABLE = [v for v in HOSTILE if not any(0xD800 <= ord(c) <= 0xDFFF for c in v)]


@pytest.fixture
def env(env: dict[str, str]) -> dict[str, str]:
    # The inbox routes are probed too; limits off so every value reaches the handler.
    return {**env, "AUTHSVC_TEST_INBOX": "on", "AUTHSVC_RATE_LIMIT_APP": "1000000/1d",
            "AUTHSVC_RATE_LIMIT_IP": "1000000/1d", "AUTHSVC_RATE_LIMIT_LOGIN": "1000000/1d",
            "AUTHSVC_RATE_LIMIT_EMAIL": "1000000/1d"}


def _snapshot(conn) -> dict[str, object]:
    """What hostile input must not have touched."""
    canary = conn.execute(
        "SELECT id, password_hash, email_verified_at, reset_version, verify_version,"
        " signup_count FROM users WHERE email = %s", (CANARY,)
    ).fetchone()
    tables = conn.execute(
        "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
    ).fetchone()
    apps = conn.execute("SELECT count(*) FROM apps").fetchone()
    return {"canary": canary, "tables": tables, "apps": apps}


def _resolve(node: dict, document: dict) -> dict:
    while "$ref" in node:
        target = document
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


def _operations() -> list[tuple[str, list[str]]]:
    """(path, body fields) of every documented POST, read from the OpenAPI document."""
    document = openapi_document()
    found = []
    for path, item in document["paths"].items():
        body = item.get("post", {}).get("requestBody")
        if body:
            body = _resolve(body, document)
            schema = _resolve(body["content"]["application/json"]["schema"], document)
            # A template's path names its kind and locale (SPEC §14).
            found.append((path.replace("{kind}", "verify").replace("{locale}", "en"),
                          sorted(schema["properties"])))
    return found


VALID = {"email": "someone@example.com", "password": "a perfectly fine passphrase",
         "token": "abc.def", "redirect_url": "https://allowed.example.com/welcome",
         "code": "123456", "new_email": "elsewhere@example.com", "locale": "en",
         "sign_in_code": "123456", "subject": "s", "text": "{{ link }} {{ code }}",
         "html": "{{ link }} {{ code }}"}


def test_hostile_text_in_every_api_field_is_a_4xx_and_harmless(client: FlaskClient, conn,
                                                               svc) -> None:
    make_account(conn, svc, CANARY)
    _app, key = register_app(conn, "hostile", ["https://allowed.example.com/welcome"])
    before = _snapshot(conn)
    operations = _operations()
    assert len(operations) >= 6, operations
    answers: list[tuple[str, str, str, int]] = []
    for path, fields in operations:
        for field in fields:
            for value in HOSTILE:
                body = {name: VALID[name] for name in fields if name != "redirect_url"}
                if "code" in fields:  # a confirm call: the token, or the address and code
                    for name in ("token",) if field in ("email", "code") else ("email", "code"):
                        body.pop(name)
                if "sign_in_code" in fields:  # the password, or a sign-in code instead
                    body.pop("password" if field == "sign_in_code" else "sign_in_code")
                body[field] = value
                response = client.post(path, json=body, headers={
                    "Authorization": f"Bearer {key}", "Idempotency-Key": f"k-{len(answers)}"})
                answers.append((path, field, value, response.status_code))
                assert response.status_code < 500, (path, field, value, response.get_data())
                if response.status_code >= 400:
                    assert response.mimetype == "application/problem+json"
    # Hostile values in Idempotency-Key and Authorization headers, too.
    for value in HOSTILE:
        ascii_value = value.encode("ascii", "backslashreplace").decode()
        for headers in ({"Authorization": f"Bearer {key}", "Idempotency-Key": ascii_value},
                        {"Authorization": f"Bearer {ascii_value}"}):
            response = client.post("/api/v1/password-resets",
                                   json={"email": "someone@example.com"}, headers=headers)
            assert response.status_code < 500, (headers, response.get_data())
    assert _snapshot(conn) == before
    assert actions.authenticate(conn, svc, email=CANARY, password=PASSWORD)


FORMS = {
    "/signup": {"email": "someone@example.com", "password": PASSWORD},
    "/login": {"email": CANARY, "password": PASSWORD},
    "/reset": {"email": "someone@example.com"},
    "/verify/request": {"email": "someone@example.com"},
    "/reset/confirm": {"token": "abc.def", "password": PASSWORD},
    "/verify": {"token": "abc.def"},
    "/links/resend": {"token": "abc.def", "purpose": "reset"},
    "/email-change/confirm": {"token": "abc.def"},
    "/email-change/undo": {"token": "abc.def", "password": PASSWORD},
    "/email-change/code": {"email": "someone@example.com", "code": "123456"},
    "/account/delete": {"token": "abc.def"},
    "/account/delete/code": {"email": CANARY, "code": "123456"},
}


def test_hostile_text_in_every_form_field_is_a_4xx_and_harmless(client: FlaskClient, conn,
                                                                svc) -> None:
    make_account(conn, svc, CANARY)
    before = _snapshot(conn)
    tried = 0
    token = csrf_token(client, "/login")  # one per session, valid for every form
    for path, fields in FORMS.items():
        for field in fields:
            for value in ENCODABLE:
                response = client.post(path, data={"csrf_token": token, **fields, field: value})
                tried += 1
                assert response.status_code < 500, (path, field, value, response.status_code)
                assert response.status_code not in (404, 405), path
    # The signed-in form: change password.
    client.post("/login", data={"csrf_token": token, "email": CANARY, "password": PASSWORD})
    token = csrf_token(client, "/account")
    for field in ("current", "new"):
        for value in ENCODABLE:
            data = {"csrf_token": token, "current": "wrong passphrase", "new": PASSWORD}
            data[field] = value
            assert client.post("/account/password", data=data).status_code < 500
    # And the other signed-in forms: change the address, delete the account (SPEC §12).
    for path, form in (("/account/email", {"new_email": "someone@example.com",
                                           "current": "wrong passphrase"}),
                       ("/account/delete/request", {"current": "wrong passphrase"})):
        for field in form:
            for value in ENCODABLE:
                data = {"csrf_token": token, **form, field: value}
                assert client.post(path, data=data).status_code < 500, (path, field, value)
    assert tried == sum(len(f) for f in FORMS.values()) * len(ENCODABLE)
    assert _snapshot(conn) == before


def test_hostile_scope_names_in_the_test_inbox_are_harmless(inbox: HttpClient, conn) -> None:
    client = inbox
    before = _snapshot(conn)
    for raw in ENCODABLE:
        value = quote(raw, safe="")
        for url in (f"/_inbox/scopes/{value}/messages?wait=0",
                    f"/_inbox/scopes/{value}/expect-one?timeout=0&settle=0",
                    f"/_inbox/scopes/run/messages?wait=0&since={value}&min={value}"):
            assert client.get(url).status_code < 500, url
        assert client.delete(f"/_inbox/scopes/{value}").status_code < 500
    assert _snapshot(conn) == before
