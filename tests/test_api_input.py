"""SPEC §5 bad input: every endpoint answers 4xx problem+json with the right code, never 5xx."""

from __future__ import annotations

import json

import pytest

from tests.api_support import ApiCaller, assert_problem, register_shop_app

VALID_BODIES = {
    "/signups": {"email": "ann@example.com", "password": "correct horse battery"},
    "/verifications": {"email": "ann@example.com"},
    "/verifications/confirm": {"token": "abc"},
    "/password-resets": {"email": "ann@example.com"},
    "/password-resets/confirm": {"token": "abc", "password": "correct horse battery"},
    "/sessions": {"email": "ann@example.com", "password": "correct horse battery"},
}
PATHS = list(VALID_BODIES)
EMAIL_PATHS = [p for p, body in VALID_BODIES.items() if "email" in body]
PASSWORD_PATHS = [p for p, body in VALID_BODIES.items() if "password" in body]
REDIRECT_PATHS = ["/signups", "/verifications", "/password-resets"]


def _raw(api: ApiCaller, path: str, data: bytes | str, content_type: str = "application/json"):
    return api.post(path, data=data, headers={"Content-Type": content_type})


RAW_BODIES = {
    "malformed": b'{"email": "ann@example.com",',
    "empty": b"",
    "array": b'["ann@example.com"]',
    "string": b'"ann@example.com"',
    "number": b"42",
    "null": b"null",
    "nan": b'{"email": NaN}',
    "duplicate_member": b'{"email": "a@example.com", "email": "b@example.com"}',
    "bad_utf8": b'{"email": "\xff\xfe@example.com"}',
    "deep_nesting": b"[" * 20000 + b"]" * 20000,
    "huge_number": b'{"email": ' + b"9" * 5000 + b"}",
}


@pytest.mark.parametrize("name", list(RAW_BODIES))
def test_unparseable_bodies_are_invalid_request(api, name):
    for path in PATHS:
        assert_problem(_raw(api, path, RAW_BODIES[name]), 400, "invalid_request")


def test_non_json_content_type_is_415(api):
    for path in PATHS:
        body = json.dumps(VALID_BODIES[path])
        for content_type in ["text/plain", "application/x-www-form-urlencoded", ""]:
            response = _raw(api, path, body, content_type)
            assert_problem(response, 415, "unsupported_media_type")


def test_one_megabyte_body_is_413_problem(api):
    for path in PATHS:
        body = json.dumps({**VALID_BODIES[path], "padding": "x" * 1_000_000})
        assert_problem(_raw(api, path, body), 413, "payload_too_large")


def test_unknown_field_is_invalid_request_naming_it(api):
    for path in PATHS:
        response = api.post(path, {**VALID_BODIES[path], "admin": True})
        body = assert_problem(response, 400, "invalid_request")
        assert body["errors"] == [{"pointer": "#/admin", "detail": "is not a known field"}]


def test_each_missing_required_field_is_invalid_request(api):
    for path, valid in VALID_BODIES.items():
        for name in valid:
            body = {k: v for k, v in valid.items() if k != name}
            problem = assert_problem(api.post(path, body), 400, "invalid_request")
            assert problem["errors"][0]["pointer"] == "#/" + name, path


@pytest.mark.parametrize("value", [None, 42, 1.5, True, [], {}, ["a@example.com"]])
def test_wrong_types_are_invalid_request(api, value):
    for path, valid in VALID_BODIES.items():
        for name in valid:
            response = api.post(path, {**valid, name: value})
            problem = assert_problem(response, 400, "invalid_request")
            assert problem["errors"][0]["pointer"] == "#/" + name, path



def _refused(api, paths, member: str, value, status: int, code: str):
    """(path, problem) for each path's valid body with `member` set to `value`."""
    for path in paths:
        response = api.post(path, {**VALID_BODIES[path], member: value})
        yield path, assert_problem(response, status, code)

@pytest.mark.parametrize(
    "email",
    [
        "a" * 290 + "@example.com",
        "ann\x00@example.com",
        "ann\r\nBcc: x@evil.example@example.com",
        "ann\x07@example.com",
        "ann\ud800@example.com",
        "not-an-email",
        "",
        "   ",
        "@example.com",
        "\u00a0ann@example.com",
        "\x1cann@example.com",
        "ann@example.com\ufeff",
    ],
    ids=[
        "300_chars",
        "nul",
        "crlf",
        "bell",
        "lone_surrogate",
        "no_at",
        "empty",
        "blank",
        "no_local",
        "nbsp",
        "file_separator",
        "bom",
    ],
)
def test_bad_emails_are_invalid_request(api, conn, email):
    for path, problem in _refused(api, EMAIL_PATHS, "email", email, 400, "invalid_request"):
        assert problem["errors"][0]["pointer"] == "#/email", path
    assert conn.execute("SELECT count(*) FROM users").fetchone() == (0,)


@pytest.mark.parametrize(
    "password",
    ["x" * 257, "p\x00ssword-long-enough", "long enough\ud800"],
    ids=["257_chars", "nul", "surrogate"],
)
def test_unstorable_or_overlong_passwords_are_invalid_request(api, password):
    for path, problem in _refused(api, PASSWORD_PATHS, "password", password, 400,
                                  "invalid_request"):
        assert problem["errors"][0]["pointer"] == "#/password", path


def test_control_characters_in_a_new_password_are_weak(api):
    body = {**VALID_BODIES["/signups"], "password": "tab\tinside the password"}
    assert_problem(api.post("/signups", body), 422, "weak_password")


@pytest.mark.parametrize(
    "url",
    [
        "//evil.example",
        "javascript:alert(1)",
        "https://allowed.example.com.evil.net/",
        "https://evil.example/welcome",
        "http://allowed.example.com/welcome",
        "https://allowed.example.com:8443/welcome",
        "https://allowed.example.com/welcomeX",
        "https://allowed.example.com/elsewhere",
        "https://user:pw@allowed.example.com/welcome",
        "https://allowed.example.com/welcome#frag",
        "https://allowed.example.com/welcome\r\nX: y",
        "/welcome",
        "",
    ],
)
def test_redirects_off_the_allowlist_are_refused(api, conn, url):
    for _path, problem in _refused(api, REDIRECT_PATHS, "redirect_url", url, 400,
                                   "redirect_not_allowed"):
        assert problem["errors"] == [
            {"pointer": "#/redirect_url", "detail": "is not on the allowlist"}
        ]
    assert conn.execute("SELECT count(*) FROM email_jobs").fetchone() == (0,)


def test_overlong_redirect_is_invalid_request(api):
    url = "https://allowed.example.com/welcome/" + "a" * 2048
    for path in REDIRECT_PATHS:
        response = api.post(path, {**VALID_BODIES[path], "redirect_url": url})
        assert_problem(response, 400, "invalid_request")


def test_allowed_or_null_redirects_are_accepted(api, conn):
    urls = [
        "https://allowed.example.com/welcome",
        "https://allowed.example.com/welcome/step?x=1",
        None,
    ]
    for path in REDIRECT_PATHS:
        for url in urls:
            response = api.post(path, {**VALID_BODIES[path], "redirect_url": url})
            assert response.status_code == 202, (path, url, response.get_json())
    payloads = [r[0] for r in conn.execute("SELECT payload FROM email_jobs ORDER BY id")]
    # The first signup made the account the app's (SPEC §14): its redirect applies. The
    # second makes the unproven address contested, so nobody's: authsvc's pages.
    assert payloads[:2] == [{"redirect_url": urls[0], "app_name": "shop", "own_account": True},
                            {"app_name": "shop"}]


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer",
        "Bearer ",
        "Basic dXNlcjpwYXNz",
        "Bearer ask_wrong",
        "Bearer not-even-prefixed",
        "Token ask_x",
    ],
)
def test_missing_or_wrong_api_key_is_401(api, conn, authorization):
    headers = {} if authorization is None else {"Authorization": authorization}
    for path in PATHS:
        response = api.client.post("/api/v1" + path, json=VALID_BODIES[path], headers=headers)
        assert_problem(response, 401, "unauthorized")
        assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert conn.execute("SELECT count(*) FROM email_jobs").fetchone() == (0,)


def test_a_key_acts_for_its_own_app(api, conn):
    """The email a request queues belongs to the app whose key made it, not to another app."""
    other, other_key = register_shop_app(conn, "other")
    api.sign_up("a@example.com")  # with shop's key
    response = api.post("/password-resets", {"email": "a@example.com"}, key=other_key)
    assert response.status_code == 202
    queued = conn.execute(
        "SELECT template, app_id FROM email_jobs WHERE recipient = 'a@example.com' ORDER BY id"
    ).fetchall()
    assert queued == [("verify", api.app.id), ("reset", other.id)]
    assert api.app.id != other.id


ROUTING_ERRORS = [
    ("GET", "/api/v1/signups", 405, "method_not_allowed"),
    ("PUT", "/api/v1/sessions", 405, "method_not_allowed"),
    ("DELETE", "/api/v1/password-resets", 405, "method_not_allowed"),
    ("POST", "/api/v1/openapi.json", 405, "method_not_allowed"),
    ("GET", "/api/v1/nope", 404, "not_found"),
    ("POST", "/api/v1/signups/extra", 404, "not_found"),
    ("GET", "/api/v1", 404, "not_found"),
    ("GET", "/api/v1/", 404, "not_found"),
]


def test_routing_errors_inside_the_api_are_problems(client):
    for method, path, status, code in ROUTING_ERRORS:
        response = client.open(path, method=method)
        assert_problem(response, status, code)
        if status == 405:
            assert "Allow" in response.headers


def test_errors_outside_the_api_are_left_to_the_pages(client):
    response = client.get("/definitely-not-a-page")
    assert response.status_code == 404
    assert response.mimetype != "application/problem+json"


BAD_IDEMPOTENCY_KEYS = ["", "x" * 256, "tab\tkey", "newline\nkey", "caf\u00e9", "\x7f"]


def test_malformed_idempotency_keys_are_invalid_request(api, conn):
    for key in BAD_IDEMPOTENCY_KEYS:
        # The test client refuses newlines in headers, so send through the WSGI environ.
        environ = {"HTTP_IDEMPOTENCY_KEY": key.encode("utf-8").decode("latin-1")}
        response = api.post("/password-resets", {"email": "a@example.com"}, environ_base=environ)
        problem = assert_problem(response, 400, "invalid_request")
        assert "Idempotency-Key" in problem["detail"], key
    assert conn.execute("SELECT count(*) FROM email_jobs").fetchone() == (0,)
