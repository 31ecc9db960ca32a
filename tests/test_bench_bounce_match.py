"""The bounce-match benchmark at a size a test can afford: its figures mean something only
while the rows it fills are ones the check finds, and other ids or addresses are not."""

from __future__ import annotations

import psycopg

from authsvc.outbox.admin import sent_to
from bench.bounce_match import WITHIN_SECONDS, _fill, _median_ms


def test_every_filled_email_is_found_and_a_stranger_is_not(conn: psycopg.Connection) -> None:
    _fill(conn, 50)
    assert _median_ms(conn, 50) >= 0  # asserts each looked-up email is found
    assert not sent_to(conn, "u7@example.com", message_id="m8", public_job_id=None,
                       within_seconds=WITHIN_SECONDS)
    assert not sent_to(conn, "stranger@example.com", message_id="m7", public_job_id=None,
                       within_seconds=WITHIN_SECONDS)
