"""Test-inbox wake-up latency, SMTP 250 → the long poll's answer, at 1, 100 and 1,000 waiters,
with searches, faults and API calls served while the waiters are parked.

Run: .venv/bin/python -m bench.inbox_wakeup   (writes bench/results/inbox_wakeup.txt and
its section of docs/BENCHMARKS.md; BENCH_WAITERS=1,100,1000 picks the rounds)
Starts a real `authsvc dev` (the inbox's asyncio server owns the HTTP port) and,
per round, parks N long polls on N scopes; while they are parked, runs
searches across every scope (two at a time, the inbox's search slots), sets
and clears faults on other scopes, and times a plain API call
(`POST /api/v1/password-resets`) against the same call on the idle server;
then delivers one email per scope over four SMTP connections and times each
poll from its email's 250 reply. The machine's load (`uptime`) is recorded
with the figures: the host is shared.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import smtplib
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from email.message import EmailMessage
from pathlib import Path

import aiohttp

from bench.common import fresh_database, percentile, report, worker_env, write_doc_section
from testkit.waiting import free_port, wait_until, wait_until_ready

WAITERS = tuple(int(n) for n in os.environ.get("BENCH_WAITERS", "1,100,1000").split(","))
SECTION = "## Test inbox wake-up"
SEARCHES = 20  # per round, in two lanes
# One that finds a page at once among the newest, one that reads every message and finds none.
SEARCH_QUERIES = ("wake", "subject:no-such-subject")
FAULT_SCOPES = 10  # per round, each set then cleared
API_CALLS = 30
FAULT = {"reply": "451 4.3.0 Try again later", "count": 1}


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _deliver(port: int, scopes: list[str], accepted: dict[str, float]) -> None:
    with smtplib.SMTP("127.0.0.1", port, timeout=30) as client:
        for scope in scopes:
            message = EmailMessage()
            message["From"], message["To"] = "bench@example.com", f"b+{scope}@inbox.test"
            message["Subject"] = scope
            message.set_content("wake up")
            client.send_message(message)
            accepted[scope] = time.perf_counter()  # the 250 reply has arrived


class Timings:
    """Latencies and statuses of one kind of call."""

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self.statuses: Counter[int] = Counter()

    async def time(self, call: Callable[[], Awaitable[int]]) -> None:
        began = time.perf_counter()
        status = await call()
        self.seconds.append(time.perf_counter() - began)
        self.statuses[status] += 1

    def line(self, name: str) -> str:
        p50, p99 = percentile(self.seconds, 0.5), percentile(self.seconds, 0.99)
        statuses = " ".join(f"{s}x{n}" for s, n in sorted(self.statuses.items()))
        return (f"{name:<26} {len(self.seconds):>3} calls  p50 {p50 * 1000:7.1f} ms"
                f"   p99 {p99 * 1000:7.1f} ms   ({statuses})")


async def _status(response: aiohttp.ClientResponse) -> int:
    await response.read()
    return response.status


async def _api_calls(session: aiohttp.ClientSession, url: str, key: str) -> Timings:
    """Sequential password resets for unknown addresses: a real write path of the API."""
    timings = Timings()
    headers = {"Authorization": f"Bearer {key}"}

    async def reset() -> int:
        body = {"email": f"nobody-{secrets.token_hex(4)}@example.com"}
        async with session.post(f"{url}/api/v1/password-resets", json=body,
                                headers=headers) as response:
            return await _status(response)

    for _ in range(API_CALLS):
        await timings.time(reset)
    return timings


async def _searches(session: aiohttp.ClientSession, url: str) -> Timings:
    timings = Timings()

    async def lane(queries: list[str]) -> None:
        for query in queries:
            async def one(q: str = query) -> int:
                async with session.get(f"{url}/_inbox/search", params={"q": q}) as response:
                    return await _status(response)
            await timings.time(one)

    queries = [SEARCH_QUERIES[n % len(SEARCH_QUERIES)] for n in range(SEARCHES)]
    await asyncio.gather(lane(queries[::2]), lane(queries[1::2]))
    return timings


async def _faults(session: aiohttp.ClientSession, url: str) -> Timings:
    """Set, then clear, a fault on scopes no waiter watches."""
    timings = Timings()
    for _ in range(FAULT_SCOPES):
        path = f"{url}/_inbox/scopes/{secrets.token_hex(8)}/faults"

        async def set_fault(p: str = path) -> int:
            async with session.post(p, json=FAULT) as response:
                return await _status(response)

        async def clear(p: str = path) -> int:
            async with session.delete(p) as response:
                return await _status(response)

        await timings.time(set_fault)
        await timings.time(clear)
    return timings


async def _round(url: str, smtp_port: int, waiters: int, key: str) -> tuple[list[float], list[str]]:
    """The wake-up latencies, and the figures of the calls served while the waiters waited."""
    scopes = [secrets.token_hex(8) for _ in range(waiters)]
    answered: dict[str, float] = {}
    accepted: dict[str, float] = {}
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        await _api_calls(session, url, key)  # warm-up: connections, prepared plans
        idle = await _api_calls(session, url, key)

        async def poll(scope: str) -> None:
            path = f"{url}/_inbox/scopes/{scope}/messages?wait=30&min=1"
            async with session.get(path) as response:
                await response.read()
                answered[scope] = time.perf_counter()
                assert response.status == 200

        polls = [asyncio.create_task(poll(s)) for s in scopes]
        while True:
            async with session.get(f"{url}/_inbox/waiting") as response:
                if json.loads(await response.read())["waiting"] >= waiters:
                    break
            await asyncio.sleep(0.05)
        busy, searched, faulted = await asyncio.gather(
            _api_calls(session, url, key), _searches(session, url), _faults(session, url))
        assert not any(p.done() for p in polls), "a long poll answered before its mail"
        shares = [scopes[i::4] for i in range(4)]
        await asyncio.gather(
            *(asyncio.to_thread(_deliver, smtp_port, s, accepted) for s in shares if s)
        )
        await asyncio.gather(*polls)
    figures = [
        idle.line("API, idle"),
        busy.line("API, waiters parked"),
        searched.line("searches, waiters parked"),
        faulted.line("fault set/clear, parked"),
    ]
    return [answered[s] - accepted[s] for s in scopes], figures


def _load() -> str:
    """The machine's load averages, as `uptime` prints them."""
    shown = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout
    return shown.strip().partition("load average:")[2].strip() or "?"


def section(figures: str) -> str:
    """docs/BENCHMARKS.md's section: this run's figures as written to the results file."""
    return "\n".join([
        SECTION, "",
        "`python -m bench.inbox_wakeup` (also run by `make bench`): a real `authsvc dev`; per",
        "round N long polls parked on N scopes; while they wait, 20 searches across every",
        "scope (two at a time), 10 faults set and cleared on other scopes and 30",
        "`POST /api/v1/password-resets`, timed beside the same calls on the idle server; then",
        "one email per scope, each poll timed from its email's SMTP 250. Load averages",
        "(1, 5, 15 min) from `uptime`: the machine is shared. Raw figures:",
        "`bench/results/inbox_wakeup.txt`.", "",
        "```", figures.rstrip("\n"), "```", "",
    ])


def main() -> None:
    with fresh_database() as db_url, tempfile.TemporaryDirectory() as data:
        port, smtp_port = free_port(), free_port()
        env = {**worker_env(db_url, "smtp://unused", data), "AUTHSVC_BASE_URL": "http://x"}
        dev = subprocess.Popen(
            [sys.executable, "-m", "authsvc.cli", "dev", "--port", str(port),
             "--smtp-port", str(smtp_port)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            wait_until_ready(f"{url}/readyz", dev, timeout=90)
            wait_until(lambda: _accepts(smtp_port), 30, "the SMTP sink")
            key = (Path(data) / "dev-app-key").read_text(encoding="utf-8").strip()
            lines = ["inbox wake-up latency, SMTP 250 -> long-poll answer (authsvc dev,"
                     f" {os.cpu_count()} cores)", f"load average at start: {_load()}"]
            for waiters in WAITERS:
                latencies, figures = asyncio.run(_round(url, smtp_port, waiters, key))
                if os.environ.get("BENCH_DEBUG"):
                    print(sorted(round(x * 1000) for x in latencies)[-30:])
                p50, p99 = percentile(latencies, 0.5), percentile(latencies, 0.99)
                lines.append(
                    f"  {waiters:>5} waiters: p50 {p50 * 1000:7.1f} ms   p99 {p99 * 1000:7.1f} ms"
                )
                lines += [f"         {line}" for line in figures]
            lines.append(f"load average at end: {_load()}")
        finally:
            dev.send_signal(signal.SIGTERM)
            dev.wait(timeout=60)
        report("inbox_wakeup", lines)
        write_doc_section(SECTION, section("\n".join(lines)))


if __name__ == "__main__":
    main()
