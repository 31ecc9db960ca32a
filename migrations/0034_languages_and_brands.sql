-- Languages and brands (SPEC §14).
--
-- An app's brand: what its own accounts' emails and pages show. Set by the app
-- (PATCH /api/v1/app) or an operator; mail_from by operators only. NULL means
-- "the service's own" for each field.
ALTER TABLE apps
    ADD COLUMN product_name   text,
    ADD COLUMN logo_url       text,
    ADD COLUMN brand_color    text,
    ADD COLUMN support_url    text,
    ADD COLUMN default_locale text,
    ADD COLUMN mail_from      text,
    ADD CONSTRAINT apps_product_name_length
        CHECK (product_name IS NULL OR length(product_name) BETWEEN 1 AND 64),
    ADD CONSTRAINT apps_logo_url_https
        CHECK (logo_url IS NULL OR (logo_url LIKE 'https://%' AND length(logo_url) <= 2048)),
    ADD CONSTRAINT apps_brand_color_hex CHECK (brand_color IS NULL OR brand_color ~ '^#[0-9a-f]{6}$'),
    ADD CONSTRAINT apps_support_url_http
        CHECK (support_url IS NULL OR (support_url ~ '^https?://' AND length(support_url) <= 2048)),
    ADD CONSTRAINT apps_default_locale_length
        CHECK (default_locale IS NULL OR length(default_locale) BETWEEN 2 AND 35),
    ADD CONSTRAINT apps_mail_from_length CHECK (mail_from IS NULL OR length(mail_from) <= 320);

-- The locale of the account's signup, then of the latest link it redeemed; a
-- request alone never changes it.
ALTER TABLE users
    ADD COLUMN locale text,
    ADD CONSTRAINT users_locale_length CHECK (locale IS NULL OR length(locale) BETWEEN 2 AND 35);

-- An app's own templates for the emails that ask the person to act. Checked
-- (sandbox, size, link and code present) before they are stored.
CREATE TABLE app_templates (
    app_id     uuid NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    kind       text NOT NULL,
    locale     text NOT NULL,
    subject    text NOT NULL,
    text_body  text NOT NULL,
    html_body  text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (app_id, kind, locale),
    CONSTRAINT app_templates_kind
        CHECK (kind IN ('verify', 'reset', 'sign_in', 'email_change', 'account_delete')),
    CONSTRAINT app_templates_locale_length CHECK (length(locale) BETWEEN 2 AND 35),
    CONSTRAINT app_templates_size
        CHECK (octet_length(subject) + octet_length(text_body) + octet_length(html_body) <= 65536)
);
