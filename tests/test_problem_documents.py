"""Every problem+json the service answers has one shape: the API's and the test inbox's agree."""

from __future__ import annotations

import pytest

from authsvc.inbox.answers import expect_one_answer
from authsvc.inbox.messages import Page
from authsvc.inbox.params import ExpectQuery, Filters


def _problem(response) -> dict:
    assert response.mimetype == "application/problem+json"
    return dict(response.json)


@pytest.mark.parametrize(
    ("method", "api_path", "inbox_path", "code"),
    [
        ("GET", "/api/v1/nope", "/_inbox/nope", "not_found"),
        ("PUT", "/api/v1/signups", "/_inbox/scopes", "method_not_allowed"),
    ],
)
def test_the_api_and_the_inbox_give_the_same_type_for_the_same_problem(
    client, inbox, method, api_path, inbox_path, code
):
    api = _problem(client.open(api_path, method=method))
    inbox = _problem(inbox.open(inbox_path, method=method))
    assert api["type"] == inbox["type"] == f"urn:authsvc:problem:{code}"
    assert api["code"] == inbox["code"] == code
    assert {"type", "title", "status", "detail", "code"} <= api.keys() & inbox.keys()


def test_the_inbox_s_own_answers_share_the_type_too():
    """answers.py builds expect-one's 408 on the same problem shape."""
    query = ExpectQuery(scope="s" * 32, timeout=0.0, settle=0.0, since=0, filters=Filters())
    status, body = expect_one_answer(query, [], Page(messages=[], more=False))
    assert status == 408
    assert body["type"] == "urn:authsvc:problem:no_message"
