"""Where an email's CPU goes in the worker's pipeline: render, its context, mint, templates, MIME;
and the same whole render for a branded, localised email from an app's own template.

Run: .venv/bin/python -m bench.pipeline_parts   (under a minute; writes
bench/results/pipeline_parts.txt)

Link jobs as production drains them (bench/drain.py queue_links: reset and
verify links for real accounts), claimed with claim_batch, then each part of
Renderer.render timed on its own over all of them. Each figure is CPU
microseconds per email (time.process_time, so a shared, busy machine moves
it less than wall time would), best of ROUNDS rounds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

import psycopg

from authsvc.accounts.tokens import TokenClaims
from authsvc.config import load_settings
from authsvc.emails.compose import render_parts
from authsvc.emails.looks import database_looks
from authsvc.services import token_codec
from authsvc.worker import jobs
from authsvc.worker.jobs import ClaimedJob
from authsvc.worker.mailers import OutgoingEmail, needs_smtputf8
from authsvc.worker.mime import boundary_for, build_message, legacy_message
from authsvc.worker.render import Renderer
from bench.common import fresh_database, report, worker_env
from bench.drain import brand_jobs, queue_links

JOBS = 2_000
ROUNDS = 7
BATCH = 100


def _claimed(url: str, *, branded: bool = False) -> list[ClaimedJob]:
    queue_links(url, JOBS)
    if branded:
        brand_jobs(url, half=True)
    logging.getLogger("authsvc").setLevel(logging.WARNING)  # claim lines are not measured here
    claimed: list[ClaimedJob] = []
    with psycopg.connect(url, autocommit=True) as conn:
        while batch := jobs.claim_batch(conn, "bench:pipeline", BATCH, 3600):
            claimed += batch
    assert len(claimed) == JOBS, len(claimed)
    return claimed


def _per_email(step: Callable[[ClaimedJob], object], claimed: Sequence[ClaimedJob]) -> float:
    """Best-of-ROUNDS CPU µs per email of `step(job)` over every claimed job."""
    best = float("inf")
    for _ in range(ROUNDS):
        began = time.process_time()
        for job in claimed:
            step(job)
        best = min(best, time.process_time() - began)
    return best / len(claimed) * 1e6


def measure(url: str, *, branded: bool = False) -> dict[str, float]:
    claimed = _claimed(url, branded=branded)
    with_data_dir = worker_env(url, "null://", "/nonexistent")
    settings = load_settings(with_data_dir)
    codec = token_codec(settings)
    renderer = Renderer(settings, codec, looks=database_looks(url, settings.product_name))
    claims = {job.id: TokenClaims(job.user_id, job.purpose, job.token_version, job.issued_at)
              for job in claimed if job.purpose is not None and job.user_id is not None
              and job.token_version is not None and job.issued_at is not None}
    assert len(claims) == JOBS
    contexts = {job.id: renderer._context(job) for job in claimed}
    built = {job.id: renderer.parts(job) for job in claimed}
    sender = renderer.sender

    def templates(job: ClaimedJob) -> object:
        look = renderer.look(job)
        template = renderer.template(job, look, renderer.locale(job, look))
        return render_parts(template, contexts[job.id])

    def mime(job: ClaimedJob) -> bytes:
        headers, text, html = built[job.id]
        return build_message(headers, text, html, utf8=needs_smtputf8(sender, job.recipient),
                             boundary=boundary_for(job.public_id.int))

    def stdlib_mime(job: ClaimedJob) -> bytes:
        headers, text, html = built[job.id]
        return legacy_message(headers, text, html, utf8=needs_smtputf8(sender, job.recipient),
                              boundary=boundary_for(job.public_id.int))

    data = {job.id: mime(job) for job in claimed}

    def outgoing(job: ClaimedJob) -> OutgoingEmail:
        headers, text, html = built[job.id]
        return OutgoingEmail(job.id, job.public_id, sender, job.recipient, "<m@b>", data[job.id],
                             from_header=settings.mail_from, subject="s", text=text, html=html,
                             headers=tuple(headers[5:]), kind=job.template, link="l", code="c")

    if branded:  # the row compared with the plain pipeline's
        return _beside(renderer, claimed)

    return {
        "Renderer.render (the whole pipeline)": _per_email(renderer.render, claimed),
        "  _context (incl. mint + mint_code)": _per_email(renderer._context, claimed),
        "    TokenCodec.mint": _per_email(lambda job: codec.mint(claims[job.id]), claimed),
        "    TokenCodec.mint_code": _per_email(lambda job: codec.mint_code(claims[job.id]),
                                               claimed),
        "  templates (text + HTML)": _per_email(templates, claimed),
        "  Date header (Renderer._date)": _per_email(lambda _job: renderer._date(), claimed),
        "  headers + text + HTML (Renderer.parts)": _per_email(renderer.parts, claimed),
        "  build_message (MIME bytes)": _per_email(mime, claimed),
        "    beside it: legacy_message (email.mime)": _per_email(stdlib_mime, claimed),
        "  OutgoingEmail": _per_email(outgoing, claimed),
    }


def _beside(renderer: Renderer, claimed: Sequence[ClaimedJob]) -> dict[str, float]:
    """The whole render of plain and of branded jobs from one claim, taking turns round
    by round, so a busy machine moves both alike (the ratio is the figure to read)."""
    branded = [job for job in claimed if job.payload.get("own_account")]
    plain = [job for job in claimed if not job.payload.get("own_account")]
    assert branded and plain
    best = {"plain": float("inf"), "branded": float("inf")}
    for _ in range(ROUNDS):
        for name, group in (("plain", plain), ("branded", branded)):
            began = time.process_time()
            for job in group:
                renderer.render(job)
            best[name] = min(best[name], (time.process_time() - began) / len(group) * 1e6)
    return {"  beside it: Renderer.render, plain": best["plain"],
            "  beside it: branded + de + app template": best["branded"]}


def main() -> None:
    with fresh_database() as url:
        figures = measure(url)
    with fresh_database() as url:
        figures |= measure(url, branded=True)
    plain = figures["  beside it: Renderer.render, plain"]
    branded = figures["  beside it: branded + de + app template"]
    report("pipeline_parts", [
        f"CPU µs per email, best of {ROUNDS} rounds over {JOBS} claimed reset/verify link jobs:",
        *(f"{name:45s} {value:6.1f}" for name, value in figures.items()),
        f"branded, localised, app template: {plain / branded:.0%} of the plain render's"
        " emails per CPU second, same claim, taking turns (the target: ≥ 90 %)",
    ])


if __name__ == "__main__":
    main()
