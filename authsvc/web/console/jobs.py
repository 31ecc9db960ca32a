"""/admin/jobs: the outbox, filtered and paged; one job's trail as a timeline; redrive, cancel."""

from __future__ import annotations

from collections.abc import Callable

from flask import Blueprint, abort, flash, redirect, request, url_for
from flask.typing import ResponseReturnValue

from authsvc.accounts.addresses import InvalidAddress, parse_address
from authsvc.operators import actions, console_reads
from authsvc.outbox import STATUSES, admin
from authsvc.web.console.forms import ActionForm
from authsvc.web.console.guard import actor
from authsvc.web.console.sign_in import render
from authsvc.web.pages.i18n import gettext
from authsvc.web.pages.refusals import translated_refusal
from authsvc.web.plumbing import db, services

PAGE = 50
KINDS = ("email", "webhook")
MAX_ID = 2**63 - 1
# Ids in paths stop at PostgreSQL's bigint: a larger one is not found, not a database error.
ROW_ID = f"int(max={MAX_ID})"


def _id(text: str | None) -> int | None:
    if text and text.isascii() and text.isdigit() and len(text) <= 19 and 0 < int(text) <= MAX_ID:
        return int(text)
    return None


def jobs() -> ResponseReturnValue:
    status = request.args.get("status") or None
    kind = request.args.get("kind") or None
    address_text = (request.args.get("address") or "").strip()
    problems = []
    if status is not None and status not in STATUSES:
        problems.append(gettext("unknown status %(status)r", status=status))
        status = None
    if kind is not None and kind not in KINDS:
        problems.append(gettext("unknown kind %(kind)r", kind=kind))
        kind = None
    address = None
    if address_text:
        try:
            address = parse_address(address_text)
        except InvalidAddress as exc:
            problems.append(translated_refusal(exc))
    before = _id(request.args.get("before"))
    rows = console_reads.find_jobs(db(), status=status, kind=kind, recipient=address,
                                   before_id=before, limit=PAGE + 1)
    more = len(rows) > PAGE
    rows = rows[:PAGE]
    return render("jobs.html", 400 if problems else 200, rows=rows, problems=problems,
                  statuses=STATUSES, kinds=KINDS, chosen_status=status, kind=kind,
                  address=address_text, next_before=rows[-1].id if more else None,
                  first_page=before is None)


def job(job_id: int) -> ResponseReturnValue:
    found = admin.find_job(db(), job_id)
    if found is None:
        abort(404)
    return render("job.html", job=found, events=admin.job_events(db(), job_id),
                  form=ActionForm(), cancellable=found.status in ("pending", "failed"))


def redrive(job_id: int) -> ResponseReturnValue:
    return _act_on_job(
        job_id, actions.redrive_job, actions.NotRedrivable,
        lambda reason: gettext("Job %(id)s was not queued again: %(reason)s.", id=job_id,
                               reason=reason),
        lambda: gettext("Job %(id)s is queued again with fresh attempts.", id=job_id))


def cancel(job_id: int) -> ResponseReturnValue:
    return _act_on_job(
        job_id, actions.cancel_job, actions.NotCancellable,
        lambda reason: gettext("Job %(id)s was not cancelled: %(reason)s.", id=job_id,
                               reason=reason),
        lambda: gettext("Job %(id)s is cancelled: it will not be sent.", id=job_id))


def _act_on_job(job_id: int, act: Callable[..., object], refusal: type[Exception],
                refused: Callable[[Exception], str], done: Callable[[], str]
                ) -> ResponseReturnValue:
    """A POST from a job's page: the action, then the page again saying how it went."""
    if ActionForm().validate_on_submit():
        try:
            act(db(), services(), actor(), job_id)
        except refusal as exc:
            # The refusal's reason is the operators' module's own (English) words.
            flash(refused(exc), "error")
        else:
            flash(done(), "success")
    return redirect(url_for("console.job", job_id=job_id), 303)


def register(bp: Blueprint) -> None:
    bp.add_url_rule("/jobs", view_func=jobs, methods=["GET"])
    bp.add_url_rule(f"/jobs/<{ROW_ID}:job_id>", view_func=job, methods=["GET"])
    bp.add_url_rule(f"/jobs/<{ROW_ID}:job_id>/redrive", view_func=redrive, methods=["POST"])
    bp.add_url_rule(f"/jobs/<{ROW_ID}:job_id>/cancel", view_func=cancel, methods=["POST"])
