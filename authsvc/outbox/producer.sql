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
-- as for a known one. Purposes: verify, reset and sign_in (SPEC §13; like
-- reset, for any account). An unknown address gets, within the budget, a
-- sign-in link when %(sign_up)s (the app signs up by email: a placeholder
-- account is inserted for the link to name, migrations/0031, and is the
-- app's own), else the "no account uses this address" note when
-- %(notify_unknown)s (AUTHSVC_NOTIFY_UNKNOWN_ADDRESSES), else nothing.
-- Returns whether the budget allowed the request and the job id (NULL when
-- nothing was queued).
WITH budget AS (
    SELECT email_budget_hit(%(bucket)s, %(window_start)s, %(limit)s, %(purpose)s, %(digest)s)
           AS allowed
), found AS (
    -- Whose account the request finds (account_belongs_to_app),
    -- as of this statement's snapshot: so a resend by the account's own
    -- uncontested app is judged before it makes the address contested.
    SELECT id, reset_version, verify_version, sign_in_version,
           account_belongs_to_app(id, %(app_id)s::uuid) AS own
    FROM users WHERE email = %(email)s
), placeholder AS (
    -- One signup, no password, its first sign-in link. A signup committed
    -- meanwhile wins the address (DO NOTHING): its own emails are then the
    -- only ones, and this request sends nothing, like any request that
    -- loses a race with a newer one.
    INSERT INTO users (email, password_hash, verify_version, signup_count, sign_in_version)
    SELECT %(email)s, '', 0, 1, 1
    WHERE %(sign_up)s AND %(purpose)s = 'sign_in' AND (SELECT allowed FROM budget)
      AND NOT EXISTS (SELECT 1 FROM found)
    ON CONFLICT (email) DO NOTHING
    RETURNING id, email, sign_in_version AS version
), member AS (
    INSERT INTO account_apps (user_id, app_id, since)
    SELECT id, %(app_id)s::uuid, %(issued_at)s FROM placeholder
    RETURNING user_id
), bumped AS (
    UPDATE users
    SET reset_version = reset_version + (%(purpose)s = 'reset')::int,
        verify_version = verify_version + (%(purpose)s = 'verify')::int,
        sign_in_version = sign_in_version + (%(purpose)s = 'sign_in')::int,
        -- Anyone can ask for a resend, so its link proves the mailbox but
        -- not who chose the stored password: confirming it must choose one.
        signup_count = CASE WHEN %(purpose)s = 'verify' THEN greatest(signup_count, 2)
                            ELSE signup_count END
    WHERE email = %(email)s AND (%(purpose)s <> 'verify' OR email_verified_at IS NULL)
      AND (SELECT allowed FROM budget)
    RETURNING id, email, reset_version, verify_version, sign_in_version,
              CASE %(purpose)s WHEN 'reset' THEN reset_version
                               WHEN 'verify' THEN verify_version
                               ELSE sign_in_version END AS version
), judged AS (
    -- An app's redirect_url applies only to its own accounts (migrations/0026_baseline.sql):
    -- any other account's link opens authsvc's pages, and only an email of
    -- the app's own account is marked so ("own_account": redeeming it is a
    -- flow through the app). The snapshot's answer stands only if nothing
    -- but this UPDATE changed the row since (a concurrent signup, resend,
    -- redemption or password change bumps a version): else nobody's.
    SELECT b.id, b.email, b.version,
           coalesce(f.own AND b.reset_version = f.reset_version + (%(purpose)s = 'reset')::int
                    AND b.verify_version = f.verify_version + (%(purpose)s = 'verify')::int
                    AND b.sign_in_version = f.sign_in_version + (%(purpose)s = 'sign_in')::int,
                    false) AS own
    FROM bumped AS b LEFT JOIN found AS f ON f.id = b.id
    UNION ALL
    SELECT p.id, p.email, p.version, EXISTS (SELECT 1 FROM member) FROM placeholder AS p
), queued AS (
    INSERT INTO email_jobs (template, recipient, payload, user_id, purpose, token_version, issued_at,
                            app_id)
    SELECT %(purpose)s, email,
           CASE WHEN own THEN %(payload)s::jsonb || '{"own_account": true}'
                ELSE %(payload)s::jsonb - 'redirect_url' END,
           id, %(purpose)s, version, %(issued_at)s, %(app_id)s::uuid FROM judged
    UNION ALL
    SELECT 'no_account', %(email)s,
           (%(payload)s::jsonb - 'redirect_url') || jsonb_build_object('asked_for', %(purpose)s::text),
           NULL, NULL, NULL, NULL, %(app_id)s::uuid
    WHERE %(notify_unknown)s AND NOT %(sign_up)s AND %(purpose)s <> 'verify'
      AND (SELECT allowed FROM budget) AND NOT EXISTS (SELECT 1 FROM found)
    RETURNING id
)
SELECT b.allowed, q.id, CASE WHEN q.id IS NOT NULL THEN pg_notify(%(channel)s, '') END
FROM budget AS b LEFT JOIN queued AS q ON true;
