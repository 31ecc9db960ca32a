"""Previews of apps' templates (SPEC §14): rendered with sample values, redeeming nothing.

The API's `POST /api/v1/templates/{kind}/{locale}/preview` answers with the
parts; `authsvc templates preview` also sends them (cli/templates.py). Both
render through the one path (compose.render_parts), as the worker would.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from authsvc.apps.brands import Brand
from authsvc.durations import describe_duration
from authsvc.emails.compose import app_template, render_parts
from authsvc.emails.wording import brand_values, describe_moment
from authsvc.locales import choose_locale

# The payload key of a preview job (`authsvc templates preview`): sample values, subject
# marked (compose.PREVIEW_PREFIX).
PREVIEW = "preview"
SAMPLE_EMAIL = "person@example.com"
SAMPLE_CODE = "000000"
SAMPLE_LIFETIME = 24 * 3600
# A link of the right shape whose token no link check accepts.
SAMPLE_TOKEN = "preview-redeems-nothing"  # noqa: S105 - not a secret: no check accepts it


def sample_context(base_url: str, locale: str, now: datetime) -> dict[str, object]:
    """The per-message values a preview shows, in `locale` where they are words."""
    shown = choose_locale(locale)
    return {
        "email": SAMPLE_EMAIL,
        "link": f"{base_url}/preview?token={SAMPLE_TOKEN}",
        "code": SAMPLE_CODE,
        "code_url": f"{base_url}/preview/code",
        "expires_in": describe_duration(SAMPLE_LIFETIME, shown),
        "expires_at": describe_moment(now + timedelta(seconds=SAMPLE_LIFETIME), shown),
        "requested_by": "",
    }


def preview_parts(kind: str, locale: str, brand: Brand, subject: str, text: str, html: str,
                  base_url: str, now: datetime | None = None) -> tuple[str, str, str]:
    """(subject, text, html) of an app's template with sample values; TemplateInvalid or
    RenderLimit as the upload and the worker would refuse it."""
    template = app_template(kind, locale, subject, text, html,
                            brand_values(brand, choose_locale(locale)))
    return render_parts(template, sample_context(base_url, locale, now or datetime.now(UTC)))
