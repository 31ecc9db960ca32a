"""/admin/accounts: find one account by address, see its state, and act on it."""

from __future__ import annotations

from datetime import timedelta

from flask import Blueprint, abort, flash, redirect, request, url_for
from flask.typing import ResponseReturnValue

from authsvc.accounts import change_records, sessions, users
from authsvc.accounts.addresses import InvalidAddress, parse_address
from authsvc.operators import actions, console_reads
from authsvc.web.console.forms import ActionForm
from authsvc.web.console.guard import actor
from authsvc.web.console.jobs import ROW_ID
from authsvc.web.console.sign_in import render
from authsvc.web.pages.i18n import gettext, ngettext
from authsvc.web.pages.refusals import translated_refusal
from authsvc.web.pages.user_agents import describe_user_agent
from authsvc.web.plumbing import db, services


def find() -> ResponseReturnValue:
    """The search box; an address that names an account opens its page."""
    typed = (request.args.get("address") or "").strip()
    if not typed:
        return render("accounts.html", address="", problem=None)
    try:
        email = parse_address(typed)
    except InvalidAddress as exc:
        return render("accounts.html", 400, address=typed, problem=translated_refusal(exc))
    user = users.find_user_by_email(db(), email)
    if user is None:
        return render("accounts.html", 404, address=typed,
                      problem=gettext("No account uses %(email)s.", email=email))
    return redirect(url_for("console.account", user_id=user.id), 303)


def account(user_id: int) -> ResponseReturnValue:
    conn = db()
    user = users.find_user_by_id(conn, user_id)
    if user is None:
        abort(404)
    svc = services()
    now = svc.clock()
    ttl = timedelta(seconds=svc.settings.email_revert_ttl)
    changes = change_records.list_changes(conn, user.id)
    live_undo = [c for c in changes if c.standing and c.changed_at + ttl > now]
    return render(
        "account.html", user=user, changes=changes, live_undo=live_undo, undo_ttl=ttl,
        now=now, sessions=sessions.list_sessions(conn, user.id, now),
        emails=console_reads.account_emails(conn, user.id), form=ActionForm(),
        browser_name=describe_user_agent,
    )


def _act(user_id: int, done: str, act: str) -> ResponseReturnValue:
    form = ActionForm()
    if not form.validate_on_submit():
        return redirect(url_for("console.account", user_id=user_id), 303)
    conn, svc, who = db(), services(), actor()
    if act == "end_sessions":
        ended = actions.end_sessions(conn, svc, who, user_id)
        flash(ngettext("%(num)s session ended.", "%(num)s sessions ended.", ended), "success")
    elif act == "send_reset":
        queued = actions.send_reset(conn, svc, who, user_id)
        flash(done if queued else gettext("No reset was queued: the address's email limit held"
                                          " it back (or the account is gone)."),
              "success" if queued else "error")
    elif act == "lift_lockout":
        actions.lift_lockout(conn, svc, who, user_id)
        flash(done, "success")
    elif act == "void_undo_links":
        ended = actions.void_undo_links(conn, svc, who, user_id)
        flash(ngettext("%(num)s undo link voided.", "%(num)s undo links voided.", ended), "success")
    elif act == "delete":
        if actions.delete_account(conn, svc, who, user_id):
            flash(done, "success")
        else:
            flash(gettext("That account was already gone."), "info")
        return redirect(url_for("console.find"), 303)
    return redirect(url_for("console.account", user_id=user_id), 303)


def end_sessions(user_id: int) -> ResponseReturnValue:
    return _act(user_id, "", "end_sessions")


def send_reset(user_id: int) -> ResponseReturnValue:
    return _act(user_id, gettext("A password reset email is queued to the account's address."),
                "send_reset")


def lift_lockout(user_id: int) -> ResponseReturnValue:
    return _act(user_id, gettext("Failed logins forgotten: the owner may log in now."),
                "lift_lockout")


def void_undo_links(user_id: int) -> ResponseReturnValue:
    return _act(user_id, "", "void_undo_links")


def delete(user_id: int) -> ResponseReturnValue:
    return _act(user_id, gettext("The account is deleted."), "delete")


def register(bp: Blueprint) -> None:
    bp.add_url_rule("/accounts", view_func=find, methods=["GET"])
    bp.add_url_rule(f"/accounts/<{ROW_ID}:user_id>", view_func=account, methods=["GET"])
    for name, view in (("end-sessions", end_sessions), ("send-reset", send_reset),
                       ("lift-lockout", lift_lockout), ("void-undo-links", void_undo_links),
                       ("delete", delete)):
        bp.add_url_rule(f"/accounts/<{ROW_ID}:user_id>/{name}", view_func=view, methods=["POST"])
