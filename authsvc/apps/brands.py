"""An app's brand (SPEC §14): the name, logo, colour and support link its accounts see.

The brand applies only to the app's own accounts (authsvc.apps.account_apps);
whoever renders an email or a page decides that, then asks here for the
brand, which is the service's own where the app set nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from uuid import UUID

from psycopg import Connection

from authsvc.db.queries import load_queries

Q = load_queries(Path(__file__).with_suffix(".sql"))


@dataclass(frozen=True)
class Brand:
    product_name: str
    logo_url: str | None = None
    brand_color: str | None = None
    support_url: str | None = None
    default_locale: str | None = None
    mail_from: str | None = None  # None: the service's AUTHSVC_MAIL_FROM
    app_id: UUID | None = None  # None: the service's own brand


def service_brand(product_name: str) -> Brand:
    """The brand of everything no app brands: `AUTHSVC_PRODUCT_NAME`, nothing else."""
    return Brand(product_name=product_name)


def load_brand(conn: Connection, app_id: UUID, service_product_name: str) -> Brand:
    """`app_id`'s brand, its unset fields the service's; the service's own if the app is gone."""
    row = conn.execute(Q["load_brand"], {"app_id": app_id}).fetchone()
    if row is None:
        return service_brand(service_product_name)
    product_name, logo_url, brand_color, support_url, default_locale, mail_from = row
    return Brand(product_name or service_product_name, logo_url, brand_color, support_url,
                 default_locale, mail_from, app_id)
