-- The operator role is given to an address (`authsvc operators add ADDRESS`), and
-- the console's second step is a code emailed there. When the account's address
-- changes (a confirmed change, an undo), the role goes, and with it the
-- operator's console sessions and sign-ins (ON DELETE CASCADE), with a line in the
-- operator log: otherwise whoever knows an operator's password could move the
-- account to a mailbox of their own and receive the console's code there. An
-- operator adds it back. One trigger, so no path that changes an address can
-- forget it.
CREATE OR REPLACE FUNCTION operators_drop_role_on_new_address() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    WITH dropped AS (
        DELETE FROM operators WHERE user_id = NEW.id RETURNING user_id
    )
    INSERT INTO operator_log (operator_id, operator_email, action, target, detail)
    SELECT NULL, 'authsvc', 'operator.role_dropped', 'account ' || user_id,
           'the account''s address changed'
    FROM dropped;
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS operators_follow_address ON users;
CREATE TRIGGER operators_follow_address AFTER UPDATE OF email ON users
FOR EACH ROW WHEN (OLD.email IS DISTINCT FROM NEW.email)
EXECUTE FUNCTION operators_drop_role_on_new_address();
