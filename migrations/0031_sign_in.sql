-- Sign in by email (SPEC §13): a fourth newest-only link purpose on the same
-- engine as verify and reset.
--
--   sign_in   sent to the account's address, with a code; a version per
--             account (users.sign_in_version), newest only, once. Redeeming
--             it proves the address: an unproven account is confirmed and
--             the password its signups set is discarded.
--
-- An app registered with --sign-up-by-email may have a sign-in link sent to
-- an address with no account: the request then inserts a *placeholder*, an
-- unproven account with no password ('' matches none) and one signup, so
-- that "newest only" holds for it as for any account and a signup with a
-- password meanwhile makes the address contested (users.sql register_signup
-- counts a second signup). Redeeming its link makes it a confirmed account.
--
-- The purpose lists below replace the earlier ones whole, so they name every
-- purpose and template so far: 0030's email_change_approval (the old
-- address's approval of a change, which shares the change's version) too.
--
-- The file commits part-way (below), and a run stopped there applies it
-- again from the top: so everything before that line can be repeated.
-- PostgreSQL 15 refuses the ADD COLUMN below while a function with a parsed body
-- (`RETURN …`, as 0027 and 0030 wrote link_version) takes users' row type; nothing
-- depends on link_version yet, so it goes and comes back below with a quoted body,
-- which the planner inlines all the same (tests/test_schema_file.py keeps it so).
DROP FUNCTION IF EXISTS link_version(users, text);

ALTER TABLE users ADD COLUMN IF NOT EXISTS sign_in_version integer NOT NULL DEFAULT 0;

-- `authsvc apps create/update --sign-up-by-email`: this app's sign-in
-- requests for an unknown address create the account (on redemption).
ALTER TABLE apps ADD COLUMN IF NOT EXISTS sign_up_by_email boolean NOT NULL DEFAULT false;

-- How a web session began: a password at /login, or a sign-in link or code.
-- An account with no password changes its address or deletes itself only
-- from a session a sign-in link started lately (SPEC §12 "Pages").
ALTER TABLE web_sessions
    ADD COLUMN IF NOT EXISTS started_by text NOT NULL DEFAULT 'password',
    DROP CONSTRAINT IF EXISTS web_sessions_started_by_check,
    ADD CONSTRAINT web_sessions_started_by_check CHECK (started_by IN ('password', 'sign_in'));

-- link_version (0027) knows the new purpose.
CREATE OR REPLACE FUNCTION link_version(account users, purpose text) RETURNS integer
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
SELECT CASE purpose
    WHEN 'reset' THEN account.reset_version
    WHEN 'verify' THEN account.verify_version
    WHEN 'email_change' THEN account.email_change_version
    WHEN 'email_change_approval' THEN account.email_change_version
    WHEN 'account_delete' THEN account.account_delete_version
    WHEN 'sign_in' THEN account.sign_in_version
END
$$;

ALTER TABLE token_redemptions DROP CONSTRAINT IF EXISTS token_redemptions_purpose_check;
ALTER TABLE token_redemptions ADD CONSTRAINT token_redemptions_purpose_check
    CHECK (purpose IN ('reset', 'verify', 'email_change', 'email_change_approval',
                       'account_delete', 'sign_in'));
ALTER TABLE code_attempts DROP CONSTRAINT IF EXISTS code_attempts_purpose_check;
ALTER TABLE code_attempts ADD CONSTRAINT code_attempts_purpose_check
    CHECK (purpose IN ('reset', 'verify', 'email_change', 'email_change_approval',
                       'account_delete', 'sign_in'));

-- The outbox's new emails. NOT VALID here and validated after a commit
-- (authsvc/db/migrate.py COMMIT_LINE), as in 0027.
ALTER TABLE email_jobs DROP CONSTRAINT IF EXISTS email_jobs_purpose_check;
ALTER TABLE email_jobs ADD CONSTRAINT email_jobs_purpose_check
    CHECK (purpose IN ('reset', 'verify', 'email_change', 'email_change_approval',
                       'email_revert', 'account_delete', 'sign_in'))
    NOT VALID;
ALTER TABLE email_jobs DROP CONSTRAINT IF EXISTS email_jobs_template_check;
ALTER TABLE email_jobs ADD CONSTRAINT email_jobs_template_check CHECK (
    (kind = 'email' AND template IN (
        'verify', 'reset', 'account_exists', 'password_changed',
        'email_change', 'email_change_approval', 'email_in_use', 'email_changed',
        'email_restored', 'account_delete',
        'sign_in',     -- the sign-in link and code
        'no_account'   -- AUTHSVC_NOTIFY_UNKNOWN_ADDRESSES: no account uses this address
    ))
    OR (kind = 'webhook' AND app_id IS NOT NULL
        AND template IN ('user.verified', 'user.password_changed',
                         'email.delivered', 'email.failed',
                         'user.email_changed', 'user.email_restored', 'user.deleted'))
) NOT VALID;
-- migrate: commit
ALTER TABLE email_jobs VALIDATE CONSTRAINT email_jobs_purpose_check;
ALTER TABLE email_jobs VALIDATE CONSTRAINT email_jobs_template_check;
