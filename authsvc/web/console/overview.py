"""/admin/: the queue at a glance."""

from __future__ import annotations

from flask import Blueprint
from flask.typing import ResponseReturnValue

from authsvc.durations import describe_duration
from authsvc.operators import console_reads
from authsvc.outbox import admin
from authsvc.web.console.chart import per_minute_chart
from authsvc.web.console.sign_in import render
from authsvc.web.pages.i18n import gettext
from authsvc.web.pages.language import page_locale
from authsvc.web.plumbing import db


def overview() -> ResponseReturnValue:
    conn = db()
    # The database's clock: the trail and the due times are written in it.
    clock = console_reads.queue_clock(conn)
    now, oldest_due = clock.now, clock.oldest_due_seconds
    stats = admin.outbox_stats(conn)
    chart = per_minute_chart(console_reads.outcomes_per_minute(conn, now), now)
    return render(
        "overview.html", stats=stats, chart=chart,
        oldest_due=(gettext("none due") if stats.due == 0 else
                    describe_duration(int(oldest_due), page_locale()) if oldest_due >= 1
                    else gettext("under a second")),
        failing=console_reads.failing_webhook_targets(conn, now),
    )


def register(bp: Blueprint) -> None:
    bp.add_url_rule("/", view_func=overview, methods=["GET"])
