"""Helpers for the JSON API tests: an app key, a caller, problem and schema checks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jsonschema
import psycopg
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from authsvc.apps.keys import App, register_app
from authsvc.web.api.openapi import openapi_document

ALLOWED_REDIRECT = "https://allowed.example.com/welcome"
SIGNUP_PASSWORD = "correct horse battery"


@dataclass
class ApiCaller:
    """A test client that sends one app's key with every call."""

    client: FlaskClient
    app: App
    key: str

    def post(
        self,
        path: str,
        body: Any = None,
        *,
        idempotency_key: str | None = None,
        key: str | None = None,
        headers: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> TestResponse:
        sent = {"Authorization": f"Bearer {key or self.key}"}
        if idempotency_key is not None:
            sent["Idempotency-Key"] = idempotency_key
        sent.update(headers or {})
        if body is not None:
            kwargs["json"] = body
        response = self.client.post("/api/v1" + path, headers=sent, **kwargs)
        _check_status_documented(response, path)
        return response

    def call(self, method: str, path: str, body: Any = None, *, key: str | None = None,
             **kwargs: Any) -> TestResponse:
        """Any method on the app's own settings (/app, /templates), with the key."""
        if body is not None:
            kwargs["json"] = body
        headers = {"Authorization": f"Bearer {key or self.key}", **kwargs.pop("headers", {})}
        response = self.client.open("/api/v1" + path, method=method, headers=headers, **kwargs)
        _check_documented(response, method, path)
        return response

    def sign_up(self, email: str, password: str = SIGNUP_PASSWORD) -> None:
        response = self.post("/signups", {"email": email, "password": password})
        assert response.status_code == 202, response.get_json()


_DOCUMENT = openapi_document()


def documented_path(path: str) -> str:
    """The document's path for a concrete one: /templates/verify/de → /templates/{kind}/{locale}."""
    parts = path.split("/")
    if len(parts) >= 4 and parts[1] == "templates":
        parts[2:4] = ["{kind}", "{locale}"]
    return "/".join(parts)


def _check_documented(response: TestResponse, method: str, path: str) -> None:
    operation = _DOCUMENT["paths"].get("/api/v1" + documented_path(path), {}).get(method.lower())
    if operation is None:
        return
    documented = operation["responses"].get(str(response.status_code))
    assert documented, f"{method} {path} answered undocumented {response.status_code}"
    if response.status_code >= 400:
        code = (response.get_json(force=True, silent=True) or {}).get("code")
        assert code in documented["x-problem-codes"], f"{method} {path}: undocumented {code}"


def _check_status_documented(response: TestResponse, path: str) -> None:
    """Every answer any API test sees for a documented operation is one it documents.

    The per-operation check behind "no documented answer is missing": it runs in
    every test that calls the API through ApiCaller (the converse, that every
    documented answer is given, is tests/test_api_documented_answers.py).
    """
    operation = _DOCUMENT["paths"].get("/api/v1" + path, {}).get("post")
    if operation is None:
        return  # an unknown path: its 404 is the router's, not an operation's
    documented = operation["responses"].get(str(response.status_code))
    assert documented, f"POST {path} answered undocumented {response.status_code}"
    if response.status_code >= 400:
        code = (response.get_json(force=True, silent=True) or {}).get("code")
        assert code in documented["x-problem-codes"], f"POST {path}: undocumented {code}"



def register_shop_app(conn: psycopg.Connection, name: str = "shop") -> tuple[App, str]:
    """An app whose one allowed redirect is ALLOWED_REDIRECT."""
    return register_app(conn, name, ["https://allowed.example.com/welcome"])


def assert_problem(response: TestResponse, status: int, code: str) -> dict[str, Any]:
    """The response is an RFC 9457 problem with this status and code."""
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.mimetype == "application/problem+json"
    body = response.get_json(force=True)
    assert body["status"] == status and body["code"] == code, body
    assert body["type"] == f"urn:authsvc:problem:{code}"
    assert body["title"] and body["detail"]
    return body


def _inline_refs(node: Any, document: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        if "$ref" in node:
            target: Any = document
            for part in node["$ref"].removeprefix("#/").split("/"):
                target = target[part.replace("~1", "/").replace("~0", "~")]
            return _inline_refs(target, document)
        return {k: _inline_refs(v, document) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline_refs(v, document) for v in node]
    return node


def assert_documented(response: TestResponse, method: str, path: str) -> None:
    """The status is documented for the operation and the body matches its schema."""
    document = openapi_document()
    operation = document["paths"]["/api/v1" + path][method.lower()]
    documented = operation["responses"].get(str(response.status_code))
    assert documented, f"{method} {path} answered undocumented {response.status_code}"
    if "content" not in documented:  # 204: no body
        assert response.get_data() == b""
        return
    media = documented["content"][response.mimetype]
    schema = _inline_refs(media["schema"], document)
    jsonschema.validate(response.get_json(force=True), schema, cls=jsonschema.Draft202012Validator)


def job_count(conn: psycopg.Connection, recipient: str | None = None) -> int:
    if recipient is None:
        row = conn.execute("SELECT count(*) FROM email_jobs").fetchone()
    else:
        row = conn.execute(
            "SELECT count(*) FROM email_jobs WHERE recipient = %s", (recipient,)
        ).fetchone()
    assert row is not None
    return int(row[0])
