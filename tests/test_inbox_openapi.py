"""The /_inbox OpenAPI document is valid OpenAPI 3.1 and describes what the inbox answers."""

from __future__ import annotations

import re

import jsonschema
import pytest
from openapi_spec_validator import validate

from authsvc.inbox.server import InboxServer
from tests.api_support import _inline_refs
from tests.inbox_support import email, inbox_services, send

# The pages, their script and stylesheet, and the parked-poll count: not the API.
NOT_THE_API = re.compile(r"^/_inbox/(ui/.*|static/.*|waiting|)$")


@pytest.fixture
def server(env, pool, passwords) -> InboxServer:
    return InboxServer(inbox_services(env, pool, passwords), listen_url=None)


@pytest.fixture
def document(inbox) -> dict:
    response = inbox.get("/_inbox/openapi.json")
    assert response.status_code == 200
    return response.json


def _documented_path(path: str) -> str:
    """aiohttp's canonical path (no patterns) as the document spells it."""
    return path.removeprefix("/_inbox").replace("{message_id}", "{id}")


def test_the_document_is_valid_openapi(document):
    assert document["openapi"] == "3.1.0"
    validate(document)


def test_it_lists_exactly_the_api_routes_the_inbox_serves(server, document):
    served = {
        (_documented_path(route.resource.canonical), route.method.lower())
        for route in server.app.router.routes()
        if route.resource is not None and not NOT_THE_API.match(route.resource.canonical)
        and route.method not in ("HEAD", "OPTIONS")
    }
    documented = {(path, method) for path, item in document["paths"].items() for method in item}
    assert served == documented


def _check(document: dict, response, method: str, path: str) -> None:
    operation = document["paths"][path][method]
    documented = operation["responses"].get(str(response.status_code))
    assert documented, f"{method} {path} answered undocumented {response.status_code}"
    media = documented["content"][response.mimetype]
    schema = _inline_refs(media["schema"], document)
    jsonschema.validate(response.json, schema, cls=jsonschema.Draft202012Validator)


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
