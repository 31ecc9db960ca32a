"""Property: whatever body, content type or Idempotency-Key arrives, the API answers a
documented 4xx problem or a documented success, never a 5xx."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from authsvc.accounts.addresses import InvalidAddress, parse_address
from authsvc.web.api.openapi import openapi_document
from authsvc.web.api.problems import TITLES
from tests.api_support import ApiCaller, assert_documented, register_shop_app

PATHS = [
    "/signups",
    "/verifications",
    "/verifications/confirm",
    "/password-resets",
    "/password-resets/confirm",
    "/sessions",
]
MEMBERS = ["email", "password", "token", "redirect_url", "admin", ""]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
bodies = st.dictionaries(
    st.sampled_from(MEMBERS),
    st.one_of(
        json_values,
        st.sampled_from(
            ["ann@example.com", "https://allowed.example.com/welcome", "correct horse battery"]
        ),
    ),
    max_size=4,
)
keys = st.one_of(st.none(), st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=300))
content_types = st.sampled_from(["application/json", "application/problem+json", "text/plain"])


def test_no_input_gets_a_5xx_or_an_undocumented_answer(client, conn):
    app, api_key = register_shop_app(conn)
    api = ApiCaller(client, app, api_key)

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(path=st.sampled_from(PATHS), body=bodies, key=keys, content_type=content_types)
    def check(path: str, body: dict, key: str | None, content_type: str) -> None:
        environ = {} if key is None else {"HTTP_IDEMPOTENCY_KEY": key}
        response = api.post(
            path,
            data=json.dumps(body),
            headers={"Content-Type": content_type},
            environ_base=environ,
        )
        assert response.status_code < 500, response.get_data(as_text=True)
        if response.status_code >= 400:
            assert response.mimetype == "application/problem+json"
            assert response.get_json(force=True)["code"] in TITLES
        assert_documented(response, "POST", path)

    check()


part = st.text(
    alphabet=st.one_of(
        st.sampled_from("ab.@ -_+"), st.characters(max_codepoint=0xA0), st.characters()
    ),
    max_size=12,
)
email_like = st.one_of(part, st.builds(lambda a, b, c: f"{a}@{b}.{c}", part, part, part))


def test_the_api_accepts_exactly_what_the_one_address_parser_accepts(client, conn):
    app, api_key = register_shop_app(conn)
    api = ApiCaller(client, app, api_key)
    schema = openapi_document()["components"]["schemas"]["LinkRequest"]
    assert schema["properties"]["email"]["format"] == "email"

    @settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
    @given(email=email_like)
    def check(email: str) -> None:
        response = api.post("/password-resets", {"email": email})
        assert response.status_code in (202, 400), response.get_data(as_text=True)
        try:
            parsed = parse_address(email)
        except InvalidAddress:
            assert response.status_code == 400
            return
        assert response.status_code == 202
        assert parse_address(parsed) == parsed, "the canonical form is a fixed point"

    check()
