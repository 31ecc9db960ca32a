"""A pytest plugin: a test that starts a process must carry the `e2e` marker.

So `pytest -m "not e2e"` is an inner loop that starts no process. While a test
without the marker runs (setup, call, teardown), every way of starting a
program (subprocess, asyncio subprocesses, fork, posix_spawn, multiprocessing)
fails that test. The one exception is the embedded PostgreSQL the session
fixture starts: calls made from inside the pgserver package are allowed.
"""

from __future__ import annotations

import multiprocessing.util
import os
import subprocess
import sys
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pgserver
import pluggy
import pytest

_PGSERVER = str(Path(pgserver.__path__[0]).resolve())
# (owner, attribute) of every entry point that starts a program or a child process.
_ENTRY_POINTS: list[tuple[Any, str]] = [
    (subprocess.Popen, "_execute_child"),
    (os, "fork"),
    (os, "posix_spawn"),
    (os, "posix_spawnp"),
    (multiprocessing.util, "spawnv_passfds"),
]
_violations: dict[str, list[str]] = {}


class ProcessInUnitTest(RuntimeError):
    """A test without the e2e marker tried to start a process."""


def _called_from_pgserver() -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename.startswith(_PGSERVER):
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def _name(owner: Any) -> str:
    return str(getattr(owner, "__name__", owner))


def _guard(nodeid: str, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    def guarded(*args: Any, **kwargs: Any) -> Any:
        if _called_from_pgserver():
            return original(*args, **kwargs)
        message = f"{name} in {nodeid}, which has no e2e marker (mark it @pytest.mark.e2e)"
        _violations.setdefault(nodeid, []).append(message)
        raise ProcessInUnitTest(message)

    return guarded


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    if item.get_closest_marker("e2e") is not None:
        yield
        return
    saved = [(owner, attr, getattr(owner, attr)) for owner, attr in _ENTRY_POINTS
             if hasattr(owner, attr)]
    for owner, attr, original in saved:
        setattr(owner, attr, _guard(item.nodeid, f"{_name(owner)}.{attr}", original))
    try:
        yield
    finally:
        for owner, attr, original in saved:
            setattr(owner, attr, original)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pluggy.Result[pytest.TestReport], None]:
    """Fail the test even where its code swallowed the exception."""
    outcome = yield
    report = outcome.get_result()
    found = _violations.pop(item.nodeid, None) if call.when == "teardown" else None
    if found and report.passed:
        report.outcome = "failed"
        report.longrepr = "\n".join(found)
