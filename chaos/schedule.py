"""The fault schedule: SIGKILL random workers on a timer, restart PostgreSQL once."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable

from chaos.cluster import ThrowawayPostgres
from chaos.failover import FailoverPair
from chaos.fleet import Fleet

MAX_CRASHES = 25  # workers exiting on their own (not our kills) before we give up


class FaultSchedule(threading.Thread):
    """Runs beside the load until the load is done, every kill happened and the restart too."""

    def __init__(self, fleet: Fleet, cluster: ThrowawayPostgres | FailoverPair,
                 rng: random.Random, *, kills: int, kill_every: float,
                 kill: Callable[[random.Random], None] | None = None) -> None:
        super().__init__(name="faults", daemon=True)
        self.fleet = fleet
        self.cluster = cluster
        self.rng = rng
        self.kills = kills
        self.kill_every = kill_every
        # SMTP mode kills a random worker at a random moment; provider mode
        # arms a kill that the provider carries out after accepting a message.
        self.kill = kill or fleet.kill_random_worker
        self.halfway = threading.Event()  # set by the load: time for the restart
        self.load_done = threading.Event()
        self.crashes: list[int] = []  # exit codes of workers that stopped by themselves

    def finished(self) -> bool:
        return (self.load_done.is_set() and len(self.fleet.killed_pids) >= self.kills
                and self.cluster.restarts >= 1)

    def run(self) -> None:
        next_kill = time.monotonic() + self.kill_every
        while not self.finished() and len(self.crashes) <= MAX_CRASHES:
            if self.halfway.is_set() and self.cluster.restarts == 0:
                self.cluster.restart()
            if len(self.fleet.killed_pids) < self.kills and time.monotonic() >= next_kill:
                self.kill(self.rng)
                next_kill = time.monotonic() + self.kill_every * self.rng.uniform(0.5, 1.5)
            self.supervise()
            time.sleep(0.05)

    def supervise(self) -> None:
        """Restart workers that exited by themselves, as a process supervisor would."""
        self.crashes.extend(self.fleet.replace_exited_workers())
