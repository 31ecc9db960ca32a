-- find_change --
-- One confirmed change of an account: what its undo link restores, and whether
-- the link still stands.
SELECT user_id, version, old_email, new_email, changed_at, ended_at, ended_by
FROM email_changes WHERE user_id = %(user_id)s AND version = %(version)s;

-- list_changes --
-- An account's confirmed changes, newest first (`authsvc users show`).
SELECT user_id, version, old_email, new_email, changed_at, ended_at, ended_by
FROM email_changes WHERE user_id = %(user_id)s ORDER BY version DESC;

-- oldest_live_undo_address --
-- The oldest address still holding an undo link that works: a standing change
-- whose link has not expired. A deletion is confirmed there while one lives, so
-- a thief who changed the address cannot delete the account its owner is about
-- to take back.
SELECT old_email FROM email_changes
WHERE user_id = %(user_id)s AND ended_at IS NULL AND changed_at > %(issued_after)s
ORDER BY version LIMIT 1;

-- account_addresses --
-- Every address an account held, was moved to or was asked to move to, as far
-- as authsvc kept it: its own, its pending change, its changes' addresses and
-- the recipients of its emails. What a deletion must leave nowhere.
SELECT email FROM users WHERE id = %(user_id)s
UNION SELECT pending_email FROM users WHERE id = %(user_id)s AND pending_email IS NOT NULL
UNION SELECT old_email FROM email_changes WHERE user_id = %(user_id)s
UNION SELECT new_email FROM email_changes WHERE user_id = %(user_id)s
UNION SELECT recipient FROM email_jobs WHERE user_id = %(user_id)s AND kind = 'email';
