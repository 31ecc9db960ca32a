-- start_session --
-- A new web session; the cookie carries the token, this row only its hash.
-- Only while the password is still the one just verified and the address is
-- proven: a reset or password change that committed during the login's
-- argon2 run has ended every session, and this one must not outlive it.
INSERT INTO web_sessions (token_hash, user_id, created_at, last_seen_at, user_agent, started_by)
SELECT %(token_hash)s, id, %(now)s, %(now)s, %(user_agent)s, %(started_by)s FROM users
WHERE id = %(user_id)s AND password_hash = %(verified_hash)s AND email_verified_at IS NOT NULL
RETURNING id;

-- prune_user_sessions --
-- Drop this user's sessions past their lifetime (run at each sign-in).
DELETE FROM web_sessions WHERE user_id = %(user_id)s AND created_at <= %(expired_before)s;

-- touch_session --
-- The live session for a token hash, with its account; refreshes last_seen_at
-- at most once a minute so browsing is not a write per request.
WITH live AS (
    SELECT s.id, s.user_id, s.started_by, s.created_at FROM web_sessions s
    WHERE s.token_hash = %(token_hash)s AND s.created_at > %(expired_before)s
), touched AS (
    UPDATE web_sessions s SET last_seen_at = %(now)s
    FROM live WHERE s.id = live.id AND s.last_seen_at < %(now)s::timestamptz - interval '60 seconds'
)
SELECT live.id AS session_id, live.started_by, live.created_at, u.id, u.email, u.password_hash, u.email_verified_at,
       u.reset_version, u.verify_version, u.signup_count, u.email_change_version,
       u.account_delete_version, u.email_revert_version, u.pending_email, u.sign_in_version
FROM live JOIN users u ON u.id = live.user_id;

-- list_sessions --
-- A user's live sessions, newest first, for the account page.
SELECT id, created_at, last_seen_at, user_agent FROM web_sessions
WHERE user_id = %(user_id)s AND created_at > %(expired_before)s
ORDER BY created_at DESC, id DESC;

-- end_session --
-- Logout: the row goes, so the cookie (or any copy of it) opens nothing.
DELETE FROM web_sessions WHERE token_hash = %(token_hash)s;

-- end_user_session --
-- End one of this user's sessions by id (from the account page).
DELETE FROM web_sessions WHERE user_id = %(user_id)s AND id = %(session_id)s;

-- end_all_sessions --
-- End every session of a user (password changed, address proven, undo, "end
-- every session"): an operator's console sessions and pending console sign-ins
-- too (the console's tables, migrations/0032), or a thief's would outlive the
-- owner's reset. Returns the web sessions ended.
WITH console AS (
    DELETE FROM console_sessions WHERE user_id = %(user_id)s
), console_sign_ins AS (
    DELETE FROM console_sign_ins WHERE user_id = %(user_id)s
)
DELETE FROM web_sessions WHERE user_id = %(user_id)s;
