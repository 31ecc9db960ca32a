-- "An address without a code gets five fresh tries" as a function, so a
-- link request can do it in the statement that counts the request and
-- queues its email (issue 11: outbox/producer.sql queue_link, one round
-- trip and one commit where there were five and one). codes.sql calls it
-- too, for a signup: the DELETE is written once. PL/pgSQL keeps its plan.
CREATE FUNCTION code_attempts_forget_unissued(tries_purpose text, tries_digest bytea)
RETURNS void LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    DELETE FROM code_attempts
    WHERE purpose = tries_purpose AND address_digest = tries_digest AND version = 0;
END $$;
