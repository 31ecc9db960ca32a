"""The overview's chart, drawn on the server: sent and failed per minute over the last hour.

Plain SVG shapes with presentation attributes and classes, no script and
no inline style, so the console's CSP holds; each bar carries a <title>
with its figures for screen readers and hover.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from authsvc.operators.console_reads import Minute
from authsvc.web.pages.i18n import gettext

WIDTH = 600
HEIGHT = 160  # the bars'; the time labels sit below
LABELS = 18
MINUTES = 60
SLOT = WIDTH / MINUTES


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    kind: str  # "sent" or "failed": the CSS class
    label: str


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    labels_y: int
    start: str  # the first minute's label
    end: str
    bars: list[Bar]
    peak: int
    sent: int
    failed: int

    @property
    def total_height(self) -> int:
        return self.height + LABELS


def per_minute_chart(minutes: list[Minute], now: datetime) -> Chart:
    """Sixty slots ending at `now`'s minute; failed stacked on sent, scaled to the busiest."""
    last = now.replace(second=0, microsecond=0)
    first = last - timedelta(minutes=MINUTES - 1)
    counts = {m.minute.replace(second=0, microsecond=0): m for m in minutes}
    peak = max((m.sent + m.failed for m in minutes), default=0)
    scale = (HEIGHT - 10) / peak if peak else 0.0
    bars: list[Bar] = []
    for slot in range(MINUTES):
        at = first + timedelta(minutes=slot)
        found = counts.get(at)
        if found is None:
            continue
        x = round(slot * SLOT + 1, 1)
        sent_h = found.sent * scale
        failed_h = found.failed * scale
        minute = at.strftime("%H:%M")
        label = gettext("%(minute)s UTC: %(sent)s sent, %(failed)s failed",
                        minute=minute, sent=found.sent, failed=found.failed)
        if found.sent:
            bars.append(Bar(x, round(HEIGHT - sent_h, 1), round(SLOT - 2, 1), round(sent_h, 1),
                            "sent", label))
        if found.failed:
            bars.append(Bar(x, round(HEIGHT - sent_h - failed_h, 1), round(SLOT - 2, 1),
                            round(failed_h, 1), "failed", label))
    return Chart(WIDTH, HEIGHT, HEIGHT + LABELS - 4, f"{first:%H:%M}", f"{last:%H:%M} UTC", bars,
                 peak, sum(m.sent for m in minutes), sum(m.failed for m in minutes))
