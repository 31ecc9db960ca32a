-- insert_message --
-- Store one received message for one scope (a message to several scopes is stored once per scope).
INSERT INTO inbox_messages
    (scope, mail_from, recipients, subject, message_id, headers, text_body, html_body, links, raw)
VALUES
    (%(scope)s, %(mail_from)s, %(recipients)s, %(subject)s, %(message_id)s, %(headers)s,
     %(text_body)s, %(html_body)s, %(links)s, %(raw)s)
RETURNING id;

-- notify_waiters --
-- Wake the HTTP requests waiting on this scope; delivered when the insert commits.
SELECT pg_notify('authsvc_inbox', %(scope)s);

-- list_messages --
-- Messages of a scope newer than `since`, oldest first; anything past retention is already gone for readers.
SELECT id, scope, mail_from, recipients, subject, message_id, headers, text_body, html_body, links,
       received_at,
       extract(epoch FROM clock_timestamp() - received_at)::float8 AS age_seconds
FROM inbox_messages
WHERE scope = %(scope)s AND id > %(since)s
  AND received_at > now() - make_interval(secs => %(retention_seconds)s)
ORDER BY id
LIMIT %(limit)s;

-- get_message --
-- One message of a scope.
SELECT id, scope, mail_from, recipients, subject, message_id, headers, text_body, html_body, links,
       received_at,
       extract(epoch FROM clock_timestamp() - received_at)::float8 AS age_seconds
FROM inbox_messages
WHERE scope = %(scope)s AND id = %(id)s
  AND received_at > now() - make_interval(secs => %(retention_seconds)s);

-- get_raw_message --
-- The bytes exactly as received; past retention it is gone, as for get_message.
SELECT raw FROM inbox_messages
WHERE scope = %(scope)s AND id = %(id)s
  AND received_at > now() - make_interval(secs => %(retention_seconds)s);

-- delete_scope --
-- Empty a scope; later mail still lands in it.
DELETE FROM inbox_messages WHERE scope = %(scope)s;

-- prune_messages --
-- Retention: drop messages older than the retention period.
DELETE FROM inbox_messages WHERE received_at < now() - make_interval(secs => %(retention_seconds)s);
