-- redeem_sign_in --
-- A sign-in link or code redeemed, under the row lock the caller holds
-- (users.sql lock_user): the version moves on (single use, newest only).
-- It proves the address, so an unproven account is confirmed here, its
-- verify links die, it is no longer contested, and the password its
-- signups set is discarded — a stranger may have chosen it (SPEC §13) —
-- or replaced by %(password_hash)s, chosen now by the mailbox's holder.
-- A proven account keeps its password. SET reads the row as it was.
-- Zero rows: the link is no longer current.
UPDATE users
SET sign_in_version = sign_in_version + 1,
    verify_version = verify_version + 1,
    signup_count = CASE WHEN email_verified_at IS NULL THEN 1 ELSE signup_count END,
    password_hash = CASE WHEN email_verified_at IS NULL
                         THEN coalesce(%(password_hash)s::text, '') ELSE password_hash END,
    password_changed_at = CASE WHEN email_verified_at IS NULL
                               THEN %(now)s ELSE password_changed_at END,
    email_verified_at = coalesce(email_verified_at, %(now)s)
WHERE id = %(user_id)s AND sign_in_version = %(version)s
RETURNING id, email, password_hash, email_verified_at, reset_version, verify_version, signup_count,
          email_change_version, account_delete_version, email_revert_version, pending_email,
          sign_in_version;

-- use_sign_in_code --
-- A sign-in code used as the proof of a confirmed account with no password
-- (SPEC §12: instead of the password it does not have): once, newest only,
-- and only for such an account. Zero rows: none of that holds.
UPDATE users SET sign_in_version = sign_in_version + 1
WHERE id = %(user_id)s AND sign_in_version = %(version)s
  AND password_hash = '' AND email_verified_at IS NOT NULL
RETURNING id, email, password_hash, email_verified_at, reset_version, verify_version, signup_count,
          email_change_version, account_delete_version, email_revert_version, pending_email,
          sign_in_version;
