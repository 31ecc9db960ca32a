"""The whole service as real processes: gunicorn, outbox workers and the test inbox."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from authsvc.cli.serve import gunicorn_argv
from authsvc.testing import ScopedInbox
from testkit.waiting import free_ports, http_status, wait_until


@contextmanager
def running_stack(
    env: Mapping[str, str],
    log_path: Path,
    *,
    web_workers: int = 1,
    threads: int = 4,
    outbox_workers: int = 1,
) -> Iterator[str]:
    """Start the stack (as `authsvc dev` does) on free ports; yields its public base URL.

    `env` is laid over os.environ (database URL and the like); all output goes to
    `log_path`. On leaving, every process gets SIGTERM and must exit 0.
    """
    port, web_port, smtp_port = free_ports(3)
    url = f"http://127.0.0.1:{port}"
    stack_env = {
        **os.environ,
        **env,
        "AUTHSVC_BASE_URL": url,
        "AUTHSVC_TEST_INBOX": "on",
        "AUTHSVC_SMTP_URL": f"smtp://127.0.0.1:{smtp_port}",
    }
    cli = [sys.executable, "-m", "authsvc.cli"]
    argvs = [
        gunicorn_argv(f"127.0.0.1:{web_port}", workers=web_workers, threads=threads),
        # The inbox's server owns the public port and forwards the rest to gunicorn.
        [*cli, "inbox", "--port", str(smtp_port), "--http-port", str(port),
         "--upstream", f"http://127.0.0.1:{web_port}"],
        *([*cli, "worker"] for _ in range(outbox_workers)),
    ]
    with log_path.open("wb") as log:
        processes = [
            subprocess.Popen(argv, env=stack_env, stdout=log, stderr=subprocess.STDOUT)
            for argv in argvs
        ]

        def up() -> bool:
            assert all(p.poll() is None for p in processes), log_path.read_text()
            try:
                # The sink too: a worker that finds it closed retries only after
                # its backoff (30 s in production settings), which outlasts a wait.
                with socket.create_connection(("127.0.0.1", smtp_port), timeout=2):
                    pass
                ScopedInbox(url).new_scope()
            except OSError:
                return False
            # gunicorn behind the inbox's front too: until it listens, the front answers 502.
            return http_status(f"{url}/readyz") == 200

        try:
            wait_until(up, timeout=30, what="the web app and the SMTP sink")
            yield url
        finally:
            for process in processes:
                process.send_signal(signal.SIGTERM)
            codes = [process.wait(timeout=30) for process in processes]
    assert codes == [0] * len(processes), log_path.read_text()[-5000:]
