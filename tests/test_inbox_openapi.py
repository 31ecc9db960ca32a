"""The /_inbox OpenAPI document is valid OpenAPI 3.1 and describes what the inbox answers."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any
from urllib.request import Request, urlopen

import jsonschema
import psycopg
import pytest
from openapi_spec_validator import validate

from authsvc.inbox.openapi import openapi_document
from authsvc.inbox.server import MAX_BODY_BYTES, InboxServer
from tests.api_support import _inline_refs
from tests.inbox_support import Answer, HttpClient, email, inbox_services, send, serving_inbox

# The pages, their script and stylesheet, and the parked-poll count: not the API.
NOT_THE_API = re.compile(r"^/_inbox/(ui/.*|static/.*|waiting|favicon\.svg|)$")


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
    if "content" not in documented:
        assert response.data == b"", f"{method} {path} {response.status_code} has a body"
        return
    media = documented["content"][response.mimetype]
    if response.mimetype.endswith("json"):
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
    found = inbox.get(f"/_inbox/search?q=to%3A{scope}&limit=1")
    assert found.json["more"] is True and len(found.json["messages"]) == 1
    _check(document, found, "get", "/search")


TOKEN = "openapi-token"
TOO_LARGE = b"x" * (MAX_BODY_BYTES + 1)


def _stream_status(url: str, path: str, token: str) -> tuple[int, bytes]:
    """An event stream's status and its first bytes (the whole of it, when it ends at once)."""
    request = Request(url + path, headers={"Authorization": f"Bearer {token}"})  # noqa: S310
    with urlopen(request, timeout=10) as stream:  # noqa: S310
        return stream.status, stream.read(11)


def test_every_answer_the_server_gives_is_documented_and_every_documented_one_given(
    sink, env, pool, passwords, document, monkeypatch
):
    """Per operation, the statuses the server answers (provoked here, including the door's
    401 and 413 and a database outage's 503) are exactly those the document lists."""
    answered: dict[tuple[str, str], set[int]] = defaultdict(set)
    svc = inbox_services({**env, "AUTHSVC_TEST_INBOX_TOKEN": TOKEN}, pool, passwords)
    with serving_inbox(sink, svc, listen_url=None) as url:
        client, anonymous = HttpClient(url, token=TOKEN), HttpClient(url)

        def call(method: str, documented: str, path: str, who: HttpClient = client,
                 body: bytes | None = None, content_type: str = "application/json") -> Answer:
            headers = {"Content-Type": content_type} if body is not None else {}
            answer = who.open("/_inbox" + path, method, headers, body=body)
            answered[(documented, method.lower())].add(answer.status_code)
            if str(answer.status_code) in document["paths"][documented][method.lower()][
                "responses"
            ]:  # an undocumented one shows in the comparison at the end, with all the others
                _check(document, answer, method.lower(), documented)
            return answer

        scope = call("POST", "/scopes", "/scopes").json["scope"]
        send(sink.port, email(f"{scope}@inbox.test", message_id="<authsvc-job-1@h>"))
        one = call("GET", "/scopes/{scope}/expect-one",
                   f"/scopes/{scope}/expect-one?timeout=5&settle=0")
        message = f"/scopes/{scope}/messages/{one.json['message']['id']}"
        operations = [  # (method, documented path, a real path, that path broken)
            ("POST", "/scopes", "/scopes", None),
            ("GET", "/scopes", "/scopes", "/scopes?limit=0"),
            ("GET", "/scopes/{scope}/messages", f"/scopes/{scope}/messages",
             f"/scopes/{scope}/messages?wait=x"),
            ("GET", "/scopes/{scope}/expect-one", f"/scopes/{scope}/expect-one?settle=0",
             f"/scopes/{scope}/expect-one?timeout=x"),
            ("GET", "/scopes/{scope}/messages/{id}", message, "/scopes/a%20b/messages/1"),
            ("GET", "/scopes/{scope}/messages/{id}/raw", message + "/raw",
             "/scopes/a%20b/messages/1/raw"),
            ("GET", "/openapi.json", "/openapi.json", None),
            ("GET", "/events", "/events", "/events?scope=a%20b"),
            ("GET", "/search", "/search?q=subject%3Aconfirm", "/search?q=after%3Anope"),
            ("DELETE", "/scopes/{scope}/faults", f"/scopes/{scope}/faults",
             "/scopes/a%20b/faults"),
        ]
        for method, documented, path, broken in operations:
            call(method, documented, path, anonymous)
            call(method, documented, path, body=TOO_LARGE)
            if broken is not None:
                call(method, documented, broken)
            if documented != "/events":
                call(method, documented, path)
        fault = b'{"reply": "451 4.3.0 Try again later", "count": 2}'
        faults = "/scopes/{scope}/faults"
        call("POST", faults, f"/scopes/{scope}/faults", body=fault)
        call("POST", faults, f"/scopes/{scope}/faults", body=b'{"reply": "250 fine"}')
        call("POST", faults, f"/scopes/{scope}/faults", body=fault, content_type="text/plain")
        call("POST", faults, f"/scopes/{scope}/faults", anonymous, body=fault)
        call("POST", faults, f"/scopes/{scope}/faults", body=TOO_LARGE)
        call("DELETE", faults, f"/scopes/{scope}/faults")
        call("GET", "/scopes/{scope}/messages/{id}", f"/scopes/{scope}/messages/999999")
        call("GET", "/scopes/{scope}/messages/{id}/raw", f"/scopes/{scope}/messages/999999/raw")
        call("GET", "/scopes/{scope}/expect-one", "/scopes/none/expect-one?timeout=0&settle=0")
        send(sink.port, email(f"{scope}@inbox.test", message_id="<authsvc-job-1@h>"))
        call("GET", "/scopes/{scope}/expect-one", f"/scopes/{scope}/expect-one?settle=0")
        status, start = _stream_status(url, "/_inbox/events", TOKEN)
        answered[("/events", "get")].add(status)
        assert start == b"retry: 2000"
        one_path = "/scopes/{scope}/messages/{id}"
        for path in (message, message, "/scopes/a%20b/messages/1"):  # 204, then 404, 400
            call("DELETE", one_path, path)
        call("DELETE", one_path, message, anonymous)
        call("DELETE", one_path, message, body=TOO_LARGE)
        for documented, path in (("/scopes/{scope}", f"/scopes/{scope}"),
                                 ("/scopes/{scope}", "/scopes/a%20b")):
            call("DELETE", documented, path)
        call("DELETE", "/scopes/{scope}", f"/scopes/{scope}", anonymous)
        call("DELETE", "/scopes/{scope}", f"/scopes/{scope}", body=TOO_LARGE)

        async def unavailable(self: InboxServer, *args: Any, **kwargs: Any) -> Any:
            raise psycopg.OperationalError("the database went away")

        monkeypatch.setattr(InboxServer, "_db", unavailable)
        for method, documented, path, _broken in operations:
            if documented != "/events":
                call(method, documented, path)
        call("DELETE", "/scopes/{scope}", f"/scopes/{scope}")
        call("DELETE", one_path, message)
        call("POST", faults, f"/scopes/{scope}/faults", body=fault)
        status, whole = _stream_status(url, "/_inbox/events", TOKEN)
        assert (status, whole) == (200, b"retry: 2000")  # and then the end, no 503
        answered[("/events", "get")].add(status)

    documented_answers = {
        (path, method): {int(status) for status in operation["responses"]}
        for path, item in document["paths"].items() for method, operation in item.items()
    }
    assert dict(answered) == documented_answers


@pytest.mark.e2e
def test_a_generated_client_gets_named_models_tagged_calls_and_narrowable_codes(tmp_path):
    """openapi-python-client, as a team would run it on this document: every schema is a named
    model (Message, ExpectOneConflict, …, not ExpectOneResponse200), calls are grouped by tag,
    and each problem's `code` is an enum."""
    (tmp_path / "openapi.json").write_text(json.dumps(openapi_document()))
    # The tool knows no message/rfc822 (the raw source); it reads it as bytes when told.
    (tmp_path / "config.json").write_text(
        '{"content_type_overrides": {"message/rfc822": "application/octet-stream"}}')
    tool = Path(sys.executable).with_name("openapi-python-client")
    path = f"{tool.parent}{os.pathsep}{os.environ.get('PATH', '')}"  # it formats with ruff
    result = subprocess.run(
        [str(tool), "generate", "--path", "openapi.json", "--meta", "none",
         "--config", "config.json", "--output-path", "inbox_client"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PATH": path}, check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "Warning" not in output, output  # nothing of the document was skipped
    models = {p.stem for p in (tmp_path / "inbox_client" / "models").glob("*.py")}
    for name in ("message", "link_state", "expect_one_conflict", "message_page",
                 "search_page", "fault", "fault_request", "new_scope", "scope_list"):
        assert name in models, sorted(models)
    assert not [m for m in models if "response_200" in m or "response_409" in m], sorted(models)
    calls = {p.parent.name for p in (tmp_path / "inbox_client" / "api").glob("*/*.py")}
    assert {"scopes", "messages", "faults", "search", "live"} <= calls
    assert [m for m in models if m.startswith("search_unavailable_problem_code")]
