-- set_fault --
-- A scope's next `count` deliveries get `reply`; setting a fault again replaces the old one.
INSERT INTO inbox_faults (scope, reply, remaining)
VALUES (%(scope)s, %(reply)s, %(count)s)
ON CONFLICT (scope) DO UPDATE
SET reply = excluded.reply, remaining = excluded.remaining, created_at = now();

-- clear_faults --
-- No more faults for this scope: its deliveries are stored again.
DELETE FROM inbox_faults WHERE scope = %(scope)s;

-- take_fault --
-- One delivery's fault, used up under the row lock: two sink connections never take the same one.
UPDATE inbox_faults SET remaining = remaining - 1
WHERE scope = %(scope)s AND remaining > 0
RETURNING reply;

-- prune_faults --
-- Used-up faults, and faults past the inbox's retention (their scope's mail is gone too).
DELETE FROM inbox_faults
WHERE remaining = 0 OR created_at < now() - make_interval(secs => %(retention_seconds)s);
