"""The overview's chart, drawn on the server: sixty minute slots, failed stacked on sent."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from authsvc.operators.console_reads import Minute
from authsvc.web.console.chart import HEIGHT, MINUTES, WIDTH, per_minute_chart

NOW = datetime(2026, 1, 5, 12, 30, 42, tzinfo=UTC)
THIS_MINUTE = NOW.replace(second=0)


def test_an_empty_hour_draws_no_bars():
    chart = per_minute_chart([], NOW)
    assert chart.bars == [] and chart.peak == chart.sent == chart.failed == 0
    assert (chart.start, chart.end) == ("11:31", "12:30 UTC")


def test_the_busiest_minute_fills_the_height_and_failed_sits_on_sent():
    minutes = [Minute(THIS_MINUTE - timedelta(minutes=59), 3, 1),
               Minute(THIS_MINUTE, 1, 0)]
    chart = per_minute_chart(minutes, NOW)
    oldest_sent, oldest_failed, newest = chart.bars
    assert oldest_sent.x < 1 + 0.01 and newest.x > WIDTH - WIDTH / MINUTES
    assert oldest_sent.kind == "sent" and oldest_failed.kind == "failed"
    assert oldest_failed.y + oldest_failed.height == oldest_sent.y  # stacked
    assert oldest_failed.y == HEIGHT - (oldest_sent.height + oldest_failed.height)
    assert round(oldest_sent.height + oldest_failed.height) == HEIGHT - 10  # the peak
    assert newest.height == round((HEIGHT - 10) / 4, 1)
    assert "11:31 UTC: 3 sent, 1 failed" == oldest_sent.label
    assert (chart.sent, chart.failed, chart.peak) == (4, 1, 4)


def test_minutes_outside_the_hour_are_left_out():
    chart = per_minute_chart([Minute(THIS_MINUTE - timedelta(minutes=60), 5, 0)], NOW)
    assert chart.bars == []
