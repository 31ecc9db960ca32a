"""No documented answer is invented, none is missing: each one is produced here.

For every operation of the OpenAPI document this test makes the server give
each (status, code) the document lists, checks each body against its schema,
and finally compares the set it observed with the set documented. An answer
the document lists but nothing here can provoke is an invented one; an
answer the server gives that the document lacks fails assert_documented.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from werkzeug.test import TestResponse

from authsvc.accounts.code_tries import MAX_ATTEMPTS
from authsvc.apps.idempotency import try_lock_key
from authsvc.apps.keys import register_app
from authsvc.web.app import MAX_BODY_BYTES
from tests.api_support import (
    ALLOWED_REDIRECT,
    ApiCaller,
    assert_documented,
    documented_path,
    register_shop_app,
)
from tests.link_support import latest_code, latest_link

PASSWORD = "correct horse battery"
NEW = "a brand new passphrase"
Observed = set[tuple[str, str, int, str]]


def _record(seen: Observed, method: str, path: str, response: TestResponse) -> TestResponse:
    assert_documented(response, method, path)
    body = response.get_json(force=True, silent=True) or {}
    code = body.get("code", "") if response.status_code >= 400 else ""
    seen.add((method, path, response.status_code, code))
    return response


def _documented(document: dict) -> Observed:
    found: Observed = set()
    for full_path, item in document["paths"].items():
        path = full_path.removeprefix("/api/v1")
        for method, operation in item.items():
            for status, response in operation["responses"].items():
                for code in response.get("x-problem-codes", [""]):
                    found.add((method.upper(), path, int(status), code))
    return found


@pytest.fixture
def seen() -> Observed:
    return set()


def test_every_documented_answer_is_given_and_no_other(
    client, conn, svc, clock, app_with, database_url, monkeypatch, seen
):
    app, key = register_shop_app(conn)
    api = ApiCaller(client, app, key)
    posts = ["/signups", "/verifications", "/verifications/confirm", "/password-resets",
             "/password-resets/confirm", "/email-changes", "/email-changes/confirm",
             "/email-changes/approve", "/email-changes/undo", "/account-deletions",
             "/account-deletions/confirm", "/sign-in-links", "/sign-in-links/confirm",
             "/sessions"]
    counter = iter(range(10_000))

    def fresh(prefix: str = "u") -> str:
        return f"{prefix}{next(counter)}@example.com"

    def post(path: str, body: object = None, **kwargs: Any) -> TestResponse:
        return _record(seen, "POST", path, api.post(path, body, **kwargs))

    def signed_up(email: str) -> str:
        assert post("/signups", {"email": email, "password": PASSWORD}).status_code == 202
        return email

    # --- answers every POST gives ---------------------------------------
    limited_app = app_with(AUTHSVC_RATE_LIMIT_APP="1/1m").test_client()
    for path in posts:
        post(path, {"nope": 1})  # 400 invalid_request
        _record(seen, "POST", path, client.post("/api/v1" + path, json={}))  # 401
        post(path, data=b"{" + b" " * MAX_BODY_BYTES + b"}",
             headers={"Content-Type": "application/json"})  # 413
        post(path, data="x", headers={"Content-Type": "text/plain"})  # 415
        _limited, limited_key = register_app(conn, f"limited{path}", [ALLOWED_REDIRECT])
        limited = ApiCaller(limited_app, _limited, limited_key)
        limited.post(path, {})
        _record(seen, "POST", path, limited.post(path, {}))  # 429 (the app's budget)

    # 500 and 503: a bug and a lost database, on every operation.
    def failing(exc: Exception) -> Callable[..., object]:
        def fail(*_args: object, **_kwargs: object) -> object:
            raise exc
        return fail

    for exc in (RuntimeError("bug"), psycopg.OperationalError("gone")):
        with monkeypatch.context() as patch:
            patch.setattr("authsvc.web.api.views.parse_body", failing(exc))
            for path in posts:
                post(path, {"email": "a@example.com"})
    with monkeypatch.context() as patch:  # the document needs no database: only a bug fails it
        patch.setattr("authsvc.web.api.views.openapi_document", failing(RuntimeError("bug")))
        _record(seen, "GET", "/openapi.json", client.get("/api/v1/openapi.json"))
    _record(seen, "GET", "/openapi.json", client.get("/api/v1/openapi.json"))

    # 409 and 422 on the calls that store their outcome under an Idempotency-Key.
    def runnable(path: str, n: int) -> dict[str, str]:
        """A body that parses, so the call gets as far as its Idempotency-Key."""
        return {
            "/signups": {"email": fresh(), "password": PASSWORD},
            "/verifications": {"email": fresh()},
            "/password-resets": {"email": fresh()},
            "/verifications/confirm": {"token": f"nope{n}"},
            "/password-resets/confirm": {"token": f"nope{n}", "password": NEW},
            "/email-changes": {"email": fresh(), "password": PASSWORD, "new_email": fresh()},
            "/email-changes/confirm": {"token": f"nope{n}"},
            "/email-changes/approve": {"token": f"nope{n}"},
            "/email-changes/undo": {"token": f"nope{n}"},
            "/account-deletions": {"email": fresh(), "password": PASSWORD},
            "/account-deletions/confirm": {"token": f"nope{n}"},
            "/sign-in-links": {"email": fresh()},
            "/sign-in-links/confirm": {"token": f"nope{n}"},
        }[path]

    for path in posts[:-1]:  # all but /sessions
        with psycopg.connect(database_url, autocommit=True) as other, other.transaction():
            assert try_lock_key(other, app.id, f"busy{path}")
            post(path, runnable(path, 0), idempotency_key=f"busy{path}")  # 409
        post(path, runnable(path, 1), idempotency_key=f"reused{path}")
        post(path, runnable(path, 2), idempotency_key=f"reused{path}")  # 422 reused

    # --- each operation's own answers -----------------------------------
    post("/signups", {"email": fresh(), "password": PASSWORD})  # 202
    post("/signups", {"email": fresh(), "password": "password"})  # 422 weak
    for path in ("/signups", "/verifications", "/password-resets", "/sign-in-links"):
        body = {"email": fresh(), "redirect_url": "https://evil.example/"}
        if path == "/signups":
            body["password"] = PASSWORD
        post(path, body)  # 400 redirect_not_allowed
    post("/verifications", {"email": fresh()})  # 202
    post("/password-resets", {"email": fresh()})  # 202

    for path, purpose in (("/verifications/confirm", "verify"),
                          ("/password-resets/confirm", "reset")):
        def confirm(body: dict, path: str = path) -> TestResponse:
            if path == "/password-resets/confirm":
                body = {"password": NEW, **body}
            return post(path, body)

        def issued(purpose: str = purpose) -> str:
            email = signed_up(fresh())
            if purpose == "reset":
                post("/password-resets", {"email": email})
            return email

        ann = issued()
        token = latest_link(conn, svc, ann, purpose)
        confirm({"token": "nope"})  # 400 invalid_token
        confirm({"email": ann, "code": "x"})  # 400 invalid_code
        confirm({"token": token})  # 200
        confirm({"token": token})  # 410 token_used
        bo = issued()
        old = latest_link(conn, svc, bo, purpose)
        post("/verifications" if purpose == "verify" else "/password-resets", {"email": bo})
        confirm({"token": old})  # 410 token_superseded
        cy = issued()
        for _ in range(MAX_ATTEMPTS + 1):
            confirm({"email": cy, "code": "x"})  # ... 410 code_exhausted
        dee = issued()
        if purpose == "verify":
            confirm({"token": latest_link(conn, svc, bo, purpose)})  # 422 password_required
        confirm({"token": latest_link(conn, svc, dee, purpose), "password": "password"})  # 422 weak
        confirm({"email": dee, "code": latest_code(conn, svc, dee, purpose)})  # 200 by code
        eve = issued()
        clock.advance(svc.tokens.ttl(purpose))
        confirm({"token": latest_link(conn, svc, eve, purpose)})  # 410 token_expired

    ok = signed_up(fresh())
    post("/verifications/confirm", {"token": latest_link(conn, svc, ok, "verify")})
    post("/sessions", {"email": ok, "password": PASSWORD})  # 200
    post("/sessions", {"email": ok, "password": "wrong password!"})  # 401
    login_limited = app_with(AUTHSVC_RATE_LIMIT_LOGIN="1/15m").test_client()
    for _ in range(2):
        response = ApiCaller(login_limited, app, key).post(
            "/sessions", {"email": ok, "password": "wrong password!"})
    assert response.status_code == 429  # the address's login limit, documented as 429 too
    _record(seen, "POST", "/sessions", response)

    _sign_in_answers(post, signed_up, fresh, conn, svc, clock)
    _address_life_answers(post, signed_up, fresh, conn, svc, clock)
    strict = ApiCaller(app_with(AUTHSVC_EMAIL_CHANGE_CONFIRM_OLD="on").test_client(), app, key)

    def strict_post(path: str, body: object = None) -> TestResponse:
        return _record(seen, "POST", path, strict.post(path, body))

    _approval_answers(strict_post, fresh, conn, svc, clock)
    _app_settings_answers(seen, client, api, conn, app_with, monkeypatch)

    documented = _documented(client.get("/api/v1/openapi.json").get_json())
    assert sorted(documented - seen) == [], "documented but never given (invented?)"
    assert sorted(seen - documented) == [], "given but not documented"


def _sign_in_answers(
    post: Callable[..., TestResponse], signed_up: Callable[[str], str],
    fresh: Callable[..., str], conn: psycopg.Connection, svc: Any, clock: Any,
) -> None:
    """Each answer of the sign-in by email operations (SPEC §13)."""

    def issued() -> str:
        email = signed_up(fresh("si"))
        assert post("/sign-in-links", {"email": email}).status_code == 202  # 202
        return email

    ann = issued()
    token = latest_link(conn, svc, ann, "sign_in")
    post("/sign-in-links/confirm", {"token": "nope"})  # 400 invalid_token
    post("/sign-in-links/confirm", {"email": ann, "code": "x"})  # 400 invalid_code
    post("/sign-in-links/confirm", {"token": token})  # 200
    post("/sign-in-links/confirm", {"token": token})  # 410 token_used
    bo = issued()
    old = latest_link(conn, svc, bo, "sign_in")
    post("/sign-in-links", {"email": bo})
    post("/sign-in-links/confirm", {"token": old})  # 410 token_superseded
    cy = issued()
    for _ in range(MAX_ATTEMPTS + 1):
        post("/sign-in-links/confirm", {"email": cy, "code": "x"})  # 410 code_exhausted
    eve = issued()
    clock.advance(svc.tokens.ttl("sign_in"))
    post("/sign-in-links/confirm",
         {"token": latest_link(conn, svc, eve, "sign_in")})  # 410 token_expired


def _address_life_answers(
    post: Callable[..., TestResponse], signed_up: Callable[[str], str],
    fresh: Callable[..., str], conn: psycopg.Connection, svc: Any, clock: Any,
) -> None:
    """Each answer of the address change, undo and deletion operations (SPEC §12)."""

    def confirmed(email: str) -> str:
        signed_up(email)
        post("/verifications/confirm", {"token": latest_link(conn, svc, email, "verify")})
        return email

    def change(email: str, new_email: str, **extra: str) -> TestResponse:
        return post("/email-changes",
                    {"email": email, "password": PASSWORD, "new_email": new_email, **extra})

    def undo_link_of(email: str, new_email: str) -> str:
        assert change(email, new_email).status_code == 202
        token = latest_link(conn, svc, new_email, "email_change")
        assert post("/email-changes/confirm", {"token": token}).status_code == 200
        return latest_link(conn, svc, email, "email_revert")

    # requestEmailChange: 202, 400 redirect_not_allowed, 401
    ann = confirmed(fresh("ann"))
    change(ann, fresh())  # 202
    change(ann, fresh(), redirect_url="https://evil.example/")  # 400 redirect_not_allowed
    post("/email-changes", {"email": ann, "password": "wrong password!",
                            "new_email": fresh()})  # 401

    # confirmEmailChange
    target = fresh()
    change(ann, target)
    token = latest_link(conn, svc, target, "email_change")
    post("/email-changes/confirm", {"token": "nope"})  # 400 invalid_token
    post("/email-changes/confirm", {"email": target, "code": "x"})  # 400 invalid_code
    post("/email-changes/confirm", {"token": token})  # 200
    post("/email-changes/confirm", {"token": token})  # 410 token_used
    bo = confirmed(fresh("bo"))
    first_target = fresh()
    change(bo, first_target)
    old = latest_link(conn, svc, first_target, "email_change")
    second_target = fresh()
    change(bo, second_target)
    post("/email-changes/confirm", {"token": old})  # 410 token_superseded
    post("/email-changes/confirm", {"email": second_target,
                                    "code": latest_code(conn, svc, second_target,
                                                        "email_change")})  # 200 by code
    cy = confirmed(fresh("cy"))
    cys_target = fresh()
    change(cy, cys_target)
    for _ in range(MAX_ATTEMPTS + 1):
        post("/email-changes/confirm", {"email": cys_target, "code": "x"})  # 410 code_exhausted
    dee = confirmed(fresh("dee"))
    taken = fresh()
    change(dee, taken)
    confirmed(taken)  # someone else proves the address meanwhile
    post("/email-changes/confirm",
         {"token": latest_link(conn, svc, taken, "email_change")})  # 409 email_taken

    # undoEmailChange
    eve = confirmed(fresh("eve"))
    undo = undo_link_of(eve, fresh())
    post("/email-changes/undo", {"token": "nope"})  # 400 invalid_token
    post("/email-changes/undo", {"token": undo, "password": "password"})  # 422 weak_password
    post("/email-changes/undo", {"token": undo})  # 200
    post("/email-changes/undo", {"token": undo})  # 410 token_used
    fay = confirmed(fresh("fay"))
    fays_undo = undo_link_of(fay, fresh())
    confirmed(fay)  # fay's old address is signed up and proven by someone else
    post("/email-changes/undo", {"token": fays_undo, "password": NEW})  # 409 email_taken

    # requestAccountDeletion: 202, 401
    gus = confirmed(fresh("gus"))
    post("/account-deletions", {"email": gus, "password": PASSWORD})  # 202
    post("/account-deletions", {"email": gus, "password": "wrong password!"})  # 401

    # confirmAccountDeletion
    old = latest_link(conn, svc, gus, "account_delete")
    post("/account-deletions", {"email": gus, "password": PASSWORD})
    post("/account-deletions/confirm", {"token": old})  # 410 token_superseded
    post("/account-deletions/confirm", {"token": "nope"})  # 400 invalid_token
    post("/account-deletions/confirm", {"email": gus, "code": "x"})  # 400 invalid_code
    post("/account-deletions/confirm",
         {"token": latest_link(conn, svc, gus, "account_delete")})  # 200
    hal = confirmed(fresh("hal"))
    post("/account-deletions", {"email": hal, "password": PASSWORD})
    for _ in range(MAX_ATTEMPTS + 1):
        post("/account-deletions/confirm", {"email": hal, "code": "x"})  # 410 code_exhausted
    ida = confirmed(fresh("ida"))
    post("/account-deletions", {"email": ida, "password": PASSWORD})
    post("/account-deletions/confirm",
         {"email": ida, "code": latest_code(conn, svc, ida, "account_delete")})  # 200 by code

    # Lifetimes last: the clock moves on for everyone.
    jo = confirmed(fresh("jo"))
    jos_target = fresh()
    change(jo, jos_target)
    post("/account-deletions", {"email": jo, "password": PASSWORD})
    jos_undo_owner = confirmed(fresh("jo"))
    jos_undo = undo_link_of(jos_undo_owner, fresh())
    clock.advance(max(svc.tokens.ttl("email_change"), svc.tokens.ttl("account_delete")))
    post("/email-changes/confirm",
         {"token": latest_link(conn, svc, jos_target, "email_change")})  # 410 token_expired
    post("/account-deletions/confirm",
         {"token": latest_link(conn, svc, jo, "account_delete")})  # 410 token_expired
    clock.advance(svc.tokens.ttl("email_revert"))
    post("/email-changes/undo", {"token": jos_undo})  # 410 token_expired


def _approval_answers(
    post: Callable[..., TestResponse], fresh: Callable[..., str], conn: psycopg.Connection,
    svc: Any, clock: Any,
) -> None:
    """Each answer of a change that needs both addresses (AUTHSVC_EMAIL_CHANGE_CONFIRM_OLD)."""

    def confirmed(email: str) -> str:
        post("/signups", {"email": email, "password": PASSWORD})
        post("/verifications/confirm", {"token": latest_link(conn, svc, email, "verify")})
        return email

    def change(email: str, new_email: str) -> str:
        post("/email-changes", {"email": email, "password": PASSWORD, "new_email": new_email})
        return new_email

    def approval(email: str) -> str:
        return latest_link(conn, svc, email, "email_change_approval")

    ann = confirmed(fresh("ann"))
    target = change(ann, fresh())
    post("/email-changes/confirm",
         {"token": latest_link(conn, svc, target, "email_change")})  # 202 awaiting_old_address
    post("/email-changes/approve", {"token": approval(ann)})  # 200
    bo = confirmed(fresh("bo"))
    target = change(bo, fresh())
    token = approval(bo)
    post("/email-changes/approve", {"token": token})  # 202 awaiting_new_address
    post("/email-changes/approve", {"token": token})  # 410 token_used
    post("/email-changes/approve", {"token": "nope"})  # 400 invalid_token
    post("/email-changes/approve", {"email": bo, "code": "x"})  # 400 invalid_code
    cy = confirmed(fresh("cy"))
    change(cy, fresh())
    old = approval(cy)
    change(cy, fresh())
    post("/email-changes/approve", {"token": old})  # 410 token_superseded
    for _ in range(MAX_ATTEMPTS + 1):
        post("/email-changes/approve", {"email": cy, "code": "x"})  # 410 code_exhausted
    dee = confirmed(fresh("dee"))
    taken = change(dee, fresh())
    post("/email-changes/confirm", {"token": latest_link(conn, svc, taken, "email_change")})
    confirmed(taken)  # someone else proves the address meanwhile
    post("/email-changes/approve", {"token": approval(dee)})  # 409 email_taken
    eve = confirmed(fresh("eve"))
    change(eve, fresh())
    post("/email-changes/approve", {"email": eve, "code": latest_code(
        conn, svc, eve, "email_change_approval")})  # 202 by code
    fay = confirmed(fresh("fay"))
    change(fay, fresh())
    clock.advance(svc.tokens.ttl("email_change_approval"))
    post("/email-changes/approve", {"token": approval(fay)})  # 410 token_expired


TEMPLATE = {"subject": "s", "text": "{{ link }} {{ code }}", "html": "{{ link }} {{ code }}"}


def _app_settings_answers(seen: Observed, client: Any, api: ApiCaller, conn: psycopg.Connection,
                          app_with: Any, monkeypatch: Any) -> None:
    """Every answer of the calling app's own settings (SPEC §14: /app, /templates)."""
    def call(method: str, path: str, body: Any = None, **kwargs: Any) -> TestResponse:
        return _record(seen, method, documented_path(path), api.call(method, path, body, **kwargs))

    template = "/templates/verify/de"
    operations = [("GET", "/app"), ("PATCH", "/app"), ("GET", "/templates"),
                  ("PUT", template), ("DELETE", template), ("POST", template + "/preview")]
    bodies = {"PATCH": {"product_name": "Shop"}, "PUT": TEMPLATE, "POST": {}}
    limited_app = app_with(AUTHSVC_RATE_LIMIT_APP="1/1m").test_client()
    limited, limited_key = register_app(conn, "limited-settings", [])
    for method, path in operations:
        response = client.open("/api/v1" + path, method=method, json=bodies.get(method))
        _record(seen, method, documented_path(path), response)  # 401
        limited_caller = ApiCaller(limited_app, limited, limited_key)
        limited_caller.call(method, path, bodies.get(method))
        _record(seen, method, documented_path(path),
                limited_caller.call(method, path, bodies.get(method)))  # 429
    failing_points = {
        ("GET", "/app"): "authsvc.apps.brands.brand_fields",
        ("PATCH", "/app"): "authsvc.web.api.app_settings.read_json_object",
        ("GET", "/templates"): "authsvc.emails.app_templates.list_templates",
        ("PUT", template): "authsvc.web.api.app_settings.parse_body",
        ("DELETE", template): "authsvc.emails.app_templates.delete_template",
        ("POST", template + "/preview"): "authsvc.web.api.app_settings.parse_body",
    }
    for exc in (RuntimeError("bug"), psycopg.OperationalError("gone")):
        def fail(*_args: object, exc: Exception = exc, **_kwargs: object) -> object:
            raise exc
        for (method, path), target in failing_points.items():
            with monkeypatch.context() as patch:
                patch.setattr(target, fail)
                call(method, path, bodies.get(method))  # 500, 503
    for method, path in (("PATCH", "/app"), ("PUT", template), ("POST", template + "/preview")):
        call(method, path, data="x", headers={"Content-Type": "text/plain"})  # 415
        call(method, path, data=b"{" + b" " * (1024 * 1024) + b"}",
             headers={"Content-Type": "application/json"})  # 413
        call(method, path, {"nope": 1})  # 400 invalid_request
    call("GET", "/app")  # 200
    call("PATCH", "/app", {"brand_color": "#aabbcc"})  # 200
    call("PUT", "/templates/nope/de", TEMPLATE)  # 404 not_found
    call("PUT", template, {**TEMPLATE, "text": "{% for x in y %}{% endfor %}"})  # 422
    call("POST", template + "/preview", {})  # 404 template_not_found
    call("POST", "/templates/nope/de/preview", {})  # 404 not_found
    call("POST", template + "/preview", {**TEMPLATE, "html": "{{ nope }}"})  # 422
    call("PUT", template, TEMPLATE)  # 200
    call("GET", "/templates")  # 200
    call("POST", template + "/preview", {})  # 200
    call("DELETE", "/templates/verify/not%20a%20tag")  # 400
    call("DELETE", "/templates/nope/de")  # 404 not_found
    call("DELETE", template)  # 204
    call("DELETE", template)  # 404 template_not_found
