"""The transactional outbox: one home for its rules, its producer and its read side.

- `rules`: the NOTIFY channel, the templates and statuses (the due and
  leased predicates are SQL functions in migrations/0026_baseline.sql).
- `producer`: queue an email in the caller's transaction.
- `admin`: what operators and /metrics read (stats, listings, trails) and
  the operator's repairs (redrive, prune).

The worker's claim (authsvc/worker/jobs.sql) uses the same due predicate.
"""

from authsvc.outbox.producer import count_and_queue_link, enqueue_email, notify_workers
from authsvc.outbox.rules import NO_OUTCOME_EVENTS, NOTIFY_CHANNEL, STATUSES, TEMPLATES

__all__ = [
    "NOTIFY_CHANNEL",
    "NO_OUTCOME_EVENTS",
    "STATUSES",
    "TEMPLATES",
    "count_and_queue_link",
    "enqueue_email",
    "notify_workers",
]
