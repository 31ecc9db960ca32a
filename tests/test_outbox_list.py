"""`authsvc outbox list` and `show` as an operator reads them: columns that line up."""

from __future__ import annotations

from click.testing import CliRunner

from authsvc.cli import main
from authsvc.outbox.producer import enqueue_email
from tests.webhook_support import register_webhook_app


def _queue_mixed_jobs(conn, settings) -> None:
    app, _key, _secret = register_webhook_app(conn, settings, "https://hooks.example.com/in")
    enqueue_email(conn, template="verify", recipient="ann@example.com")
    conn.execute(
        "INSERT INTO email_jobs (kind, template, recipient, payload, app_id)"
        " VALUES ('webhook', 'user.password_changed', 'https://hooks.example.com/in', '{}', %s)",
        (app.id,),
    )
    enqueue_email(conn, template="account_exists", recipient="bo@example.com")
    conn.execute(
        "UPDATE email_jobs SET status = 'failed', last_error = '550 no such user', "
        "attempt_count = 12 WHERE recipient = 'bo@example.com'"
    )


def test_outbox_list_columns_line_up_whatever_the_event_names(conn, settings, env):
    _queue_mixed_jobs(conn, settings)
    listed = CliRunner().invoke(main, ["outbox", "list"], env=env)
    assert listed.exit_code == 0, listed.output
    header, *rows = listed.output.splitlines()
    assert len(rows) == 3
    # Left-aligned columns start where their heading starts ...
    for heading, values in [("status", ["pending", "failed"]),
                            ("template", ["verify", "user.password_changed", "account_exists"]),
                            ("recipient", ["ann@example.com", "https://hooks.example.com/in",
                                           "bo@example.com"])]:
        for row in rows:
            for value in [v for v in values if f" {v} " in f" {row} "][:1]:
                assert row.index(f" {value}") + 1 == header.index(heading), (heading, row)
    # ... and numbers end where theirs ends.
    for row in rows:
        assert row[: header.index("tries") + len("tries")].rstrip()[-1].isdigit(), row
        assert row[header.index("tries") + len("tries")] == " ", row
    assert rows[0].endswith("[550 no such user]")


def test_outbox_show_trail_lines_up(conn, settings, env):
    _queue_mixed_jobs(conn, settings)
    [job_id] = conn.execute("SELECT id FROM email_jobs WHERE template = 'verify'").fetchone()
    conn.execute(
        "INSERT INTO email_job_events (job_id, event, attempt) VALUES (%s, 'claimed', 1),"
        " (%s, 'lease_lost', 1)", (job_id, job_id))
    shown = CliRunner().invoke(main, ["outbox", "show", str(job_id)], env=env)
    assert shown.exit_code == 0, shown.output
    trail = shown.output.split("trail:\n", 1)[1].splitlines()
    assert len(trail) == 2
    assert len({line.index("attempt=") for line in trail}) == 1, trail
