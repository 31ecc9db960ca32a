"""QA scale on a real `authsvc dev`: 1,000 long polls at once, none refused, the API unslowed,
with searches running and a quarter of the scopes refusing their first delivery (faults)."""

from __future__ import annotations

import asyncio
import json
import secrets
import smtplib
import time
from email.message import EmailMessage

import aiohttp
import pytest

from testkit.figures import percentile
from testkit.waiting import wait_until
from tests.test_dev import Dev, _printed_key, running_dev

pytestmark = pytest.mark.e2e
POLLS = 1000
API_CALLS = 50
SEARCHES = 20
FAULT = "451 4.3.0 Try again later"


def _email(address: str, subject: str) -> EmailMessage:
    message = EmailMessage()
    message["From"] = "qa@example.com"
    message["To"] = address
    message["Subject"] = subject
    message.set_content(f"For {address}: https://app.example/verify?token=t")
    return message


def _deliver(port: int, scopes: list[str]) -> int:
    """One email per scope, sent again when refused (as a worker retries); how many were."""
    refused = 0
    with smtplib.SMTP("127.0.0.1", port, timeout=30) as client:
        for scope in scopes:
            message = _email(f"qa+{scope}@inbox.test", f"for {scope}")
            try:
                client.send_message(message)
            except smtplib.SMTPRecipientsRefused as exc:
                assert [code for code, _ in exc.recipients.values()] == [451]
                refused += 1
                client.send_message(message)
    return refused


async def _searches(session: aiohttp.ClientSession, dev: Dev, query: str) -> list[dict]:
    answers = []
    for _ in range(SEARCHES):
        async with session.get(f"{dev.url}/_inbox/search", params={"q": query}) as response:
            assert response.status == 200, await response.text()
            answers.append(json.loads(await response.read()))
    return answers


async def _api_latencies(session: aiohttp.ClientSession, dev: Dev, key: str) -> list[float]:
    """Sequential API calls (a password reset for unknown addresses: a real write path)."""
    timings = []
    headers = {"Authorization": f"Bearer {key}"}
    for _ in range(API_CALLS):
        body = {"email": f"nobody-{secrets.token_hex(4)}@example.com"}
        started = time.perf_counter()
        async with session.post(
            f"{dev.url}/api/v1/password-resets", json=body, headers=headers
        ) as response:
            await response.read()
            assert response.status == 202, await response.text()
        timings.append(time.perf_counter() - started)
    return timings


async def _waiting(session: aiohttp.ClientSession, dev: Dev) -> int:
    async with session.get(f"{dev.url}/_inbox/waiting") as response:
        return int(json.loads(await response.read())["waiting"])


async def _scenario(dev: Dev, key: str) -> None:
    scopes = [secrets.token_hex(8) for _ in range(POLLS)]
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=90)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        await _api_latencies(session, dev, key)  # warm-up: connections, prepared plans
        idle = await _api_latencies(session, dev, key)
        faulty = set(scopes[::4])  # their first delivery is refused
        for scope in faulty:
            async with session.post(f"{dev.url}/_inbox/scopes/{scope}/faults",
                                    json={"reply": FAULT, "count": 1}) as response:
                assert response.status == 201, await response.text()

        async def poll(n: int, scope: str) -> tuple[int, dict]:
            # Half use expect-one, half a listing with wait/min, as suites do.
            path = (
                "expect-one?timeout=30&settle=0" if n % 2
                else "messages?wait=30&min=1"
            )
            async with session.get(f"{dev.url}/_inbox/scopes/{scope}/{path}") as response:
                return response.status, json.loads(await response.read())

        polls = [asyncio.create_task(poll(n, s)) for n, s in enumerate(scopes)]
        deadline = time.monotonic() + 30
        while await _waiting(session, dev) < POLLS:
            assert time.monotonic() < deadline, "the polls were not all parked within 30 s"
            assert not any(p.done() for p in polls), [p.result() for p in polls if p.done()][:3]
            await asyncio.sleep(0.1)

        busy, _ = await asyncio.gather(_api_latencies(session, dev, key),
                                       _searches(session, dev, "subject:for to:qa+"))
        assert not any(p.done() for p in polls), "a long poll answered before any mail"

        shares = [scopes[i::4] for i in range(4)]
        refused = await asyncio.gather(
            *(asyncio.to_thread(_deliver, dev.smtp_port, s) for s in shares))
        results = await asyncio.gather(*polls)
        [searched] = (await _searches(session, dev, 'subject:"for " to:qa+'))[-1:]

    assert sum(refused) == len(faulty)
    assert len(searched["messages"]) == 20 and searched["more"] is True

    statuses = [status for status, _ in results]
    assert statuses.count(503) == 0
    assert statuses == [200] * POLLS, {s: statuses.count(s) for s in set(statuses)}
    for n, (scope, (_, body)) in enumerate(zip(scopes, results, strict=True)):
        found = [body["message"]] if n % 2 else body["messages"]
        assert [m["subject"] for m in found] == [f"for {scope}"]
    idle_p90, busy_p90 = percentile(idle, 0.9), percentile(busy, 0.9)
    print(f"API p90 idle {idle_p90 * 1000:.1f} ms, with {POLLS} polls {busy_p90 * 1000:.1f} ms")
    # The p90, not the p99: of 50 calls the p99 is the slowest one, which one pause on a
    # shared 2-core machine decides (CI saw 6.4 -> 14.2 ms). A design where a waiter holds
    # a thread fails this by seconds or with 503s, so 250 ms of slack still catches it.
    # The precise ratio is a benchmark figure (bench/inbox_wakeup.py), not a timed test.
    bound = max(2 * idle_p90, idle_p90 + 0.250)
    assert busy_p90 <= bound, f"idle p90 {idle_p90:.4f} s, busy p90 {busy_p90:.4f} s"


def test_a_thousand_long_polls_on_one_authsvc_dev_none_refused(tmp_path, env):
    with running_dev(tmp_path, env) as dev:
        key = _printed_key(dev)
        wait_until(lambda: dev.process.poll() is None, what="authsvc dev")
        asyncio.run(_scenario(dev, key))
