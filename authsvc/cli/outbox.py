"""`authsvc outbox …`: what an operator runs to inspect and repair the outbox."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from uuid import UUID

import click
import psycopg

from authsvc.cli.options import parsed_by
from authsvc.cli.startup import database_url_or_exit, settings_or_exit
from authsvc.config import parse_duration
from authsvc.db.connections import connect
from authsvc.outbox import STATUSES, admin


@click.group()
def outbox() -> None:
    """Inspect and operate the email outbox."""


@contextmanager
def _connection() -> Iterator[psycopg.Connection]:
    url = database_url_or_exit(settings_or_exit())
    # Driver errors become one line at the `authsvc` group (cli/startup.py).
    with connect(url, connect_timeout=10) as conn:
        yield conn


class JobReference(click.ParamType):
    """A job's id as `outbox list` shows it, or the public id its email carries."""

    name = "job"

    def convert(self, value: object, param: click.Parameter | None,
                ctx: click.Context | None) -> int | UUID:
        text = str(value).strip()
        # At most 19 digits before int(): Python refuses to parse over 4,300.
        if text.isascii() and text.isdigit() and len(text) <= 19 and 0 < int(text) < 2**63:
            return int(text)
        try:
            return UUID(text)
        except ValueError:
            self.fail(f"{text!r} is neither a job id nor a job's public id (a UUID)", param, ctx)


def _job_id_or_exit(conn: psycopg.Connection, reference: int | UUID) -> int:
    job_id = admin.job_id_of(conn, reference)
    if job_id is None:
        raise click.ClickException(f"no outbox job {reference}")
    return job_id


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else "-"


def _aligned(rows: Sequence[Sequence[str]], right: Collection[int] = ()) -> list[str]:
    """Rows as lines of cells two spaces apart, each column as wide as its widest cell.

    Columns whose index is in `right` (numbers) are right-aligned; the last
    column is not padded. Widths come from the data, so a long event name
    (user.password_changed) or a six-digit id cannot push a row out of line.
    """
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    last = len(widths) - 1
    return [
        "  ".join(
            cell if i == last else cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            for i, cell in enumerate(row)
        )
        for row in rows
    ]


@outbox.command("stats")
def outbox_stats() -> None:
    """Jobs per status and the age of the oldest pending one."""
    with _connection() as conn:
        stats = admin.outbox_stats(conn)
    for name in ("pending", "due", "leased", "sent", "failed", "superseded", "expired",
                 "suppressed", "cancelled"):
        click.echo(f"{name:<22} {getattr(stats, name)}")
    click.echo(f"{'oldest_pending_seconds':<22} {stats.oldest_pending_seconds:.1f}")


@outbox.command("list")
@click.option("--status", type=click.Choice(STATUSES), default=None)
@click.option("--limit", type=click.IntRange(1, 10000), default=50, show_default=True)
def outbox_list(status: str | None, limit: int) -> None:
    """Newest jobs first."""
    with _connection() as conn:
        rows = admin.list_jobs(conn, status, limit)
    if not rows:
        click.echo(f"no {status} jobs" if status else "no jobs")
        return
    table = [("id", "status", "template", "tries", "created", "recipient")]
    table += [
        (str(job.id), job.status, job.template, str(job.attempt_count), _when(job.created_at),
         job.recipient + (f"  [{job.last_error}]" if job.last_error else ""))
        for job in rows
    ]
    for line in _aligned(table, right={0, 3}):
        click.echo(line)


@outbox.command("show")
@click.argument("reference", metavar="ID", type=JobReference())
def outbox_show(reference: int | UUID) -> None:
    """A job and its lease audit trail (ID: the job's id, or the public id in its email)."""
    with _connection() as conn:
        job_id = _job_id_or_exit(conn, reference)
        job = admin.find_job(conn, job_id)
        if job is None:
            raise click.ClickException(f"no outbox job {job_id}")
        events = admin.job_events(conn, job_id)
    for name, value in vars(job).items():
        shown = _when(value) if isinstance(value, datetime) else ("-" if value is None else value)
        click.echo(f"{name:<20} {shown}")
    click.echo("")
    click.echo("trail:")
    width = max((len(e.event) for e in events), default=0)
    for e in events:
        click.echo(
            f"  {_when(e.created_at)}  {e.event:<{width}} attempt={e.attempt or '-'} "
            f"owner={e.lease_owner or '-'} lease_until={_when(e.lease_expires_at)} "
            f"version={e.token_version if e.token_version is not None else '-'}"
            + (f" message_id={e.provider_message_id}" if e.provider_message_id else "")
            + (f" error={e.error}" if e.error else "")
        )


@outbox.command("redrive")
@click.argument("reference", metavar="ID", type=JobReference())
def outbox_redrive(reference: int | UUID) -> None:
    """Queue a failed job again with fresh attempts (ID: as for `show`)."""
    with _connection() as conn:
        job_id = _job_id_or_exit(conn, reference)
        if not admin.redrive_job(conn, job_id):
            job = admin.find_job(conn, job_id)
            if job is None:
                raise click.ClickException(f"no outbox job {job_id}")
            raise click.ClickException(
                f"job {job_id} is {job.status}; only failed jobs are redriven"
            )
    click.echo(f"job {job_id} queued again")


@outbox.command("prune")
@click.option(
    "--older-than",
    required=True,
    callback=parsed_by(parse_duration),
    help="Age such as 30d or 12h; only finished jobs are deleted.",
)
def outbox_prune(older_than: int) -> None:
    """Delete finished jobs (sent, failed, superseded, expired) and their trails."""
    with _connection() as conn:
        deleted = admin.prune_jobs(conn, older_than)
    click.echo(f"deleted {deleted} job(s)")


@outbox.command("recount")
def outbox_recount() -> None:
    """Set the final-status counts to the jobs there are (after old workers or hand edits)."""
    with _connection() as conn:
        corrections = admin.recount_jobs(conn)
    for c in corrections:
        click.echo(f"{c.status}: counted {c.counted}, now {c.live}")
    if not corrections:
        click.echo("every final status was counted right")
