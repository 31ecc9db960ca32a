-- Account integrity (SPEC §4a): contested signups, server-side sessions.

-- Signups received while the address was unconfirmed (a verification resend
-- counts as a second one). Two or more make the address contested: whoever
-- confirms it must choose the password then, since nobody can tell whether
-- the stored one came from the mailbox's holder.
ALTER TABLE users ADD COLUMN signup_count integer NOT NULL DEFAULT 1;
-- Accounts still unconfirmed at this upgrade start out contested: the code
-- before it let a second signup swap their password without a new link, so
-- nobody can tell whose password they hold now.
UPDATE users SET signup_count = 2 WHERE email_verified_at IS NULL;

-- Web sessions live here, not in the cookie: the cookie carries a random
-- token, this table only its SHA-256. Logout deletes the row, so a copied
-- cookie stops working; a password change deletes all of the user's rows.
CREATE TABLE web_sessions (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    token_hash   bytea NOT NULL UNIQUE,
    user_id      bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at   timestamptz NOT NULL,
    last_seen_at timestamptz NOT NULL,
    user_agent   text NOT NULL DEFAULT '' CHECK (length(user_agent) <= 300)
);
CREATE INDEX web_sessions_user ON web_sessions (user_id, created_at);

-- Sessions used to be versions carried in a signed cookie; those cookies end
-- with this migration (everyone logs in again once).
ALTER TABLE users DROP COLUMN session_version;
