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

-- scan_scope --
-- What a long poll re-checks on each wake-up: ids, Message-IDs and ages only, never bodies.
SELECT id, message_id, extract(epoch FROM clock_timestamp() - received_at)::float8 AS age_seconds
FROM inbox_messages
WHERE scope = %(scope)s AND id > %(since)s
  AND received_at > now() - make_interval(secs => %(retention_seconds)s)
  AND (%(to)s::text IS NULL OR EXISTS (SELECT 1 FROM unnest(recipients) AS r WHERE r ILIKE %(to)s))
  AND (%(subject)s::text IS NULL OR subject ILIKE %(subject)s)
  AND (%(q)s::text IS NULL OR subject ILIKE %(q)s OR mail_from ILIKE %(q)s OR text_body ILIKE %(q)s
       OR EXISTS (SELECT 1 FROM unnest(recipients) AS r WHERE r ILIKE %(q)s))
ORDER BY id
LIMIT %(limit)s;

-- list_summaries --
-- One page of a scope's messages newer than `since`, oldest first, without bodies (octet_length reads the stored length, not the value).
SELECT id, scope, mail_from, recipients, subject, message_id, headers,
       NULL::text AS text_body, NULL::text AS html_body, links, received_at,
       extract(epoch FROM clock_timestamp() - received_at)::float8 AS age_seconds,
       octet_length(raw) AS size,
       coalesce(octet_length(text_body), 0) + coalesce(octet_length(html_body), 0) AS body_bytes,
       true AS body_omitted
FROM inbox_messages
WHERE scope = %(scope)s AND id > %(since)s
  AND received_at > now() - make_interval(secs => %(retention_seconds)s)
  AND (%(to)s::text IS NULL OR EXISTS (SELECT 1 FROM unnest(recipients) AS r WHERE r ILIKE %(to)s))
  AND (%(subject)s::text IS NULL OR subject ILIKE %(subject)s)
  AND (%(q)s::text IS NULL OR subject ILIKE %(q)s OR mail_from ILIKE %(q)s OR text_body ILIKE %(q)s
       OR EXISTS (SELECT 1 FROM unnest(recipients) AS r WHERE r ILIKE %(q)s))
ORDER BY id
LIMIT %(limit)s;

-- get_bodies --
-- The text and HTML parts of the messages a page inlines (chosen to fit its byte budget).
SELECT id, text_body, html_body FROM inbox_messages WHERE id = ANY(%(ids)s);

-- get_message --
-- One message of a scope, bodies included.
SELECT id, scope, mail_from, recipients, subject, message_id, headers, text_body, html_body, links,
       received_at,
       extract(epoch FROM clock_timestamp() - received_at)::float8 AS age_seconds,
       octet_length(raw) AS size,
       coalesce(octet_length(text_body), 0) + coalesce(octet_length(html_body), 0) AS body_bytes,
       false AS body_omitted
FROM inbox_messages
WHERE scope = %(scope)s AND id = %(id)s
  AND received_at > now() - make_interval(secs => %(retention_seconds)s);

-- list_scopes --
-- Recent scopes, the most recently written first, with their count and newest message.
SELECT s.scope, s.messages, s.last_id, m.subject AS last_subject, m.received_at AS last_received_at
FROM (
    SELECT scope, count(*) AS messages, max(id) AS last_id
    FROM inbox_messages
    WHERE received_at > now() - make_interval(secs => %(retention_seconds)s)
    GROUP BY scope
    ORDER BY max(id) DESC
    LIMIT %(limit)s
) AS s
JOIN inbox_messages AS m ON m.id = s.last_id
ORDER BY s.last_id DESC;

-- trim_scope --
-- The per-scope cap: drop the oldest messages beyond the newest `keep` (in the storing transaction).
DELETE FROM inbox_messages
WHERE scope = %(scope)s AND id < (
    SELECT id FROM inbox_messages WHERE scope = %(scope)s ORDER BY id DESC OFFSET %(keep)s - 1 LIMIT 1
);

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
