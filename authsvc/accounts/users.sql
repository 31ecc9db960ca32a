-- find_user_by_email --
-- The account for a canonical address, if any.
SELECT id, email, password_hash, email_verified_at, reset_version, verify_version, signup_count,
       email_change_version, account_delete_version, email_revert_version, pending_email, sign_in_version
FROM users WHERE email = %(email)s;

-- find_user_by_id --
-- The account with this id, if any.
SELECT id, email, password_hash, email_verified_at, reset_version, verify_version, signup_count,
       email_change_version, account_delete_version, email_revert_version, pending_email, sign_in_version
FROM users WHERE id = %(user_id)s;

-- register_signup --
-- One signup, one statement. A new address gets its account (and version 1
-- of its verify link). While nobody has proven an address, a further signup
-- takes the newest password, counts itself (two or more make the address
-- contested) and retires every earlier verify link by bumping the version,
-- whether or not its own email is then suppressed. A verified account is
-- left as it was. Only the signup that creates the account sets its locale
-- (SPEC §14: a later signup request, which anyone's app can send, leaves it).
-- Returns the row in every case.
INSERT INTO users (email, password_hash, verify_version, signup_count, locale)
VALUES (%(email)s, %(password_hash)s, 1, 1, %(locale)s)
ON CONFLICT (email) DO UPDATE SET
    password_hash = CASE WHEN users.email_verified_at IS NULL
                         THEN excluded.password_hash ELSE users.password_hash END,
    signup_count = users.signup_count + (users.email_verified_at IS NULL)::int,
    verify_version = users.verify_version + (users.email_verified_at IS NULL)::int
RETURNING id, email, password_hash, email_verified_at, reset_version, verify_version, signup_count,
          email_change_version, account_delete_version, email_revert_version, pending_email, sign_in_version;

-- redeem_verify_link --
-- Mark verified only if the link is still current; zero rows = stale, used,
-- or a contested address confirmed without choosing a password. A password
-- given here replaces whatever the signups set.
UPDATE users
SET verify_version = verify_version + 1,
    password_hash = coalesce(%(password_hash)s::text, password_hash),
    password_changed_at = CASE WHEN %(password_hash)s::text IS NULL
                               THEN password_changed_at ELSE %(now)s END,
    email_verified_at = coalesce(email_verified_at, %(now)s)
WHERE id = %(user_id)s AND verify_version = %(version)s
  AND email_verified_at IS NULL
  AND (%(password_hash)s::text IS NOT NULL OR signup_count <= 1)
RETURNING id, email, password_hash, email_verified_at, reset_version, verify_version, signup_count,
          email_change_version, account_delete_version, email_revert_version, pending_email, sign_in_version;

-- redeem_reset_link --
-- Set the password only if the link is still current; also verifies the
-- address (the person proved they read its mail) and cancels a pending
-- address change (SPEC §12: its link dies). first_proof: the address
-- was unproven until now, read from the row this statement locks and
-- updates (FOR UPDATE waits for a concurrent redemption and sees its
-- result), never from an earlier read.
WITH before AS (
    SELECT id, email_verified_at IS NULL AS unproven
    FROM users WHERE id = %(user_id)s
    FOR UPDATE
)
UPDATE users AS u
SET reset_version = u.reset_version + 1,
    verify_version = u.verify_version + 1,  -- no older verify link may set a password now
    email_change_version = u.email_change_version + 1,
    sign_in_version = u.sign_in_version + 1,  -- a reset after a break-in ends its sign-in links
    pending_email = NULL,
    password_hash = %(password_hash)s,
    password_changed_at = %(now)s,
    email_verified_at = coalesce(u.email_verified_at, %(now)s)
FROM before
WHERE u.id = before.id AND u.reset_version = %(version)s
RETURNING u.id, u.email, u.password_hash, u.email_verified_at, u.reset_version,
          u.verify_version, u.signup_count, u.email_change_version, u.account_delete_version,
          u.email_revert_version, u.pending_email, u.sign_in_version, before.unproven AS first_proof;

-- change_password --
-- Password change from a signed-in session, only while that session lives
-- and over the hash the caller verified: a reset committed meanwhile wins
-- (the EXISTS alone would be judged on the statement's snapshot). Retires
-- outstanding links and cancels a pending address change (the caller ends
-- the sessions).
UPDATE users
SET reset_version = reset_version + 1,
    verify_version = verify_version + 1,
    email_change_version = email_change_version + 1,
    sign_in_version = sign_in_version + 1,
    pending_email = NULL,
    password_hash = %(password_hash)s,
    password_changed_at = %(now)s
WHERE id = %(user_id)s AND password_hash = %(verified_hash)s
  AND EXISTS (SELECT 1 FROM web_sessions WHERE id = %(session_id)s AND user_id = %(user_id)s)
RETURNING id, email, password_hash, email_verified_at, reset_version, verify_version, signup_count,
          email_change_version, account_delete_version, email_revert_version, pending_email, sign_in_version;

-- update_password_hash --
-- Store a rehash with current parameters after a successful login, only if the
-- password was not changed in the meantime.
UPDATE users SET password_hash = %(password_hash)s
WHERE id = %(user_id)s AND password_hash = %(verified_hash)s;

-- record_redemption --
-- Remember that this exact link was used, to tell "used" from "superseded";
-- and the account takes the locale the redeemed link's email was asked in
-- (SPEC §14: the latest link it redeemed; a request alone never sets it).
WITH redeemed AS (
    INSERT INTO token_redemptions (user_id, purpose, version, redeemed_at)
    VALUES (%(user_id)s, %(purpose)s, %(version)s, %(now)s)
)
UPDATE users AS u SET locale = j.locale
FROM (SELECT payload ->> 'locale' AS locale FROM email_jobs
      WHERE user_id = %(user_id)s AND purpose = %(purpose)s AND token_version = %(version)s
        AND kind = 'email'
      ORDER BY id DESC LIMIT 1) AS j
WHERE u.id = %(user_id)s AND j.locale IS NOT NULL AND u.locale IS DISTINCT FROM j.locale;

-- was_redeemed --
-- Whether this exact link was used.
SELECT EXISTS (
    SELECT 1 FROM token_redemptions
    WHERE user_id = %(user_id)s AND purpose = %(purpose)s AND version = %(version)s
);

-- lock_user --
-- The account, locked until the caller's transaction ends: a use case that
-- decides from several rows (an address change, its undo, a deletion) holds
-- it while it decides, so concurrent redemptions of the same account queue up
-- and each sees what the one before it committed.
SELECT id, email, password_hash, email_verified_at, reset_version, verify_version, signup_count,
       email_change_version, account_delete_version, email_revert_version, pending_email, sign_in_version
FROM users WHERE id = %(user_id)s
FOR UPDATE;

-- lock_user_by_email --
-- The account holding an address, locked until the caller's transaction ends.
SELECT id, email, password_hash, email_verified_at, reset_version, verify_version, signup_count,
       email_change_version, account_delete_version, email_revert_version, pending_email, sign_in_version
FROM users WHERE email = %(email)s
FOR UPDATE;
