-- insert_app --
-- Register an embedding app with the hash of its API key.
INSERT INTO apps (name, key_hash, redirect_urls) VALUES (%(name)s, %(key_hash)s, %(redirect_urls)s)
RETURNING id, name, redirect_urls, sign_up_by_email;

-- find_app_by_key_hash --
-- The app an API key belongs to; a revoked app's key matches nothing.
SELECT id, name, redirect_urls, sign_up_by_email FROM apps WHERE key_hash = %(key_hash)s AND revoked_at IS NULL;

-- find_app_counting_call --
-- find_app_by_key_hash, and the call counted against the key's budget in the
-- same round trip (SQL rate_limit_hit()): only a live key's calls
-- count (the select list runs for matching rows only), and the count commits
-- without waiting for the disk (authsvc/ratelimit.py check_own_transaction).
SELECT id, name, redirect_urls, sign_up_by_email,
       rate_limit_hit(%(bucket)s, %(window_start)s, %(limit)s, false) AS within_budget
FROM apps WHERE key_hash = %(key_hash)s AND revoked_at IS NULL;

-- list_apps --
-- Every app, oldest first, for `authsvc apps list`.
SELECT id, name, redirect_urls, webhook_url, delivery_url, sign_up_by_email, created_at,
       revoked_at, product_name, logo_url, brand_color, support_url, default_locale, mail_from
FROM apps ORDER BY created_at, id;

-- find_app_listing --
-- One app as `apps list` shows it.
SELECT id, name, redirect_urls, webhook_url, delivery_url, sign_up_by_email, created_at,
       revoked_at, product_name, logo_url, brand_color, support_url, default_locale, mail_from
FROM apps WHERE id = %(app_id)s;

-- lock_app_names --
-- Serialises `apps create` so two at once cannot both take a name.
SELECT pg_advisory_xact_lock(hashtext('authsvc.apps.names'));

-- name_taken --
-- Is a live app already called this (case-insensitively)?
SELECT EXISTS (SELECT 1 FROM apps WHERE lower(name) = lower(%(name)s) AND revoked_at IS NULL);

-- update_redirect_urls --
UPDATE apps SET redirect_urls = %(redirect_urls)s WHERE id = %(app_id)s AND revoked_at IS NULL
RETURNING id;

-- set_sign_up_by_email --
-- Whether a live app's sign-in requests for an unknown address create the account (SPEC §13).
UPDATE apps SET sign_up_by_email = %(on)s WHERE id = %(app_id)s AND revoked_at IS NULL
RETURNING id;

-- set_webhook --
-- Point a live app's events at url; the sealed secret is only written when it has none.
UPDATE apps SET webhook_url = %(webhook_url)s,
                webhook_secret = coalesce(webhook_secret, %(webhook_secret)s)
WHERE id = %(app_id)s AND revoked_at IS NULL
RETURNING webhook_secret = %(webhook_secret)s AS secret_is_new;

-- set_delivery_url --
-- A live app delivers its own mail at url; the sealed secret is only written when it has none.
UPDATE apps SET delivery_url = %(delivery_url)s,
                webhook_secret = coalesce(webhook_secret, %(webhook_secret)s)
WHERE id = %(app_id)s AND revoked_at IS NULL
RETURNING webhook_secret = %(webhook_secret)s AS secret_is_new;

-- clear_delivery_url --
-- Its mail goes through authsvc's own transport again (jobs not yet sent too).
UPDATE apps SET delivery_url = NULL WHERE id = %(app_id)s AND revoked_at IS NULL RETURNING id;

-- replace_webhook_secret --
UPDATE apps SET webhook_secret = %(webhook_secret)s
WHERE id = %(app_id)s AND revoked_at IS NULL
  AND (webhook_url IS NOT NULL OR delivery_url IS NOT NULL)
RETURNING id;

-- clear_webhook --
UPDATE apps SET webhook_url = NULL WHERE id = %(app_id)s AND revoked_at IS NULL RETURNING id;

-- rotate_key --
-- The new hash replaces the old at commit: the old key matches nothing from then on.
UPDATE apps SET key_hash = %(key_hash)s WHERE id = %(app_id)s AND revoked_at IS NULL RETURNING id;

-- revoke_app --
UPDATE apps SET revoked_at = now() WHERE id = %(app_id)s AND revoked_at IS NULL RETURNING id;
