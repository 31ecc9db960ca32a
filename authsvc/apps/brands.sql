-- load_brand --
-- An app's brand as its own accounts' emails and pages show it (NULL fields:
-- the service's own). A revoked app brands nothing any more.
SELECT product_name, logo_url, brand_color, support_url, default_locale, mail_from
FROM apps WHERE id = %(app_id)s AND revoked_at IS NULL;

-- update_brand --
-- Set the brand fields the caller gave (set_x), keep the others; a revoked app
-- changes nothing (no row returned).
UPDATE apps SET
    product_name = CASE WHEN %(set_product_name)s THEN %(product_name)s ELSE product_name END,
    logo_url = CASE WHEN %(set_logo_url)s THEN %(logo_url)s ELSE logo_url END,
    brand_color = CASE WHEN %(set_brand_color)s THEN %(brand_color)s ELSE brand_color END,
    support_url = CASE WHEN %(set_support_url)s THEN %(support_url)s ELSE support_url END,
    default_locale = CASE WHEN %(set_default_locale)s THEN %(default_locale)s
                          ELSE default_locale END,
    mail_from = CASE WHEN %(set_mail_from)s THEN %(mail_from)s ELSE mail_from END
WHERE id = %(app_id)s AND revoked_at IS NULL
RETURNING id;
