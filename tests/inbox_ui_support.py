"""An email in the test inbox carrying authsvc links in each state (for the UI tests)."""

from __future__ import annotations

import psycopg

from authsvc.accounts import actions
from authsvc.services import Services
from tests.inbox_support import email, send
from tests.link_support import latest_link
from tests.pages_support import make_account


def links_in_each_state(conn: psycopg.Connection, svc: Services) -> dict[str, str]:
    """A used verify link, a superseded reset link and a reset link that would redeem."""
    base = svc.settings.base_url
    address = make_account(conn, svc, "ann@example.com")  # confirms its verify link
    used = f"{base}/verify?token={latest_link(conn, svc, address, 'verify')}"
    actions.request_password_reset(conn, svc, email=address)
    superseded = f"{base}/reset/confirm?token={latest_link(conn, svc, address, 'reset')}"
    actions.request_password_reset(conn, svc, email=address)
    valid = f"{base}/reset/confirm?token={latest_link(conn, svc, address, 'reset')}"
    return {"used": used, "superseded": superseded, "would_redeem": valid}


def send_links_email(port: int, scope: str, links: dict[str, str]) -> None:
    text = "Your links:\n" + "\n".join(links.values()) + "\nYour code is 123456.\n"
    html = (
        "<h1 style='color:#123'>Hello</h1><p>"
        + "".join(f'<a href="{url}">{name}</a><br>' for name, url in links.items())
        + "</p><script>document.title='ran'</script>"
        + "<img alt='' src='https://tracker.example/pixel.gif'>"
    )
    send(port, email(f"ann+{scope}@inbox.test", subject="Your links", text=text, html=html))
