-- add_operator --
-- Give a confirmed account the operator role; nothing when it already has it.
INSERT INTO operators (user_id, added_at)
SELECT id, %(now)s FROM users WHERE id = %(user_id)s AND email_verified_at IS NOT NULL
ON CONFLICT (user_id) DO NOTHING
RETURNING user_id;

-- remove_operator --
-- Take the role away; their console sessions and pending sign-ins go with it.
DELETE FROM operators WHERE user_id = %(user_id)s RETURNING user_id;

-- set_totp --
-- Set (or with null, remove) an operator's sealed TOTP secret; its steps start afresh.
UPDATE operators SET totp_secret = %(sealed)s, totp_last_step = 0
WHERE user_id = %(user_id)s
RETURNING user_id;

-- list_operators --
-- Every operator with their current address, oldest first.
SELECT o.user_id, u.email, o.added_at, o.totp_secret IS NOT NULL AS totp,
       (SELECT max(s.last_seen_at) FROM console_sessions AS s WHERE s.user_id = o.user_id)
           AS last_seen_at
FROM operators AS o JOIN users AS u ON u.id = o.user_id
ORDER BY o.added_at, o.user_id;
