-- An address over its life (SPEC §12): change it, undo a change, delete the
-- account. Three link purposes on the same engine as verify and reset:
--
--   email_change    sent to the new address, with a code; a version per
--                   account, newest only, once (users.email_change_version)
--   account_delete  sent to the account's address (or, while an undo link
--                   lives, to the oldest address holding one), with a code;
--                   users.account_delete_version
--   email_revert    the undo link, sent to the old address when a change is
--                   confirmed; no code. Not "newest only": each confirmed
--                   change is a row of email_changes, and its undo link
--                   (version = the row's version) works while the row stands
--
-- The file commits part-way (below), and a run stopped there applies it
-- again from the top: so everything before that line can be repeated.
--
-- A version column added with a constant default is instant: no rewrite.
ALTER TABLE users
    ADD COLUMN IF NOT EXISTS email_change_version   integer NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS account_delete_version integer NOT NULL DEFAULT 0,
    -- Changes confirmed so far: the newest email_changes row's version.
    ADD COLUMN IF NOT EXISTS email_revert_version   integer NOT NULL DEFAULT 0,
    -- The new address of a change asked for and not yet confirmed (one at a
    -- time: a later request replaces it, a password change clears it).
    ADD COLUMN IF NOT EXISTS pending_email          text,
    DROP CONSTRAINT IF EXISTS users_pending_email_normalised,
    ADD CONSTRAINT users_pending_email_normalised
        CHECK (pending_email = lower(btrim(pending_email))
               AND length(pending_email) BETWEEN 3 AND 254);

-- A typed change code is looked up by the address it was sent to.
CREATE INDEX IF NOT EXISTS users_pending_email ON users (pending_email) WHERE pending_email IS NOT NULL;

-- One row per confirmed change: what its undo link restores. The row stands
-- (ended_at NULL) until its link is used ('undone') or an undo to an older
-- address ends it with every later change ('voided'); the link's own
-- lifetime (AUTHSVC_EMAIL_REVERT_TTL from changed_at, its issued_at) is the
-- token's to check. Later changes and password resets leave it alone: they
-- are what a thief would do first.
CREATE TABLE IF NOT EXISTS email_changes (
    user_id    bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    version    integer NOT NULL,
    old_email  text NOT NULL,
    new_email  text NOT NULL,
    changed_at timestamptz NOT NULL,
    ended_at   timestamptz,
    ended_by   text CHECK (ended_by IN ('undone', 'voided')),
    PRIMARY KEY (user_id, version),
    CONSTRAINT email_changes_ended CHECK ((ended_at IS NULL) = (ended_by IS NULL))
);
-- A deletion code typed with the old address finds the account through it.
CREATE INDEX IF NOT EXISTS email_changes_standing_old_email ON email_changes (old_email)
    WHERE ended_at IS NULL;

-- Deleted accounts, by a keyed digest of the address (HMAC-SHA256 under a key
-- derived from AUTHSVC_SECRET_KEYS, authsvc/accounts/deletion.py): an
-- operator holding the address and the keys can tell it was deleted; a
-- database dump cannot be turned back into addresses with a dictionary. The
-- outbox rows and trails the account leaves hold the same digest.
CREATE TABLE IF NOT EXISTS deleted_accounts (
    user_id        bigint NOT NULL PRIMARY KEY,
    address_digest text NOT NULL,
    deleted_at     timestamptz NOT NULL,
    -- owner: confirmed from the mailbox; operator: `authsvc users delete`;
    -- retired: an unconfirmed account whose address someone else proved.
    deleted_by     text NOT NULL CHECK (deleted_by IN ('owner', 'operator', 'retired'))
);
CREATE INDEX IF NOT EXISTS deleted_accounts_digest ON deleted_accounts (address_digest);

-- `body` with every mention of each address replaced by its stand-in, ignoring
-- case (a mail server's error may spell an address its own way). ***= makes
-- the address a literal, whatever characters it holds.
CREATE OR REPLACE FUNCTION redact_addresses(body text, addresses text[], stand_ins text[])
RETURNS text LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    FOR i IN 1 .. coalesce(array_length(addresses, 1), 0) LOOP
        body := regexp_replace(body, '***=' || addresses[i], stand_ins[i], 'gi');
    END LOOP;
    RETURN body;
END $$;

-- Which column holds an account's current version of a purpose: the one
-- place that says it, for the claim's supersede check and the code lookup.
-- email_revert has no single current version (see email_changes). Plain
-- SQL, so the planner inlines it.
CREATE OR REPLACE FUNCTION link_version(account users, purpose text) RETURNS integer
LANGUAGE sql STABLE PARALLEL SAFE
RETURN CASE purpose
    WHEN 'reset' THEN account.reset_version
    WHEN 'verify' THEN account.verify_version
    WHEN 'email_change' THEN account.email_change_version
    WHEN 'account_delete' THEN account.account_delete_version
END;

ALTER TABLE token_redemptions DROP CONSTRAINT IF EXISTS token_redemptions_purpose_check;
ALTER TABLE token_redemptions ADD CONSTRAINT token_redemptions_purpose_check
    CHECK (purpose IN ('reset', 'verify', 'email_change', 'account_delete'));
ALTER TABLE code_attempts DROP CONSTRAINT IF EXISTS code_attempts_purpose_check;
ALTER TABLE code_attempts ADD CONSTRAINT code_attempts_purpose_check
    CHECK (purpose IN ('reset', 'verify', 'email_change', 'account_delete'));

-- The outbox's new emails and events. NOT VALID here and validated after a
-- commit (authsvc/db/migrate.py COMMIT_LINE): the scan of a big outbox then
-- does not stop the workers.
ALTER TABLE email_jobs DROP CONSTRAINT IF EXISTS email_jobs_purpose_check;
ALTER TABLE email_jobs ADD CONSTRAINT email_jobs_purpose_check
    CHECK (purpose IN ('reset', 'verify', 'email_change', 'email_revert', 'account_delete'))
    NOT VALID;
ALTER TABLE email_jobs DROP CONSTRAINT IF EXISTS email_jobs_template_check;
ALTER TABLE email_jobs ADD CONSTRAINT email_jobs_template_check CHECK (
    (kind = 'email' AND template IN (
        'verify', 'reset', 'account_exists', 'password_changed',
        'email_change',    -- the change link and code, to the new address
        'email_in_use',    -- to a confirmed holder of the asked-for address: nothing changed
        'email_changed',   -- to the old address: the undo link
        'email_restored',  -- to the address an undo moved the account back from
        'account_delete'   -- the deletion link and code
    ))
    OR (kind = 'webhook' AND app_id IS NOT NULL
        AND template IN ('user.verified', 'user.password_changed',
                         'email.delivered', 'email.failed',
                         'user.email_changed', 'user.email_restored', 'user.deleted'))
) NOT VALID;
-- migrate: commit
ALTER TABLE email_jobs VALIDATE CONSTRAINT email_jobs_purpose_check;
ALTER TABLE email_jobs VALIDATE CONSTRAINT email_jobs_template_check;
