-- insert_job --
-- Queue one email; called inside the transaction that made it necessary.
INSERT INTO email_jobs (template, recipient, payload, user_id, purpose, token_version, issued_at,
                        app_id)
VALUES (%(template)s, %(recipient)s, %(payload)s, %(user_id)s, %(purpose)s,
        %(token_version)s, %(issued_at)s, %(app_id)s)
RETURNING id;

-- notify_workers --
-- Wake idle workers; PostgreSQL delivers it only if the transaction commits.
SELECT pg_notify(%(channel)s, '');

-- queue_link --
-- A link request in one statement, so one commit whether or not the address
-- has an account (a second commit would wait for a second WAL flush, and a
-- prober could time it). The address's email budget is counted for every
-- request, and within it the address gets fresh code tries (email_budget_hit,
-- migrations/0026_baseline.sql, which signups call too); its outstanding links of the
-- purpose are retired as the email with the new one is queued; that part matches
-- nothing when the address has no account (or, for verify, is already
-- verified), so a request for an unknown address runs the same statement
-- as for a known one. Returns whether the budget allowed the request and
-- the job id (NULL when nothing was queued).
WITH budget AS (
    SELECT email_budget_hit(%(bucket)s, %(window_start)s, %(limit)s, %(purpose)s, %(digest)s)
           AS allowed
), found AS (
    -- Whose account the request finds (account_belongs_to_app),
    -- as of this statement's snapshot: so a resend by the account's own
    -- uncontested app is judged before it makes the address contested.
    SELECT id, reset_version, verify_version,
           account_belongs_to_app(id, %(app_id)s::uuid) AS own
    FROM users WHERE email = %(email)s
), bumped AS (
    UPDATE users
    SET reset_version = reset_version + (%(purpose)s = 'reset')::int,
        verify_version = verify_version + (%(purpose)s = 'verify')::int,
        -- Anyone can ask for a resend, so its link proves the mailbox but
        -- not who chose the stored password: confirming it must choose one.
        signup_count = CASE WHEN %(purpose)s = 'verify' THEN greatest(signup_count, 2)
                            ELSE signup_count END
    WHERE email = %(email)s AND (%(purpose)s = 'reset' OR email_verified_at IS NULL)
      AND (SELECT allowed FROM budget)
    RETURNING id, email, reset_version, verify_version,
              CASE WHEN %(purpose)s = 'reset' THEN reset_version ELSE verify_version END AS version
), judged AS (
    -- An app's redirect_url applies only to its own accounts (migrations/0026_baseline.sql):
    -- any other account's link opens authsvc's pages, and only an email of
    -- the app's own account is marked so ("own_account": redeeming it is a
    -- flow through the app). The snapshot's answer stands only if nothing
    -- but this UPDATE changed the row since (a concurrent signup, resend,
    -- redemption or password change bumps a version): else nobody's.
    SELECT b.id, b.email, b.version,
           coalesce(f.own AND b.reset_version = f.reset_version + (%(purpose)s = 'reset')::int
                    AND b.verify_version = f.verify_version + (%(purpose)s = 'verify')::int,
                    false) AS own
    FROM bumped AS b LEFT JOIN found AS f ON f.id = b.id
), queued AS (
    INSERT INTO email_jobs (template, recipient, payload, user_id, purpose, token_version, issued_at,
                            app_id)
    SELECT %(purpose)s, email,
           CASE WHEN own THEN %(payload)s::jsonb || '{"own_account": true}'
                ELSE %(payload)s::jsonb - 'redirect_url' END,
           id, %(purpose)s, version, %(issued_at)s, %(app_id)s::uuid FROM judged
    RETURNING id
)
SELECT b.allowed, q.id, CASE WHEN q.id IS NOT NULL THEN pg_notify(%(channel)s, '') END
FROM budget AS b LEFT JOIN queued AS q ON true;
