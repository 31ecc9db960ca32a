"""The outbox's shared names: its NOTIFY channel, templates and job statuses.

Whether a job is due or leased is decided in SQL, by outbox_job_due and
outbox_job_leased (migrations/0026_baseline.sql), so the claim, the
operator's stats and /metrics cannot disagree.
"""

from __future__ import annotations

# Producers pg_notify it at commit; every worker LISTENs on it.
NOTIFY_CHANNEL = "authsvc_outbox"
TEMPLATES = (
    "verify", "reset", "account_exists", "password_changed",
    # An address over its life (SPEC §12, migrations/0027).
    "email_change", "email_in_use", "email_changed", "email_restored", "account_delete",
    # The old address's approval of a change (AUTHSVC_EMAIL_CHANGE_CONFIRM_OLD, migrations/0030).
    "email_change_approval",
    # Sign in by email (SPEC §13, migrations/0031); no_account also answers resets.
    "sign_in", "no_account",
    # An operator's console sign-in code (SPEC §15, migrations/0032).
    "console_code",
)
# A job payload key: its outcome sends the app no email.* event (authsvc/worker/jobs.sql).
NO_OUTCOME_EVENTS = "no_outcome_events"
# cancelled: only an operator's cancel (the console) makes it; no worker outcome does.
STATUSES = ("pending", "sent", "failed", "superseded", "expired", "suppressed", "cancelled")
