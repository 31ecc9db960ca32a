"""The OpenAPI document is valid OpenAPI 3 and describes what the server does."""

from __future__ import annotations

import re

import pytest
from openapi_spec_validator import validate

from authsvc.web.api.openapi import problem_schema_name
from authsvc.web.api.requests import (
    LINK_REQUEST,
    PASSWORD_RESET_CONFIRM,
    SESSION,
    SIGNUP,
    VERIFICATION_CONFIRM,
)
from tests.api_support import ApiCaller, assert_documented, assert_problem, register_shop_app

IGNORED_METHODS = {"HEAD", "OPTIONS"}


@pytest.fixture
def document(client) -> dict:
    response = client.get("/api/v1/openapi.json")  # no key needed
    assert response.status_code == 200
    assert response.mimetype == "application/json"
    return response.get_json()


def test_document_is_valid_openapi_3(document):
    assert document["openapi"].startswith("3.")
    validate(document)


def test_document_lists_exactly_the_routes_the_blueprint_serves(app, document):
    served = {
        (re.sub(r"<(?:[^:>]+:)?([a-z_]+)>", r"{\1}", rule.rule), method.lower())
        for rule in app.url_map.iter_rules()
        if rule.endpoint.startswith("api.")
        for method in (rule.methods or set()) - IGNORED_METHODS
    }
    documented = {(path, method) for path, item in document["paths"].items() for method in item}
    assert served == documented


def test_every_post_documents_the_key_header_and_the_common_failures(document):
    for path, item in document["paths"].items():
        if "post" not in item:
            continue
        operation = item["post"]
        assert {"$ref": "#/components/parameters/IdempotencyKey"} in operation["parameters"]
        for status in ("400", "401", "413", "415", "429", "500", "503"):
            assert status in operation["responses"], (path, status)
        assert "Retry-After" in operation["responses"]["429"]["headers"]
        assert "internal_error" in operation["responses"]["500"]["x-problem-codes"]
    header = document["components"]["parameters"]["IdempotencyKey"]
    assert (header["in"], header["schema"]["maxLength"]) == ("header", 255)


def test_only_stored_calls_document_idempotency_answers_and_the_replay_header(document):
    """/sessions and the sign-in confirm are never replayed: no 409, no 422, no
    Idempotent-Replayed (they never send them)."""
    for path, item in document["paths"].items():
        if "post" not in item:
            continue
        responses = item["post"]["responses"]
        replay_headers = {
            s for s, r in responses.items() if "Idempotent-Replayed" in r.get("headers", {})
        }
        if path in ("/api/v1/sessions", "/api/v1/sign-in-links/confirm",
                    "/api/v1/templates/{kind}/{locale}/preview"):
            assert "409" not in responses
            assert "idempotency_key_reused" not in responses.get("422", {}).get(
                "x-problem-codes", [])
            assert replay_headers == set()
        else:
            # 409 may also carry a use case's own conflict (email_taken, SPEC §12).
            assert responses["409"]["x-problem-codes"][0] == "idempotency_in_progress"
            assert "idempotency_key_reused" in responses["422"]["x-problem-codes"]
            success = next(s for s in responses if s.startswith("2"))
            assert success in replay_headers


def test_operations_are_named_tagged_and_summarised_for_generated_clients(document):
    operations = [op for item in document["paths"].values() for op in item.values()]
    ids = [op["operationId"] for op in operations]
    assert len(ids) == len(set(ids)) == len(operations)
    assert all(op["tags"] and op["summary"] for op in operations)
    declared = {tag["name"] for tag in document["tags"]}
    assert {tag for op in operations for tag in op["tags"]} <= declared
    assert document["servers"] == [
        {"url": "http://127.0.0.1:8000", "description": "This authsvc (AUTHSVC_BASE_URL)"}
    ]


def test_every_error_is_the_one_problem_with_its_codes_as_an_enum(document):
    """Each error answer names a schema that is the Problem with `code` narrowed to the codes
    that answer carries, so a TypeScript client can switch on it."""
    schemas = document["components"]["schemas"]
    for item in document["paths"].values():
        for operation in item.values():
            for status, response in operation["responses"].items():
                if int(status) < 400:
                    continue
                [(media, content)] = response["content"].items()
                assert media == "application/problem+json", status
                name = content["schema"]["$ref"].removeprefix("#/components/schemas/")
                codes = response["x-problem-codes"]
                assert codes and name == problem_schema_name(codes)
                base, narrowed = schemas[name]["allOf"]
                assert base == {"$ref": "#/components/schemas/Problem"}
                assert narrowed["properties"]["code"]["enum"] == codes
    assert "enum" not in schemas["Problem"]["properties"]["code"]  # open for codes added later


def test_request_schemas_are_strict(document):
    schemas = document["components"]["schemas"]
    for spec in (SIGNUP, LINK_REQUEST, VERIFICATION_CONFIRM, PASSWORD_RESET_CONFIRM, SESSION):
        schema = schemas[spec.name]
        assert schema["additionalProperties"] is False
        assert set(schema["properties"]) == {f.name for f in spec.fields}
        assert set(schema["required"]) == {f.name for f in spec.fields if f.required}


def test_problems_the_server_sends_match_the_document(client, conn):
    app, key = register_shop_app(conn)
    api = ApiCaller(client, app, key)
    cases = [
        ("/signups", {"email": "x"}, 400),
        ("/signups", {"email": "a@example.com", "password": "short"}, 422),
        ("/password-resets", {"email": "a@example.com", "redirect_url": "//evil.example"}, 400),
        ("/verifications/confirm", {"token": "nope"}, 400),
        ("/sessions", {"email": "a@example.com", "password": "whatever it is"}, 401),
    ]
    for path, body, status in cases:
        response = api.post(path, body)
        assert response.status_code == status
        assert_documented(response, "POST", path)
    unauthorized = client.post("/api/v1/signups", json={})
    assert_problem(unauthorized, 401, "unauthorized")
    assert_documented(unauthorized, "POST", "/signups")
    wrong_type = api.post("/sessions", data="x", headers={"Content-Type": "text/plain"})
    assert_documented(wrong_type, "POST", "/sessions")
