"""Test-inbox wake-up latency, SMTP 250 → the long poll's answer, at 1, 100 and 1,000 waiters.

Run: .venv/bin/python -m bench.inbox_wakeup   (writes bench/results/inbox_wakeup.txt)
Starts a real `authsvc dev` (the inbox's asyncio server owns the HTTP port),
parks N long polls on N scopes, then delivers one email per scope over four
SMTP connections and times each poll from its email's 250 reply.
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
from email.message import EmailMessage

import aiohttp

from bench.common import fresh_database, percentile, report, worker_env
from testkit.waiting import free_port, wait_until, wait_until_ready

WAITERS = tuple(int(n) for n in os.environ.get("BENCH_WAITERS", "1,100,1000").split(","))


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


async def _round(url: str, smtp_port: int, waiters: int) -> list[float]:
    scopes = [secrets.token_hex(8) for _ in range(waiters)]
    answered: dict[str, float] = {}
    accepted: dict[str, float] = {}
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:

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
        shares = [scopes[i::4] for i in range(4)]
        await asyncio.gather(
            *(asyncio.to_thread(_deliver, smtp_port, s, accepted) for s in shares if s)
        )
        await asyncio.gather(*polls)
    return [answered[s] - accepted[s] for s in scopes]


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
            lines = ["inbox wake-up latency, SMTP 250 -> long-poll answer (authsvc dev, 2 cores)"]
            for waiters in WAITERS:
                latencies = asyncio.run(_round(url, smtp_port, waiters))
                if os.environ.get("BENCH_DEBUG"):
                    print(sorted(round(x * 1000) for x in latencies)[-30:])
                p50, p99 = percentile(latencies, 0.5), percentile(latencies, 0.99)
                lines.append(
                    f"  {waiters:>5} waiters: p50 {p50 * 1000:7.1f} ms   p99 {p99 * 1000:7.1f} ms"
                )
        finally:
            dev.send_signal(signal.SIGTERM)
            dev.wait(timeout=60)
        report("inbox_wakeup", lines)


if __name__ == "__main__":
    main()
