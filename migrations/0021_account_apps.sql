-- Whose account is it (SPEC §14 "Whose account")? An account belongs to the
-- app it signed up through and to every app through which it completed a
-- flow. An app's redirect_url takes effect only for its own accounts: any
-- app key could otherwise ask a reset for another app's (or the pages')
-- account with its own redirect, and the holder would get a genuine email
-- whose link and code page are on that app's site.
--
-- Rows are written in the transaction that earns them: the signup that
-- created the account (accounts.sign_up). A flow credits an app only when
-- the email redeemed was queued while the account was already that app's
-- (the job's payload says so: "own_account"), so completing a flow never
-- makes an app a member; it decides at the address's first proof whether
-- the signup's app keeps the account. That row is provisional: it counts
-- only while the address is unproven and uncontested (one signup, no
-- resend), and the first proof keeps it only when the proving email was
-- that app's own; a link that another caller's signup, resend or reset sent
-- (superseding the app's) proves the address for nobody's app. So an app
-- can neither claim an address by signing it up before its holder arrives
-- nor take an account by superseding the real app's email.
CREATE TABLE account_apps (
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    app_id  uuid NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    since   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, app_id)
);

-- The one rule every request that takes a redirect_url asks (authsvc/sql/
-- account_apps.sql for signups, outbox/producer.sql queue_link for link
-- requests): a member's row counts for a proven address, and for an unproven
-- one only while it is uncontested. Plain SQL, so the planner inlines it.
CREATE FUNCTION account_belongs_to_app(account bigint, app uuid) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
RETURN EXISTS (
    SELECT 1 FROM account_apps AS m JOIN users AS u ON u.id = m.user_id
    WHERE m.user_id = account AND m.app_id = app
      AND (u.email_verified_at IS NOT NULL OR u.signup_count = 1)
);

-- Existing accounts, from what the outbox still holds. Nothing else recorded
-- which app an account came through, and a wrong row would hand an account's
-- links to an app, so only evidence counts, and only what the rule above
-- would have left standing. Before 0021 any app's redirect applied to any
-- account, so a redeemed email of an app proves nothing by itself (it may
-- be a steered reset); the only app an account can get is the app of its
-- creating signup (verify version 1 is that signup's email, register_signup):
-- * unproven and uncontested (signup_count = 1): that app;
-- * proven: that app, if the account's first redemption was of an email
--   that app's call queued before any other caller (another app, or the
--   pages) had a verify email sent to the address: the first proof was
--   through the app while the account was still its own.
-- Jobs pruned by `authsvc outbox prune` are gone, so some accounts start with
-- fewer apps than they had: their emails use authsvc's own pages (the safe
-- side).
WITH signup AS (
    SELECT DISTINCT ON (j.user_id) j.user_id, j.app_id
    FROM email_jobs AS j
    WHERE j.kind = 'email' AND j.purpose = 'verify' AND j.token_version = 1
    ORDER BY j.user_id, j.id
), first_proof AS (
    SELECT DISTINCT ON (r.user_id) r.user_id, j.id AS job_id, j.app_id
    FROM token_redemptions AS r
    LEFT JOIN email_jobs AS j
      ON j.user_id = r.user_id AND j.purpose = r.purpose AND j.token_version = r.version
     AND j.kind = 'email'
    ORDER BY r.user_id, r.redeemed_at, j.id DESC
)
INSERT INTO account_apps (user_id, app_id, since)
SELECT u.id, s.app_id, u.created_at
FROM users AS u
JOIN signup AS s ON s.user_id = u.id
LEFT JOIN first_proof AS p ON p.user_id = u.id
WHERE s.app_id IS NOT NULL
  AND CASE WHEN u.email_verified_at IS NULL THEN u.signup_count = 1
           ELSE p.app_id = s.app_id
                AND NOT EXISTS (
                    SELECT 1 FROM email_jobs AS other
                    WHERE other.user_id = u.id AND other.kind = 'email'
                      AND other.purpose = 'verify' AND other.id < p.job_id
                      AND other.app_id IS DISTINCT FROM s.app_id)
      END
ON CONFLICT DO NOTHING;

-- Links an unproven account's own app sent that are still current: their
-- redemption is the app's flow (what queue_link and sign_up now record).
UPDATE email_jobs AS j
SET payload = j.payload || '{"own_account": true}'
FROM users AS u
WHERE u.id = j.user_id AND j.kind = 'email' AND j.app_id IS NOT NULL
  AND u.email_verified_at IS NULL
  AND j.token_version = CASE j.purpose WHEN 'reset' THEN u.reset_version
                                       WHEN 'verify' THEN u.verify_version END
  AND account_belongs_to_app(j.user_id, j.app_id);

-- Emails that may still go (waiting, or failed and open to `authsvc outbox
-- redrive`): a redirect an app asked for an account that is not its own is
-- dropped, so the email opens authsvc's pages, and each names the app that
-- asked (the worker reads app_name, as it does for new jobs). A job whose
-- earlier attempt reached an HTTP provider ambiguously now has a different
-- body under the same idempotency key; the provider may refuse it and the
-- job fails, which is better than sending the other app's link.
UPDATE email_jobs AS j
SET payload = CASE WHEN account_belongs_to_app(j.user_id, j.app_id)
                   THEN j.payload ELSE j.payload - 'redirect_url' END
              || jsonb_build_object('app_name', a.name)
FROM apps AS a
WHERE a.id = j.app_id AND j.kind = 'email' AND j.status IN ('pending', 'failed')
  AND j.template IN ('verify', 'reset', 'account_exists', 'password_changed');
