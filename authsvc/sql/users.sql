-- find_user_by_email --
-- The account for a normalised address, if any.
SELECT id, email, password_hash, email_verified_at, reset_version, verify_version, session_version
FROM users WHERE email = %(email)s;

-- find_user_by_id --
-- The account with this id, if any.
SELECT id, email, password_hash, email_verified_at, reset_version, verify_version, session_version
FROM users WHERE id = %(user_id)s;

-- insert_user --
-- Create an unverified account; returns nothing when the address is taken.
INSERT INTO users (email, password_hash) VALUES (%(email)s, %(password_hash)s)
ON CONFLICT (email) DO NOTHING
RETURNING id, email, password_hash, email_verified_at, reset_version, verify_version, session_version;

-- claim_unverified_account --
-- A signup for an address nobody has verified yet: the newest password wins
-- and earlier sessions end. Returns nothing for a verified account.
UPDATE users
SET password_hash = %(password_hash)s,
    session_version = session_version + 1
WHERE email = %(email)s AND email_verified_at IS NULL
RETURNING id, email, password_hash, email_verified_at, reset_version, verify_version, session_version;

-- redeem_verify_link --
-- Mark verified only if the link is still current; zero rows = stale or used.
-- Sessions opened before the address was proven end here: whoever signed up
-- with someone else's address keeps nothing once its owner confirms it.
UPDATE users
SET verify_version = verify_version + 1,
    session_version = session_version + (email_verified_at IS NULL)::int,
    email_verified_at = coalesce(email_verified_at, %(now)s)
WHERE id = %(user_id)s AND verify_version = %(version)s
RETURNING id, email, password_hash, email_verified_at, reset_version, verify_version, session_version;

-- redeem_reset_link --
-- Set the password only if the link is still current; also ends every session
-- and verifies the address (the person proved they read its mail).
UPDATE users
SET reset_version = reset_version + 1,
    session_version = session_version + 1,
    password_hash = %(password_hash)s,
    password_changed_at = %(now)s,
    email_verified_at = coalesce(email_verified_at, %(now)s)
WHERE id = %(user_id)s AND reset_version = %(version)s
RETURNING id, email, password_hash, email_verified_at, reset_version, verify_version, session_version;

-- change_password --
-- Password change from a signed-in session: retires reset links and sessions.
UPDATE users
SET reset_version = reset_version + 1,
    session_version = session_version + 1,
    password_hash = %(password_hash)s,
    password_changed_at = %(now)s
WHERE id = %(user_id)s AND session_version = %(session_version)s
RETURNING id, email, password_hash, email_verified_at, reset_version, verify_version, session_version;

-- update_password_hash --
-- Store a rehash with current parameters after a successful login, only if the
-- password was not changed in the meantime.
UPDATE users SET password_hash = %(password_hash)s
WHERE id = %(user_id)s AND password_hash = %(verified_hash)s;

-- record_redemption --
-- Remember that this exact link was used, to tell "used" from "superseded".
INSERT INTO token_redemptions (user_id, purpose, version, redeemed_at)
VALUES (%(user_id)s, %(purpose)s, %(version)s, %(now)s);

-- was_redeemed --
-- Whether this exact link was used.
SELECT EXISTS (
    SELECT 1 FROM token_redemptions
    WHERE user_id = %(user_id)s AND purpose = %(purpose)s AND version = %(version)s
);
