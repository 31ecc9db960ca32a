-- The old address approves an address change (AUTHSVC_EMAIL_CHANGE_CONFIRM_OLD,
-- SPEC §12): a fourth purpose on the same engine, email_change_approval, sent
-- to the account's address with a link and a code. It shares the change's
-- version (one pending change, two links): a later request or a password
-- change retires both, and confirming the change retires both.

CREATE OR REPLACE FUNCTION link_version(account users, purpose text) RETURNS integer
LANGUAGE sql STABLE PARALLEL SAFE
RETURN CASE purpose
    WHEN 'reset' THEN account.reset_version
    WHEN 'verify' THEN account.verify_version
    WHEN 'email_change' THEN account.email_change_version
    WHEN 'email_change_approval' THEN account.email_change_version
    WHEN 'account_delete' THEN account.account_delete_version
END;

ALTER TABLE token_redemptions DROP CONSTRAINT IF EXISTS token_redemptions_purpose_check;
ALTER TABLE token_redemptions ADD CONSTRAINT token_redemptions_purpose_check
    CHECK (purpose IN ('reset', 'verify', 'email_change', 'email_change_approval',
                       'account_delete'));
ALTER TABLE code_attempts DROP CONSTRAINT IF EXISTS code_attempts_purpose_check;
ALTER TABLE code_attempts ADD CONSTRAINT code_attempts_purpose_check
    CHECK (purpose IN ('reset', 'verify', 'email_change', 'email_change_approval',
                       'account_delete'));

-- NOT VALID, then validated after a commit, as in 0027: the scan of a big
-- outbox does not stop the workers.
ALTER TABLE email_jobs DROP CONSTRAINT IF EXISTS email_jobs_purpose_check;
ALTER TABLE email_jobs ADD CONSTRAINT email_jobs_purpose_check
    CHECK (purpose IN ('reset', 'verify', 'email_change', 'email_change_approval',
                       'email_revert', 'account_delete'))
    NOT VALID;
ALTER TABLE email_jobs DROP CONSTRAINT IF EXISTS email_jobs_template_check;
ALTER TABLE email_jobs ADD CONSTRAINT email_jobs_template_check CHECK (
    (kind = 'email' AND template IN (
        'verify', 'reset', 'account_exists', 'password_changed',
        'email_change',           -- the change link and code, to the new address
        'email_change_approval',  -- the approval link and code, to the old address
        'email_in_use',           -- to a confirmed holder of the asked-for address
        'email_changed',          -- to the old address: the undo link
        'email_restored',         -- to the address an undo moved the account back from
        'account_delete'          -- the deletion link and code
    ))
    OR (kind = 'webhook' AND app_id IS NOT NULL
        AND template IN ('user.verified', 'user.password_changed',
                         'email.delivered', 'email.failed',
                         'user.email_changed', 'user.email_restored', 'user.deleted'))
) NOT VALID;
-- migrate: commit
ALTER TABLE email_jobs VALIDATE CONSTRAINT email_jobs_purpose_check;
ALTER TABLE email_jobs VALIDATE CONSTRAINT email_jobs_template_check;
