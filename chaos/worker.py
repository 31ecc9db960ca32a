"""`authsvc worker` with the retry backoff compressed for a chaos run.

The production backoff starts at 30 s and caps at 1 h: faithful, but a run
that injects hundreds of 4xx replies would last hours. Everything else is
the real command: the same claim, lease, send and record code.
"""

from __future__ import annotations

import functools
import sys

# authsvc.cli first: it registers `worker` by importing worker.cli itself,
# which fails silently if worker.cli is already half-imported by us.
from authsvc.cli import main as authsvc
from worker import cli, delivery

BACKOFF_BASE_SECONDS = 0.2
BACKOFF_CAP_SECONDS = 2.0
# A retry waits at most cap * 1.5 (jitter): what "stuck" is measured against.
MAX_BACKOFF_SECONDS = BACKOFF_CAP_SECONDS * 1.5


def main() -> None:
    cli.RetryPolicy = functools.partial(  # type: ignore[misc]
        delivery.RetryPolicy, base_seconds=BACKOFF_BASE_SECONDS, cap_seconds=BACKOFF_CAP_SECONDS
    )
    authsvc(["worker", *sys.argv[1:]])


if __name__ == "__main__":
    main()
