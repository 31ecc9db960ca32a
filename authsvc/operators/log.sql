-- write_entry --
-- One console action: who, what, on what. Run inside the action's transaction.
INSERT INTO operator_log (operator_id, operator_email, action, target, detail, created_at)
VALUES (%(operator_id)s, %(operator_email)s, %(action)s, %(target)s, %(detail)s, %(now)s);

-- list_entries --
-- The newest entries first, a page at a time (before_id: the last id of the previous page).
SELECT id, operator_id, operator_email, action, target, detail, created_at
FROM operator_log
WHERE %(before_id)s::bigint IS NULL OR id < %(before_id)s::bigint
ORDER BY id DESC
LIMIT %(limit)s;
