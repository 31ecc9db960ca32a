"""The brand a page shows (SPEC §14): a link's app, from its signed token only, else the service's.

A link's token may carry the app whose brand the pages it opens show; no
query parameter, cookie or form field can name one. The brand's fields are
checked again here, whatever wrote them: the logo is shown only from an
https URL whose origin can be named in the CSP, the colour only as `#rrggbb`.
Its product name is plain text, escaped like everything else, shown without
the direction controls it may be stored with, and isolated (`<bdi>`,
U+2068…U+2069 in the title) so that nothing in it reorders the words around it.
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from flask import Blueprint, Response, g

from authsvc.accounts.tokens import TokenError
from authsvc.apps.brands import (
    BRAND_COLOR,
    Brand,
    load_brand,
    service_brand,
    shown_product_name,
)
from authsvc.web.pages.language import adopt_brand_default
from authsvc.web.plumbing import content_security_policy, db, services

# An origin the CSP can name as it is: a DNS name or IPv4 address and a port.
_HOST = re.compile(r"[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?")
_URL_UNSAFE = re.compile(r"[\s\x00-\x1f\x7f\"'<>\\`]")


@dataclass(frozen=True)
class PageBrand:
    """What the frame of a page shows: checked, ready to render."""

    product_name: str
    logo_url: str | None = None
    logo_origin: str | None = None
    colour_rule: str | None = None  # ":root{--brand:#rrggbb}", for a hashed <style>
    support_url: str | None = None
    from_app: bool = False


def _logo(url: str | None) -> tuple[str, str] | None:
    """The logo URL and its origin, if it is https and its origin is plain; else None."""
    if not url or _URL_UNSAFE.search(url):
        return None
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        return None
    host = parts.hostname or ""
    if parts.scheme != "https" or parts.username or parts.password or not _HOST.fullmatch(host):
        return None
    return url, f"https://{host}" + (f":{port}" if port else "")


def _support(url: str | None) -> str | None:
    if not url or _URL_UNSAFE.search(url) or urlsplit(url).scheme not in ("https", "http"):
        return None
    return url


def page_brand_of(brand: Brand) -> PageBrand:
    logo = _logo(brand.logo_url)
    colour = brand.brand_color if BRAND_COLOR.fullmatch(brand.brand_color or "") else None
    return PageBrand(
        product_name=shown_product_name(brand.product_name),
        logo_url=logo[0] if logo else None,
        logo_origin=logo[1] if logo else None,
        colour_rule=f":root{{--brand:{colour.lower()}}}" if colour else None,
        support_url=_support(brand.support_url),
        from_app=brand.app_id is not None,
    )


def brand_link_page(token: object, purpose: str) -> None:
    """A link's page shows the brand its token names (expired or not: the token is signed).

    A token that does not verify, or names no app, or an app that is gone
    or revoked: the service's own brand.
    """
    svc = services()
    try:
        claims = svc.tokens.read(token, purpose, check_expiry=False)
    except TokenError:
        return
    if claims.brand_app_id is None:
        return
    brand = load_brand(db(), claims.brand_app_id, svc.settings.product_name)
    if brand.app_id is None:
        return
    g.page_brand = page_brand_of(brand)
    adopt_brand_default(brand.default_locale)


def page_brand() -> PageBrand:
    """This request's brand: the link's app's, else the service's (AUTHSVC_PRODUCT_NAME)."""
    brand: PageBrand | None = g.get("page_brand")
    if brand is None:
        return page_brand_of(service_brand(services().settings.product_name))
    return brand


def _style_hash(rule: str) -> str:
    digest = hashlib.sha256(rule.encode()).digest()
    return f"'sha256-{base64.b64encode(digest).decode()}'"


def _branded_policy(response: Response) -> Response:
    """A branded page's CSP: its logo's origin for images, its colour rule's hash for styles."""
    brand: PageBrand | None = g.get("page_brand")
    if brand is not None and (brand.logo_origin or brand.colour_rule):
        response.headers["Content-Security-Policy"] = content_security_policy(
            img_sources=(brand.logo_origin,) if brand.logo_origin else (),
            style_sources=(_style_hash(brand.colour_rule),) if brand.colour_rule else (),
        )
    return response


def install(bp: Blueprint) -> None:
    bp.after_request(_branded_policy)
