-- load_brand --
-- An app's brand as its own accounts' emails and pages show it (NULL fields:
-- the service's own). A revoked app brands nothing any more.
SELECT product_name, logo_url, brand_color, support_url, default_locale, mail_from
FROM apps WHERE id = %(app_id)s AND revoked_at IS NULL;
