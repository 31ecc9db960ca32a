"""The /_inbox OpenAPI document is valid OpenAPI 3.1 and describes what the inbox answers."""

from __future__ import annotations

import re

import jsonschema
import pytest
from flask import Flask
from openapi_spec_validator import validate

from authsvc.config import load_settings
from authsvc.flask_app import create_app
from tests.api_support import _inline_refs
from tests.inbox_support import email, send

UI_ENDPOINTS = re.compile(r"^inbox\.(ui_|index$|static$)")


@pytest.fixture
def inbox_app(env, pool, passwords) -> Flask:
    return create_app(load_settings({**env, "AUTHSVC_TEST_INBOX": "on"}), pool=pool,
                      passwords=passwords)


@pytest.fixture
def inbox(inbox_app):
    return inbox_app.test_client()


@pytest.fixture
def document(inbox) -> dict:
    response = inbox.get("/_inbox/openapi.json")
    assert response.status_code == 200
    return response.get_json()


def _documented_path(rule: str) -> str:
    path = re.sub(r"<(?:int:)?message_id>", "{id}", rule.removeprefix("/_inbox"))
    return re.sub(r"<(\w+)>", r"{\1}", path)


def test_the_document_is_valid_openapi(document):
    assert document["openapi"] == "3.1.0"
    validate(document)


def test_it_lists_exactly_the_api_routes_the_inbox_serves(inbox_app, document):
    served = {
        (_documented_path(rule.rule), method.lower())
        for rule in inbox_app.url_map.iter_rules()
        if rule.endpoint.startswith("inbox.") and not UI_ENDPOINTS.match(rule.endpoint)
        for method in (rule.methods or set()) - {"HEAD", "OPTIONS"}
    }
    documented = {(path, method) for path, item in document["paths"].items() for method in item}
    assert served == documented


def _check(document: dict, response, method: str, path: str) -> None:
    operation = document["paths"][path][method]
    documented = operation["responses"].get(str(response.status_code))
    assert documented, f"{method} {path} answered undocumented {response.status_code}"
    media = documented["content"][response.mimetype]
    schema = _inline_refs(media["schema"], document)
    jsonschema.validate(response.get_json(), schema, cls=jsonschema.Draft202012Validator)


def test_real_answers_match_their_schemas(inbox, sink, document):
    created = inbox.post("/_inbox/scopes")
    _check(document, created, "post", "/scopes")
    scope = created.json["scope"]
    base = f"/_inbox/scopes/{scope}"
    empty = inbox.get(f"{base}/expect-one?timeout=0&settle=0")
    _check(document, empty, "get", "/scopes/{scope}/expect-one")
    send(sink.port, email(f"{scope}@inbox.test", message_id="<authsvc-job-1@h>"))
    one = inbox.get(f"{base}/expect-one?settle=0")
    _check(document, one, "get", "/scopes/{scope}/expect-one")
    send(sink.port, email(f"{scope}@inbox.test", message_id="<authsvc-job-1@h>"))
    two = inbox.get(f"{base}/expect-one?settle=0")
    assert two.status_code == 409
    _check(document, two, "get", "/scopes/{scope}/expect-one")
    _check(document, inbox.get(f"{base}/messages?limit=1"), "get", "/scopes/{scope}/messages")
    _check(document, inbox.get(f"{base}/messages?wait=x"), "get", "/scopes/{scope}/messages")
    _check(document, inbox.get(f"{base}/messages/{one.json['message']['id']}"), "get",
           "/scopes/{scope}/messages/{id}")
    _check(document, inbox.get(f"{base}/messages/999999"), "get", "/scopes/{scope}/messages/{id}")
    _check(document, inbox.get("/_inbox/scopes"), "get", "/scopes")
