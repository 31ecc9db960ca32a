"""Hypothesis-generated form posts: never a 5xx; without the session's CSRF token, never acted on.

Short mode in the suite; `make fuzz` (AUTHSVC_FUZZ_MODE=long) runs ten times as many,
the inner loop (`make test-fast`, AUTHSVC_FUZZ_MODE=quick) a quarter.
"""

from __future__ import annotations

import pytest
from flask.testing import FlaskClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import FUZZ_MODE
from tests.pages_support import csrf_token

EXAMPLES = {"quick": 15, "short": 60, "long": 600}[FUZZ_MODE]
FORMS = {
    "/signup": ["email", "password"],
    "/login": ["email", "password"],
    "/reset": ["email"],
    "/verify/request": ["email"],
    "/reset/confirm": ["token", "password"],
    "/verify": ["token"],
    "/links/resend": ["token", "purpose"],
    "/logout": [],
}
_FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                 suppress_health_check=list(HealthCheck))
# Text a browser can send: anything but lone surrogates.
_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=300)
_field_values = st.one_of(_text, st.emails(), st.sampled_from(["", " ", "\x00", "a" * 5000]))


@pytest.fixture
def env(env: dict[str, str]) -> dict[str, str]:
    return {**env, "AUTHSVC_RATE_LIMIT_IP": "100000000/1d",
            "AUTHSVC_RATE_LIMIT_LOGIN": "100000000/1d"}


@pytest.mark.timeout(1200 if FUZZ_MODE == "long" else 120)
def test_generated_form_posts_never_fail(client: FlaskClient, conn) -> None:
    statuses: dict[int, int] = {}

    @_FUZZ
    @given(path=st.sampled_from(sorted(FORMS)), data=st.data(),
           extra=st.dictionaries(st.text(min_size=1, max_size=20), _text, max_size=3))
    def post(path: str, data: st.DataObject, extra: dict[str, str]) -> None:
        fields = {name: data.draw(_field_values, label=name) for name in FORMS[path]}
        token = csrf_token(client, "/login")  # again each time: /logout starts a new session
        response = client.post(path, data={**extra, **fields, "csrf_token": token})
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
        assert response.status_code < 500, (path, fields, response.status_code)

    post()
    print(f"\nform fuzz: posts={sum(statuses.values())} statuses={dict(sorted(statuses.items()))}")


@pytest.mark.timeout(600 if FUZZ_MODE == "long" else 120)
def test_form_posts_without_the_sessions_csrf_token_change_nothing(client: FlaskClient,
                                                                   conn) -> None:
    csrf_token(client, "/login")  # the session exists; the forged posts below lack its token
    counts = "SELECT (SELECT count(*) FROM users), (SELECT count(*) FROM email_jobs)"
    before = conn.execute(counts).fetchone()

    @_FUZZ
    @given(path=st.sampled_from(sorted(FORMS)), email=st.emails(),
           forged=st.one_of(st.none(), _text))
    def post(path: str, email: str, forged: str | None) -> None:
        data = {"email": email, "password": "a perfectly fine passphrase", "token": "x.y"}
        if forged is not None:
            data["csrf_token"] = forged
        response = client.post(path, data=data)
        assert response.status_code == 400, (path, forged, response.status_code)

    post()
    assert conn.execute(counts).fetchone() == before
