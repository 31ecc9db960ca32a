-- queue_email_change --
-- A change request in one statement, so a taken and a free new address do
-- the same work and commit once (SPEC §12: the same 202, in about the same
-- time). The new address's change budget is counted either way (within it,
-- its code tries start afresh: SQL email_budget_hit()). If a
-- confirmed account other than this one holds the new address, its mailbox
-- gets the "an account already uses this address; nothing changed" notice
-- and nothing else happens. Otherwise the account's change version is
-- bumped (a later request supersedes an earlier one) and the new address is
-- recorded as pending, even when the budget then holds the email back; within
-- it, the link and code go to the new address. With the old address's
-- approval required (%(approval)s, AUTHSVC_EMAIL_CHANGE_CONFIRM_OLD), the
-- account's own address also gets an approval link and code under the same
-- version, within its own budget (counted whether or not the new address is
-- taken, for the same reason). An app's redirect applies only to its own
-- accounts (SQL account_belongs_to_app()) and to the new address's link; both
-- links of its own account are marked so ("own_account": its brand, and a
-- flow through the app).
-- Neither email reports email.* events to the app (payload
-- no_outcome_events, as link requests): it must not learn whether the new
-- address has an account. Returns whether the budget allowed the request and
-- whether the address was taken.
WITH budget AS (
    SELECT email_budget_hit(%(bucket)s, %(window_start)s, %(limit)s, 'email_change', %(digest)s)
           AS allowed
), approval_budget AS (
    SELECT CASE WHEN %(approval)s
                THEN email_budget_hit(%(approval_bucket)s, %(approval_window_start)s,
                                      %(approval_limit)s, 'email_change_approval',
                                      %(approval_digest)s)
                ELSE false END AS allowed
), holder AS (
    SELECT id FROM users
    WHERE email = %(new_email)s AND email_verified_at IS NOT NULL AND id <> %(user_id)s
), changed AS (
    UPDATE users
    SET email_change_version = email_change_version + 1,
        pending_email = %(new_email)s
    WHERE id = %(user_id)s AND NOT EXISTS (SELECT 1 FROM holder)
    RETURNING id, email, email_change_version AS version,
              account_belongs_to_app(id, %(app_id)s::uuid) AS own
), queued AS (
    INSERT INTO email_jobs (template, recipient, payload, user_id, purpose, token_version,
                            issued_at, app_id)
    SELECT 'email_change', %(new_email)s,
           CASE WHEN own THEN %(payload)s::jsonb || '{"own_account": true}'
                ELSE %(payload)s::jsonb - 'redirect_url' END,
           id, 'email_change', version, %(issued_at)s::timestamptz, %(app_id)s::uuid
    FROM changed WHERE (SELECT allowed FROM budget)
    UNION ALL
    SELECT 'email_change_approval', email,
           (%(payload)s::jsonb - 'redirect_url') || jsonb_build_object('new_email', %(new_email)s)
               || CASE WHEN own THEN '{"own_account": true}'::jsonb ELSE '{}'::jsonb END,
           id, 'email_change_approval', version, %(issued_at)s::timestamptz, %(app_id)s::uuid
    FROM changed WHERE (SELECT allowed FROM approval_budget)
    UNION ALL
    SELECT 'email_in_use', %(new_email)s, %(payload)s::jsonb - 'redirect_url', id,
           NULL, NULL, NULL, %(app_id)s::uuid
    FROM holder WHERE (SELECT allowed FROM budget)
    RETURNING id
)
SELECT (SELECT allowed FROM budget), EXISTS (SELECT 1 FROM holder),
       CASE WHEN EXISTS (SELECT 1 FROM queued) THEN pg_notify(%(channel)s, '') END;

-- confirm_email_change --
-- The account takes the new address its pending change proved, under the row
-- lock the caller holds (users.sql lock_user): the address, confirmed; every
-- version bumped, so every outstanding link and code of the account dies
-- (undo links of earlier changes are rows of email_changes, and stand); and
-- the change recorded as the row its undo link names. Zero rows: the link is
-- no longer current. Returns the account as it now is, and the old address.
WITH before AS (
    SELECT id, email FROM users WHERE id = %(user_id)s
), changed AS (
    UPDATE users AS u
    SET email = u.pending_email,
        pending_email = NULL,
        email_verified_at = coalesce(u.email_verified_at, %(now)s),
        email_change_version = u.email_change_version + 1,
        reset_version = u.reset_version + 1,
        verify_version = u.verify_version + 1,
        account_delete_version = u.account_delete_version + 1,
        sign_in_version = u.sign_in_version + 1,
        email_revert_version = u.email_revert_version + 1
    FROM before
    WHERE u.id = before.id AND u.email_change_version = %(version)s
      AND u.pending_email IS NOT NULL
    RETURNING u.id, u.email, u.password_hash, u.email_verified_at, u.reset_version,
              u.verify_version, u.signup_count, u.email_change_version,
              u.account_delete_version, u.email_revert_version, u.pending_email, u.sign_in_version,
              before.email AS previous_email
), recorded AS (
    INSERT INTO email_changes (user_id, version, old_email, new_email, changed_at)
    SELECT id, email_revert_version, previous_email, email, %(now)s FROM changed
)
SELECT * FROM changed;

-- end_changes_from --
-- An undo: its own change is undone, and every later change that still
-- stands is voided with it (their undo links die: the oldest address wins,
-- in whatever order undo links are used). Earlier changes stand. Returns the
-- versions it ended.
UPDATE email_changes
SET ended_at = %(now)s,
    ended_by = CASE WHEN version = %(version)s THEN 'undone' ELSE 'voided' END
WHERE user_id = %(user_id)s AND version >= %(version)s AND ended_at IS NULL
RETURNING version;

-- restore_address --
-- The account takes back the address an undo link was sent to: confirmed,
-- every version bumped (every outstanding link and code dies, a pending
-- change and a pending deletion with them), and the password set to the one
-- given, or cleared ('' matches no password) so only a reset link sent to the
-- restored address can set one.
UPDATE users
SET email = %(email)s,
    email_verified_at = coalesce(email_verified_at, %(now)s),
    password_hash = coalesce(%(password_hash)s::text, ''),
    password_changed_at = %(now)s,
    pending_email = NULL,
    reset_version = reset_version + 1,
    verify_version = verify_version + 1,
    email_change_version = email_change_version + 1,
    account_delete_version = account_delete_version + 1,
    sign_in_version = sign_in_version + 1
WHERE id = %(user_id)s
RETURNING id, email, password_hash, email_verified_at, reset_version, verify_version, signup_count,
          email_change_version, account_delete_version, email_revert_version, pending_email, sign_in_version;
