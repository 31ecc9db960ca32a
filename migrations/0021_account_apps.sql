-- Whose account is it (SPEC §14 "Whose account")? An account belongs to the
-- app it signed up through and to every app through which it completed a
-- flow. An app's redirect_url takes effect only for its own accounts: any
-- app key could otherwise ask a reset for another app's (or the pages')
-- account with its own redirect, and the holder would get a genuine email
-- whose link and code page are on that app's site.
--
-- Rows are written in the transaction that earns them: the signup that
-- created the account (accounts.sign_up) and the redemption of a link or
-- code an app's call sent (accounts._redeem_verify, _redeem_reset). A
-- signup's row is provisional until the address is proven: the first proof
-- keeps only the app whose flow proved it, so an app cannot claim an address
-- by signing it up before its holder arrives.
CREATE TABLE account_apps (
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    app_id  uuid NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    since   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, app_id)
);

-- The one rule every request that takes a redirect_url asks (authsvc/sql/
-- account_apps.sql for signups, outbox/producer.sql queue_link for link
-- requests). Plain SQL, so the planner inlines it as a primary-key probe.
CREATE FUNCTION account_belongs_to_app(account bigint, app uuid) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
RETURN EXISTS (SELECT 1 FROM account_apps AS m WHERE m.user_id = account AND m.app_id = app);

-- Existing accounts, from what the outbox still holds. Nothing else recorded
-- which app an account came through, and a wrong row would hand an account's
-- links to an app, so only evidence counts:
-- * a completed flow: a redeemed link version (token_redemptions) whose email
--   an app's call queued, exactly as events.sql flow_app finds the app that
--   hears user.* events;
-- * a signup, for accounts nobody has proven yet: verify version 1 is the
--   email of the signup that created the row (register_signup), and its
--   app_id is the app it came through. A proven account keeps only the apps
--   of its completed flows, as the new rule's first proof would have left it.
-- Jobs pruned by `authsvc outbox prune` are gone, so some accounts start with
-- fewer apps than they earned: their emails use authsvc's own pages (the safe
-- side) until they complete a flow through the app again.
INSERT INTO account_apps (user_id, app_id, since)
SELECT r.user_id, j.app_id, min(r.redeemed_at)
FROM token_redemptions AS r
JOIN email_jobs AS j
  ON j.user_id = r.user_id AND j.purpose = r.purpose AND j.token_version = r.version
WHERE j.kind = 'email' AND j.app_id IS NOT NULL
GROUP BY r.user_id, j.app_id
UNION
SELECT u.id, j.app_id, u.created_at
FROM users AS u
JOIN email_jobs AS j
  ON j.user_id = u.id AND j.purpose = 'verify' AND j.token_version = 1
WHERE u.email_verified_at IS NULL AND j.kind = 'email' AND j.app_id IS NOT NULL
ON CONFLICT DO NOTHING;

-- Emails still waiting to go: a redirect an app asked for an account that is
-- not its own is dropped, so the email opens authsvc's pages, and each names
-- the app that asked (the worker reads app_name, as it does for new jobs).
-- A job whose earlier attempt reached an HTTP provider ambiguously now has a
-- different body under the same idempotency key; the provider may refuse it
-- and the job fails, which is better than sending the other app's link.
UPDATE email_jobs AS j
SET payload = CASE WHEN account_belongs_to_app(j.user_id, j.app_id)
                   THEN j.payload ELSE j.payload - 'redirect_url' END
              || jsonb_build_object('app_name', a.name)
FROM apps AS a
WHERE a.id = j.app_id AND j.kind = 'email' AND j.status = 'pending'
  AND j.template IN ('verify', 'reset', 'account_exists');
