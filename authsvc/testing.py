"""Pytest helpers for teams testing their own apps against authsvc's test inbox.

    from authsvc.testing import ScopedInbox

    inbox = ScopedInbox("http://127.0.0.1:8000")
    inbox.new_scope()
    sign_up(inbox.address("alice"))
    token_link = inbox.link(inbox.expect_one(), containing="token=")

Checking that your app's retries are safe: send the same request twice with
one `Idempotency-Key` (as your HTTP client does after a timeout) and expect
exactly one email — `expect_one()` fails with the count and the duplicate
groups if a second one arrives within its settle time:

    headers = {"Authorization": f"Bearer {key}", "Idempotency-Key": "reset-42"}
    for _ in range(2):
        requests.post(f"{url}/api/v1/password-resets", headers=headers,
                      json={"email": inbox.address("alice")})
    inbox.expect_one()

Each email carries its 6-digit `code` and the state of each authsvc link
(`link_states`), read without using anything up; `inbox.link_state(url)`
reads one link's state again later (after your app redeemed it, say):

    email = inbox.expect_one()
    assert email.code is not None
    assert inbox.link_state(inbox.link(email, containing="token=")) == "would_redeem"

Faults on demand: `inbox.fault("451 4.3.0 Try again later")` makes the SMTP
sink refuse the scope's next delivery, so a test can prove that a refused
first attempt is retried into exactly one email.

Installed (authsvc, or the client alone), pytest finds the `scoped_inbox`
fixture by itself (a pytest11 entry point); `pytest_plugins =
["authsvc.testing"]` in a conftest.py does the same where it is not
installed. The fixture gives each test a fresh scope, empties it after a
passing test, and keeps a failing test's scope, naming its page in the
inbox UI in the failure report. It reads the service URL from
AUTHSVC_INBOX_URL (default http://127.0.0.1:8000) and the optional bearer
token from AUTHSVC_TEST_INBOX_TOKEN.

This module imports only the standard library (pytest only if present), so it
also ships alone: `pip install ./clients/scoped-inbox` installs this very file
as `scoped_inbox` (`from scoped_inbox import ScopedInbox`), without the service.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.error import HTTPError
from urllib.parse import quote, urlencode
from urllib.request import Request, urlopen

DEFAULT_URL = "http://127.0.0.1:8000"


@dataclass(frozen=True)
class LinkState:
    """An authsvc link of an email and what it would do if clicked now.

    `state` is one of would_redeem, used, superseded, expired, invalid;
    `purpose` which kind of link it is (verify, reset, …), None when invalid.
    """

    url: str
    purpose: str | None
    state: str


@dataclass(frozen=True)
class Email:
    """One message as the test inbox stored it."""

    id: int
    scope: str
    to: list[str]
    sender: str | None
    subject: str | None
    message_id: str | None
    text: str | None
    html: str | None
    links: list[str]
    received_at: str
    headers: dict[str, list[str]]
    code: str | None = None  # the 6-digit code of the text part, if it has one
    link_states: list[LinkState] = field(default_factory=list)  # as read when fetched

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Email:
        return cls(
            id=data["id"], scope=data["scope"], to=data["to"], sender=data["from"],
            subject=data["subject"], message_id=data["message_id"], text=data["text"],
            html=data["html"], links=data["links"], received_at=data["received_at"],
            headers=data.get("headers", {}), code=data.get("code"),
            link_states=[LinkState(s["url"], s["purpose"], s["state"])
                         for s in data.get("link_states", [])],
        )


def _seconds(value: float) -> str:
    return f"{float(value):.3f}"


class InboxError(AssertionError):
    """The inbox did not hold what the test expected; the message says what it held."""


class ScopedInbox:
    """A client for one scope of the test inbox (SPEC §8)."""

    def __init__(self, base_url: str = DEFAULT_URL, *, token: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.scope: str | None = None
        self.domain: str | None = None
        # expect_one() only looks past the last message it returned, so a test
        # can expect the verification email, then the reset email, in turn.
        self.cursor = 0

    def _request(
        self, method: str, path: str, query: dict[str, Any] | None = None, timeout: float = 10.0,
        payload: dict[str, Any] | None = None,
    ) -> tuple[int, Any]:
        """One call: the status and the decoded JSON body (None when empty)."""
        url = f"{self.base_url}/_inbox{path}" + (f"?{urlencode(query)}" if query else "")
        data = None if payload is None else json.dumps(payload).encode()
        request = Request(url, data=data, method=method)  # noqa: S310 - URL given by the test
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urlopen(request, timeout=max(timeout, 1.0)) as response:  # noqa: S310
                status, headers, body = response.status, response.headers, response.read()
        except HTTPError as exc:
            status, headers, body = exc.code, exc.headers, exc.read()
        if not body:
            return status, None
        try:
            return status, json.loads(body)
        except ValueError:
            # Not the inbox API answering (an HTML 404 when the inbox is off, a proxy page…).
            text = body.decode("utf-8", "replace").strip()
            raise InboxError(
                f"{method} {url} answered {status} {headers.get('Content-Type')}, not JSON "
                f"(is AUTHSVC_TEST_INBOX on?): {text[:300]}"
            ) from None

    def _path(self) -> str:
        if self.scope is None:
            self.new_scope()
        return f"/scopes/{quote(str(self.scope), safe='')}"

    def new_scope(self) -> str:
        """Start a fresh, unguessable scope; later calls use it."""
        status, body = self._request("POST", "/scopes")
        if status != 201:
            raise InboxError(f"creating a scope failed: {status} {body}")
        self.scope = body["scope"]
        self.domain = body["address"].rpartition("@")[2]
        self.cursor = 0
        return str(self.scope)

    def address(self, name: str = "user") -> str:
        """An address that lands in this scope, e.g. alice+<scope>@inbox.test."""
        self._path()
        return f"{name}+{self.scope}@{self.domain}"

    def messages(self, *, wait: float = 0, at_least: int = 1, since: int = 0) -> list[Email]:
        """Messages in the scope, oldest first, waiting up to `wait` seconds for `at_least`."""
        query = {"wait": _seconds(wait), "min": at_least, "since": since}
        status, body = self._request(
            "GET", self._path() + "/messages", query, timeout=wait + 10
        )
        if status != 200:
            raise InboxError(f"listing messages failed: {status} {body}")
        return [self._whole(m) for m in body["messages"]]

    def message(self, inbox_id: int) -> Email:
        """One message of the scope by id, bodies included however large."""
        status, body = self._request("GET", f"{self._path()}/messages/{int(inbox_id)}")
        if status != 200:
            raise InboxError(f"fetching message {inbox_id} failed: {status} {body}")
        return Email.from_json(body["message"])

    def _whole(self, data: dict[str, Any]) -> Email:
        # Listings leave out bodies past their byte budget; fetch those whole.
        return self.message(data["id"]) if data.get("body_omitted") else Email.from_json(data)

    def expect_one(
        self, *, timeout: float = 10, settle: float = 1, since: int | None = None
    ) -> Email:
        """The one new message; InboxError if none arrives or more than one does."""
        query = {
            "timeout": _seconds(timeout),
            "settle": _seconds(settle),
            "since": self.cursor if since is None else since,
        }
        status, body = self._request(
            "GET", self._path() + "/expect-one", query, timeout=timeout + settle + 10
        )
        if status == 200:
            email = self._whole(body["message"])
            self.cursor = max(self.cursor, email.id)
            return email
        if status == 408:
            raise InboxError(f"no email arrived in scope {self.scope} within {timeout} s"
                             f" (see {self.ui_url()})")
        if status == 409:
            subjects = [f"#{m['id']} {m['subject']!r} to {m['to']}" for m in body["messages"]]
            raise InboxError(
                f"expected one email in scope {self.scope}, got {body['count']}: "
                f"{'; '.join(subjects)}; re-sends of one job: {body['duplicates']}"
                f" (see {self.ui_url()})"
            )
        raise InboxError(f"expect-one failed: {status} {body}")

    def link(self, email: Email | None = None, *, containing: str = "") -> str:
        """The first link in `email` (default: expect_one()) containing `containing`."""
        email = email or self.expect_one()
        for url in email.links:
            if containing in url:
                return url
        raise InboxError(f"no link containing {containing!r} in {email.subject!r}: {email.links}")

    def code(self, email: Email | None = None) -> str:
        """The 6-digit code of `email` (default: expect_one()), as the inbox found it."""
        email = email or self.expect_one()
        if email.code is None:
            raise InboxError(f"no 6-digit code in {email.subject!r}")
        return email.code

    def link_state(self, url: str) -> str:
        """What the authsvc link `url`, emailed to this scope, would do if clicked now:
        would_redeem, used, superseded, expired or invalid. Reading it uses nothing up."""
        since = 0
        while True:
            query = {"since": since, "bodies": 0}
            status, body = self._request("GET", self._path() + "/messages", query)
            if status != 200:
                raise InboxError(f"listing messages failed: {status} {body}")
            for message in reversed(body["messages"]):  # the newest copy of a link first
                for state in message["link_states"]:
                    if state["url"] == url:
                        return str(state["state"])
            if not body["more"]:
                raise InboxError(f"no authsvc link {url!r} in scope {self.scope}")
            since = body["next_since"]

    def fault(self, reply: str, count: int = 1) -> None:
        """The SMTP sink answers this scope's next `count` deliveries with `reply`
        (e.g. "451 4.3.0 Try again later": the sender retries; "550 5.1.1 No such user": it
        gives up)."""
        status, body = self._request("POST", self._path() + "/faults",
                                     payload={"reply": reply, "count": count})
        if status != 201:
            raise InboxError(f"setting a fault failed: {status} {body}")

    def clear_faults(self) -> None:
        """Deliveries to this scope are stored again."""
        status, body = self._request("DELETE", self._path() + "/faults")
        if status != 204:
            raise InboxError(f"clearing the faults failed: {status} {body}")

    def ui_url(self) -> str:
        """This scope's page in the inbox UI, for a person to look at."""
        return f"{self.base_url}/_inbox/ui/scopes/{quote(str(self.scope), safe='')}"

    def clear(self) -> None:
        """Empty the scope."""
        status, body = self._request("DELETE", self._path())
        if status != 204:
            raise InboxError(f"emptying the scope failed: {status} {body}")
        self.cursor = 0


try:
    import pytest
except ImportError:  # the client works without pytest; only the fixture needs it
    pass
else:
    _INBOX = pytest.StashKey[ScopedInbox]()
    _FAILED = pytest.StashKey[bool]()

    @pytest.fixture(name="scoped_inbox")
    def _scoped_inbox(request: pytest.FixtureRequest) -> Iterator[ScopedInbox]:
        """A ScopedInbox with a fresh scope: emptied after a passing test, kept after a
        failing one (the failure report names its page in the inbox UI)."""
        inbox = ScopedInbox(
            os.environ.get("AUTHSVC_INBOX_URL", DEFAULT_URL),
            token=os.environ.get("AUTHSVC_TEST_INBOX_TOKEN") or None,
        )
        inbox.new_scope()
        request.node.stash[_INBOX] = inbox
        yield inbox
        if not request.node.stash.get(_FAILED, False):
            inbox.clear()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        """A failing test that used the fixture keeps its scope; the report says where."""
        outcome = yield
        report = outcome.get_result()
        inbox = item.stash.get(_INBOX, None)
        if inbox is not None and report.failed and report.when == "call":
            item.stash[_FAILED] = True
            report.sections.append((
                "scoped inbox",
                f"scope {inbox.scope} was kept for a look: {inbox.ui_url()}",
            ))
