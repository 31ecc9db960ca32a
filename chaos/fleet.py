"""The processes under test: the API under gunicorn and W outbox workers."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from testkit.waiting import free_port, wait_until_ready

BACKOFF_BASE_SECONDS = 0.2
BACKOFF_CAP_SECONDS = 2.0
# A retry waits at most cap * 1.5 (jitter): what "stuck" is measured against.
MAX_BACKOFF_SECONDS = BACKOFF_CAP_SECONDS * 1.5
WORKER_CONCURRENCY = 4
WORKER_BATCH = 10
# docs/worker.md: a killed worker re-sends at most what it had in flight plus
# what it had handed to its completer and not yet recorded.
MAX_RESENDS_PER_KILL = WORKER_CONCURRENCY + WORKER_BATCH


@dataclass
class Fleet:
    env: dict[str, str]
    logs: Path
    workers: int
    lease_seconds: float
    seed: int
    api_port: int = field(default_factory=free_port)
    killed_pids: list[int] = field(default_factory=list)
    _api: subprocess.Popen[bytes] | None = None
    _workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    _files: list[IO[bytes]] = field(default_factory=list)
    _started: int = 0
    # Workers are killed and replaced from the schedule's thread and, in
    # provider mode, from the provider's request threads.
    _lock: threading.RLock = field(default_factory=threading.RLock)

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        log = (self.logs / f"{name}.log").open("wb")
        self._files.append(log)
        return subprocess.Popen(argv, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)

    def start_api(self, processes: int = 2, threads: int = 8) -> None:
        argv = [sys.executable, "-m", "authsvc.cli", "serve", "--bind",
                f"127.0.0.1:{self.api_port}", "--workers", str(processes),
                "--threads", str(threads)]
        self._api = self._spawn("api", argv)
        wait_until_ready(f"{self.api_url}/readyz", self._api,
                         output=(self.logs / "api.log").read_text)

    def start_worker(self) -> None:
        with self._lock:
            self._start_worker()

    def _start_worker(self) -> None:
        self._started += 1
        # The real command; only time is compressed (production retries start
        # at 30 s and cap at 1 h, which would stretch a run to hours).
        argv = [sys.executable, "-m", "authsvc.cli", "worker",
                "--lease-seconds", str(self.lease_seconds), "--poll-seconds", "0.5",
                "--batch", str(WORKER_BATCH), "--concurrency", str(WORKER_CONCURRENCY),
                "--retry-base-seconds", str(BACKOFF_BASE_SECONDS),
                "--retry-cap-seconds", str(BACKOFF_CAP_SECONDS)]
        self._workers.append(self._spawn(f"worker-{self._started}", argv))

    def start_workers(self) -> None:
        for _ in range(self.workers):
            self.start_worker()

    def kill_random_worker(self, rng: random.Random) -> None:
        """SIGKILL one running worker (no chance to clean up) and start a replacement."""
        with self._lock:
            alive = [p for p in self._workers if p.poll() is None]
            if alive:
                self.kill_worker(rng.choice(alive).pid)
            else:
                self.start_worker()

    def worker_pids(self) -> list[int]:
        with self._lock:
            return [p.pid for p in self._workers if p.poll() is None]

    def kill_worker(self, pid: int, signum: int = signal.SIGKILL) -> None:
        """Kill the worker with this pid and start a replacement."""
        with self._lock:
            [victim] = [p for p in self._workers if p.pid == pid]
            victim.send_signal(signum)
            victim.wait(timeout=10)
            self.killed_pids.append(victim.pid)
            self._workers.remove(victim)
            self.start_worker()

    def replace_exited_workers(self) -> list[int]:
        """Restart workers that exited on their own; returns their exit codes."""
        codes = []
        with self._lock:
            for process in [p for p in self._workers if p.poll() is not None]:
                codes.append(process.returncode)
                self._workers.remove(process)
                self.start_worker()
        return codes

    def stop(self) -> None:
        processes = [p for p in [self._api, *self._workers] if p is not None]
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        for log in self._files:
            log.close()
