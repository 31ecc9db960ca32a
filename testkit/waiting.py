"""Free ports and waiting on conditions (with timeouts, never sleep-and-hope)."""

from __future__ import annotations

import secrets
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def free_port() -> int:
    """A port nothing listens on right now (aiosmtpd and `--port` flags cannot take 0)."""
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """`count` consecutive ports nothing listens on right now: distinct, as separate
    free_port() calls might not be, and each next to the one before (`authsvc worker
    --processes N --metrics-port P` serves P to P+N-1).

    A server started on it binds a moment later, so the port is chosen below
    Linux's ephemeral range (32768-60999): a port inside it can be taken in
    that moment by any parallel test's outgoing connection. Drawn from the
    OS's randomness, never `random`'s: a seeded `random` would give parallel
    test processes the same ports.
    """
    for _ in range(200):
        first = 20000 + secrets.randbelow(12000 - count)
        probes = []
        try:
            for port in range(first, first + count):
                probe = socket.socket()
                probes.append(probe)
                probe.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            for probe in probes:
                probe.close()
        return list(range(first, first + count))
    raise AssertionError(f"no {count} consecutive free ports found")


def wait_until(
    check: Callable[[], T], timeout: float = 10.0, what: str = "condition", every: float = 0.02
) -> T:
    """Poll `check` until it returns something truthy and return that; fail after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)


def http_status(url: str, timeout: float = 2.0) -> int | None:
    """The status a GET of `url` answers, or None while nothing answers there."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:  # noqa: S310 - 127.0.0.1
            return int(reply.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except OSError:
        return None


def wait_until_ready(
    url: str,
    process: subprocess.Popen[bytes] | None = None,
    timeout: float = 60.0,
    ready: Callable[[int], bool] = lambda status: status == 200,
    output: Callable[[], str] = lambda: "",
) -> None:
    """Wait until `url` (usually …/readyz) answers a status `ready` accepts.

    Fails at once, with `output()`'s tail, when `process` exits first: a server
    that crashed on start-up should not cost the whole timeout.
    """

    def answered() -> bool:
        if process is not None and process.poll() is not None:
            raise AssertionError(
                f"{process.args!r} exited with {process.returncode} before {url} was ready\n"
                + output()[-3000:]
            )
        status = http_status(url)
        return status is not None and ready(status)

    wait_until(answered, timeout, f"{url} to be ready", every=0.1)
