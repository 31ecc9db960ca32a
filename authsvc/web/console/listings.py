"""/admin/suppressions, /admin/apps and /admin/log: lists, each with its one action."""

from __future__ import annotations

from uuid import UUID

from flask import Blueprint, flash, redirect, request, url_for
from flask.typing import ResponseReturnValue

from authsvc.accounts.addresses import InvalidAddress, parse_address
from authsvc.apps import keys
from authsvc.operators import actions, console_reads, log
from authsvc.web.console.forms import ActionForm
from authsvc.web.console.guard import actor
from authsvc.web.console.jobs import PAGE, _id
from authsvc.web.console.sign_in import render
from authsvc.web.pages.i18n import gettext
from authsvc.web.pages.refusals import translated_refusal
from authsvc.web.plumbing import db, services

MAX_SEARCH = 254


def suppression_list() -> ResponseReturnValue:
    search = (request.args.get("search") or "").strip().lower()[:MAX_SEARCH]
    rows = console_reads.find_suppressions(db(), search or None)
    return render("suppressions.html", rows=rows, search=search, form=ActionForm())


def lift_suppression() -> ResponseReturnValue:
    form = ActionForm()
    if form.validate_on_submit():
        try:
            address = parse_address(request.form.get("address", ""))
        except InvalidAddress as exc:
            flash(gettext("Nothing lifted: %(reason)s", reason=translated_refusal(exc)), "error")
        else:
            if actions.lift_suppression(db(), services(), actor(), address):
                flash(gettext("%(address)s gets mail again.", address=address), "success")
            else:
                flash(gettext("%(address)s was not suppressed.", address=address), "info")
    return redirect(url_for("console.suppression_list"), 303)


def app_list() -> ResponseReturnValue:
    conn = db()
    return render("apps.html", apps=keys.list_apps(conn),
                  health=console_reads.webhook_health(conn, services().clock()),
                  form=ActionForm())


def revoke_app(app_id: UUID) -> ResponseReturnValue:
    form = ActionForm()
    if form.validate_on_submit():
        if actions.revoke_app(db(), services(), actor(), app_id):
            flash(gettext("The app is revoked: its key no longer works."), "success")
        else:
            flash(gettext("That app was already revoked, or is unknown."), "info")
    return redirect(url_for("console.app_list"), 303)


def operator_log() -> ResponseReturnValue:
    before = _id(request.args.get("before"))
    entries = log.list_entries(db(), PAGE + 1, before)
    more = len(entries) > PAGE
    entries = entries[:PAGE]
    return render("log.html", entries=entries, next_before=entries[-1].id if more else None)


def register(bp: Blueprint) -> None:
    bp.add_url_rule("/suppressions", view_func=suppression_list, methods=["GET"])
    bp.add_url_rule("/suppressions/lift", view_func=lift_suppression, methods=["POST"])
    bp.add_url_rule("/apps", view_func=app_list, methods=["GET"])
    bp.add_url_rule("/apps/<uuid:app_id>/revoke", view_func=revoke_app, methods=["POST"])
    bp.add_url_rule("/log", view_func=operator_log, methods=["GET"])
