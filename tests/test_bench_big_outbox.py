"""The big-outbox benchmark's own checks, at a size a test can afford: its figures are only
worth printing while its fill matches what the service's statements leave behind."""

from __future__ import annotations

import psycopg

from bench.big_outbox import _fill, _measure, _prune


def test_the_fill_counts_as_the_service_counts_and_the_prune_goes_batch_by_batch(
        conn: psycopg.Connection, monkeypatch) -> None:
    monkeypatch.setattr("bench.big_outbox.PRUNE_BATCH", 40)
    _fill(conn, 300)
    figures = _measure(conn)  # asserts the counters agree with a count of every row
    assert set(figures) >= {"claim_batch_32", "metrics_outbox", "outbox_stats"}
    pruned = _prune(conn, 100)
    # The cutoff is the prune's own now(): each second since the fill adds a job.
    assert pruned["rows"] >= 99 and pruned["batches"] == pruned["rows"] // 40 + 1
