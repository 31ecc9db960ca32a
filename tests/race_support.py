"""Racing one action from many connections at once, for tests of what must happen once."""

from __future__ import annotations

import threading
from collections.abc import Callable

import psycopg

from testkit.waiting import wait_until


def race(database_url: str, runners: int, attempt: Callable[[psycopg.Connection, int], str],
         timeout: float = 60.0) -> list[str]:
    """Run `attempt(own_connection, i)` in `runners` threads released together; the outcomes."""
    barrier = threading.Barrier(runners)
    outcomes: list[str] = []
    lock = threading.Lock()

    def run(i: int) -> None:
        with psycopg.connect(database_url, autocommit=True) as own:
            barrier.wait(timeout=timeout / 3)
            result = attempt(own, i)
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(runners)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout)
    assert len(outcomes) == runners, f"{runners - len(outcomes)} runner(s) did not finish"
    return outcomes


def run_in_threads(target: Callable[[], None], count: int, timeout: float = 60.0) -> None:
    """Run `target` in `count` threads at once and wait for all; fail if one hangs."""
    threads = [threading.Thread(target=target) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    assert not any(t.is_alive() for t in threads), "a thread did not finish in time"


def wait_until_waiting_on_a_lock(observer: psycopg.Connection, pid: int, what: str) -> None:
    """Block until backend `pid` waits on a lock, as `observer` sees it in pg_stat_activity."""
    wait_until(lambda: observer.execute(
        "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %s",
        (pid,)).fetchone() == (True,), what=what)


def sessions_waiting_on_locks(observer: psycopg.Connection) -> int:
    """How many sessions on `observer`'s database wait on a lock right now."""
    row = observer.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                           " AND datname = current_database()").fetchone()
    assert row is not None
    return int(row[0])


def advisory_locks(observer: psycopg.Connection, *, waiting: bool = False) -> int:
    """How many advisory locks on `observer`'s database are held or waited for right now
    (`waiting`: the waits only). Other databases' are left out: the tests of the other
    test processes take advisory locks on the same server all the time."""
    row = observer.execute(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
        " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        " AND (NOT %s OR NOT granted)", (waiting,)).fetchone()
    assert row is not None
    return int(row[0])
