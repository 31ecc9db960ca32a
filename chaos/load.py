"""The load: link requests (verify, reset, sign-in) through the HTTP API, retried safely
with Idempotency-Key."""

from __future__ import annotations

import http.client
import json
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

PATHS = {"verify": "/api/v1/verifications", "reset": "/api/v1/password-resets",
         "sign_in": "/api/v1/sign-in-links"}
RETRY_FOR_SECONDS = 90.0


@dataclass(frozen=True)
class LinkRequest:
    email: str
    purpose: str  # "verify" | "reset" | "sign_in"


@dataclass
class LoadResult:
    accepted: int = 0
    refused: list[str] = field(default_factory=list)  # final non-202 answers
    retries: int = 0


class ApiClient:
    """One keep-alive connection per thread; any transport error reconnects."""

    def __init__(self, port: int, api_key: str) -> None:
        self.port = port
        self.api_key = api_key
        self._local = threading.local()

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=15)
            self._local.conn = conn
        return conn

    def post(self, path: str, body: dict[str, object], key: str | None = None) -> tuple[int, dict]:
        """(status, JSON body); raises OSError / HTTPException on transport failure."""
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {self.api_key}"}
        if key:
            headers["Idempotency-Key"] = key
        conn = self._connection()
        try:
            conn.request("POST", path, json.dumps(body), headers)
            reply = conn.getresponse()
            data = reply.read()
        except (OSError, http.client.HTTPException):
            conn.close()
            self._local.conn = None
            raise
        try:
            return reply.status, json.loads(data or b"{}")
        except ValueError:
            return reply.status, {"raw": data[:200].decode("utf-8", "replace")}

    def post_until_final(self, path: str, body: dict[str, object],
                         key: str) -> tuple[int, dict, int]:
        """(status, JSON body, tries): POST until the API gives a final answer, every try
        under the same Idempotency-Key, for RETRY_FOR_SECONDS at most."""
        deadline = time.monotonic() + RETRY_FOR_SECONDS
        tries = 0
        while True:
            tries += 1
            try:
                status, reply = self.post(path, body, key)
            except (OSError, http.client.HTTPException) as exc:
                status, reply = 0, {"error": type(exc).__name__}
            # 5xx and transport errors: the request may or may not have happened;
            # 409 idempotency_in_progress: the first try is still running. The key
            # makes both safe to repeat: a retry gets the first outcome.
            again = status == 0 or status >= 500 or reply.get("code") == "idempotency_in_progress"
            if not again or time.monotonic() >= deadline:
                return status, reply, tries
            time.sleep(min(0.05 * tries, 1.0))


def send_one(
    client: ApiClient, request: LinkRequest, result: LoadResult, lock: threading.Lock
) -> None:
    """POST until the API gives a final answer; every try carries the same key."""
    status, body, tries = client.post_until_final(
        PATHS[request.purpose], {"email": request.email}, f"chaos-{uuid.uuid4()}")
    with lock:
        result.retries += tries - 1
        if status == 202:
            result.accepted += 1
        else:
            result.refused.append(f"{status} {body.get('code', body)}")


def run_load(client: ApiClient, requests: list[LinkRequest], concurrency: int, rate: float,
             progress: Callable[[int], None]) -> LoadResult:
    """Send every request, `rate` per second at most, with `concurrency` clients;
    `progress(done)` after each. Pacing spreads the load over the fault schedule."""
    result = LoadResult()
    lock = threading.Lock()
    done = 0
    start = time.monotonic()

    def one(index: int, request: LinkRequest) -> None:
        nonlocal done
        time.sleep(max(0.0, start + index / rate - time.monotonic()))
        send_one(client, request, result, lock)
        with lock:
            done += 1
            count = done
        progress(count)

    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        list(pool.map(one, range(len(requests)), requests))
    return result
