"""Which webhook URLs authsvc may call: the checks shared by `apps` and the worker.

A webhook URL is chosen by whoever registers the app, so the worker calling it
is a server-side request on their behalf. In production the URL must be
https and every address its host resolves to must be public (no private,
loopback, link-local, shared, reserved or multicast ranges, also not hidden
in an IPv4-mapped IPv6 address). The worker resolves once, checks every
address, and connects to a checked address itself (authsvc/worker/event_delivery.py), so a
DNS answer that changes between the check and the connection (rebinding)
cannot redirect it. Outside production plain http and loopback are allowed,
which is what tests and `authsvc dev` use.
"""

from __future__ import annotations

import ipaddress
import socket
import unicodedata
from dataclasses import dataclass
from urllib.parse import urlsplit

MAX_WEBHOOK_URL_LENGTH = 2048
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
# Global unicast: everything else (IPv4-compatible, translated, local-use NAT64,
# site-local forms) can reach a private IPv4 address or a local network.
_GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")


class WebhookTargetRefused(ValueError):
    """The URL or an address it resolves to may not be called."""


@dataclass(frozen=True)
class WebhookTarget:
    """A parsed webhook URL: what to connect to and what to ask for."""

    scheme: str
    host: str
    port: int
    path_and_query: str

    @property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"


def parse_webhook_url(url: str, *, production: bool) -> WebhookTarget:
    """The URL's parts when its form is acceptable; WebhookTargetRefused otherwise."""
    if (
        len(url) > MAX_WEBHOOK_URL_LENGTH
        or "\\" in url
        or any(unicodedata.category(c)[0] in {"C", "Z"} for c in url)
    ):
        raise WebhookTargetRefused(f"not a usable webhook URL: {url!r}")
    if not url.isascii():
        # The request line and Host go out in ASCII (http.client would raise instead).
        raise WebhookTargetRefused(
            f"webhook URLs must be ASCII: write the host in punycode (xn--…) and "
            f"percent-encode the path and query: {url!r}"
        )
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise WebhookTargetRefused(f"not a usable webhook URL: {url!r}") from None
    if parts.scheme not in {"http", "https"} or not parts.hostname or port == 0:
        raise WebhookTargetRefused(f"webhook URLs must be absolute http(s) URLs: {url!r}")
    if production and parts.scheme != "https":
        raise WebhookTargetRefused(f"webhook URLs must use https in production: {url!r}")
    if parts.username or parts.password or parts.fragment:
        raise WebhookTargetRefused(
            f"webhook URLs may not carry credentials or a fragment: {url!r}"
        )
    path = parts.path or "/"
    return WebhookTarget(
        scheme=parts.scheme,
        host=parts.hostname,
        port=port or (443 if parts.scheme == "https" else 80),
        path_and_query=path + (f"?{parts.query}" if parts.query else ""),
    )


def is_public_address(address: IPAddress) -> bool:
    """True for globally routable unicast addresses only."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour
        if embedded is not None:
            return is_public_address(embedded)
        if address.teredo is not None:
            return False
        if address in _NAT64:  # a translator would carry it to the embedded IPv4 address
            return is_public_address(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
        if address not in _GLOBAL_UNICAST:
            return False
    return address.is_global and not address.is_multicast


def resolve_addresses(target: WebhookTarget, *, production: bool) -> list[IPAddress]:
    """Every address the host resolves to, each checked; WebhookTargetRefused otherwise.

    One non-public answer refuses the whole name: a resolver controlled by an
    attacker could otherwise mix a public address with an internal one.
    """
    try:
        infos = socket.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise WebhookTargetRefused(f"cannot resolve {target.host!r}: {exc}") from None
    addresses: list[IPAddress] = []
    for info in infos:
        # Drop an IPv6 scope ("fe80::1%eth0"): link-local is refused anyway.
        address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise WebhookTargetRefused(f"{target.host!r} resolves to no address")
    if production:
        private = [str(a) for a in addresses if not is_public_address(a)]
        if private:
            raise WebhookTargetRefused(
                f"{target.host!r} resolves to a non-public address ({', '.join(private)});"
                " refused in production"
            )
    return addresses


def validate_webhook_url(url: str, *, production: bool) -> str:
    """`url` if authsvc may call it (in production: https, public addresses only)."""
    target = parse_webhook_url(url, production=production)
    if production:
        resolve_addresses(target, production=True)
    return url
