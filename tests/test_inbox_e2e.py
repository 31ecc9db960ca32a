"""End to end through real processes: gunicorn, two outbox workers, the SMTP sink."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.error import HTTPError
from urllib.request import Request, urlopen

import pytest

from authsvc.accounts.passwords import cheap_passwords
from authsvc.apps.keys import register_app
from authsvc.testing import ScopedInbox
from testkit.stack import running_stack
from testkit.waiting import wait_until
from tests.accounts_support import insert_user

pytestmark = [pytest.mark.e2e]

SCOPES = 50
USERS_PER_SCOPE = 4  # one reset each: 200 reset requests


def _call(url: str, key: str, body: Mapping[str, object]) -> tuple[int, dict]:
    request = Request(  # noqa: S310
        url, data=json.dumps(body).encode(), method="POST",
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    try:
        with urlopen(request, timeout=30) as response:  # noqa: S310
            return response.status, json.loads(response.read())
    except HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture
def stack(env: dict[str, str], tmp_path: Path) -> Iterator[str]:
    """Web app, two workers and the sink, started as `authsvc dev` starts them."""
    limits = {"AUTHSVC_RATE_LIMIT_EMAIL": "1000/1m", "AUTHSVC_RATE_LIMIT_APP": "100000/1m"}
    with running_stack(
        {**env, **limits}, tmp_path / "stack.log", web_workers=2, threads=16, outbox_workers=2
    ) as url:
        yield url


def test_200_resets_across_50_scopes_each_scope_exact_and_each_link_once(stack, conn):
    url = stack
    with conn.transaction():
        _app, key = register_app(conn, "e2e", [url])
    password_hash = cheap_passwords().hash("the original passphrase")
    inboxes = [ScopedInbox(url) for _ in range(SCOPES)]
    expected: dict[str, set[str]] = {}
    for inbox in inboxes:
        addresses = {inbox.address(f"user{n}") for n in range(USERS_PER_SCOPE)}
        expected[str(inbox.scope)] = addresses
        for address in addresses:
            insert_user(conn, address, password_hash)

    requests = [address for addresses in expected.values() for address in addresses]
    with ThreadPoolExecutor(max_workers=16) as pool:
        answers = list(pool.map(
            lambda a: _call(f"{url}/api/v1/password-resets", key, {"email": a}), requests
        ))
    assert answers == [(202, {"status": "accepted"})] * len(requests)

    links: list[str] = []
    for inbox in inboxes:
        emails = inbox.messages(wait=30, at_least=USERS_PER_SCOPE)
        assert {to for e in emails for to in e.to} == expected[str(inbox.scope)]
        assert len(emails) == USERS_PER_SCOPE
        assert len({e.message_id for e in emails}) == USERS_PER_SCOPE  # no re-sends
        links += [inbox.link(e, containing="token=") for e in emails]
    # Nothing else is on its way: the outbox is drained and no scope grew.
    wait_until(
        lambda: conn.execute("SELECT count(*) FROM email_jobs WHERE status = 'pending'")
        .fetchone() == (0,),
        timeout=30, what="the outbox to drain",
    )
    assert sum(len(i.messages()) for i in inboxes) == len(requests)

    def redeem_twice(link: str) -> list[int]:
        token = link.split("token=")[1].split("&")[0]
        body = {"token": token, "password": "a brand new passphrase"}
        with ThreadPoolExecutor(max_workers=2) as racing:
            results = list(racing.map(
                lambda _: _call(f"{url}/api/v1/password-resets/confirm", key, body), range(2)
            ))
        return sorted(status for status, _ in results)

    with ThreadPoolExecutor(max_workers=8) as pool:
        outcomes = list(pool.map(redeem_twice, links))
    assert outcomes == [[200, 410]] * len(requests)
    used = conn.execute("SELECT count(*) FROM token_redemptions WHERE purpose = 'reset'").fetchone()
    assert used == (len(requests),)

