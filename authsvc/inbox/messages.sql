-- insert_content --
-- A received message, once per SMTP transaction however many scopes it went to (migrations/0026_baseline.sql).
INSERT INTO inbox_contents
    (mail_from, subject, message_id, headers, text_body, html_body, links, raw, code)
VALUES
    (%(mail_from)s, %(subject)s, %(message_id)s, %(headers)s,
     %(text_body)s, %(html_body)s, %(links)s, %(raw)s, %(code)s)
RETURNING id;

-- insert_message --
-- The message as one scope holds it: its recipients in that scope and the shared content.
INSERT INTO inbox_messages (scope, recipients, content_id)
VALUES (%(scope)s, %(recipients)s, %(content_id)s)
RETURNING id;

-- notify_waiters --
-- Wake the HTTP requests waiting on this scope; delivered when the insert commits.
SELECT pg_notify('authsvc_inbox', %(scope)s);

-- notify_pruned --
-- Wake the pages' event streams after a prune (no scope is named: no long poll wakes for it).
SELECT pg_notify('authsvc_inbox', '');

-- scan_scope --
-- What a long poll re-checks on each wake-up: ids, Message-IDs and ages only, never bodies. Which messages: inbox_visible_messages (migrations/0028_inbox_codes_faults.sql); a listing is these ids, described (describe_messages).
SELECT v.id, v.message_id,
       extract(epoch FROM clock_timestamp() - v.received_at)::float8 AS age_seconds
FROM inbox_visible_messages(%(scope)s, %(since)s, %(retention_seconds)s,
                            %(to)s, %(subject)s, %(q)s) AS v
ORDER BY v.id
LIMIT %(limit)s;

-- describe_messages --
-- The messages `ids` as the inbox shows them, oldest first: with their bodies, or (a listing, a search) only their sizes (octet_length reads the stored length, not the value; a body not asked for is never read).
SELECT m.id, m.scope, c.mail_from, m.recipients, c.subject, c.message_id, c.headers,
       CASE WHEN %(bodies)s THEN c.text_body END AS text_body,
       CASE WHEN %(bodies)s THEN c.html_body END AS html_body,
       c.links, m.received_at,
       extract(epoch FROM clock_timestamp() - m.received_at)::float8 AS age_seconds,
       octet_length(c.raw) AS size,
       coalesce(octet_length(c.text_body), 0) + coalesce(octet_length(c.html_body), 0)
           AS body_bytes,
       NOT %(bodies)s AS body_omitted, c.code
FROM inbox_messages AS m
JOIN inbox_contents AS c ON c.id = m.content_id
WHERE m.id = ANY(%(ids)s)
ORDER BY m.id;

-- get_bodies --
-- The text and HTML parts of the messages a page inlines (chosen to fit its byte budget).
SELECT m.id, c.text_body, c.html_body
FROM inbox_messages AS m
JOIN inbox_contents AS c ON c.id = m.content_id
WHERE m.id = ANY(%(ids)s);

-- find_message --
-- Whether a scope holds this message, within the retention (describe_messages then shows it).
SELECT m.id
FROM inbox_messages AS m
WHERE m.scope = %(scope)s AND m.id = %(id)s
  AND m.received_at > now() - make_interval(secs => %(retention_seconds)s);

-- list_scopes --
-- Recent scopes, the most recently written first, with their count and newest message.
SELECT s.scope, s.messages, s.last_id, c.subject AS last_subject,
       m.received_at AS last_received_at
FROM (
    SELECT scope, count(*) AS messages, max(id) AS last_id
    FROM inbox_messages
    WHERE received_at > now() - make_interval(secs => %(retention_seconds)s)
    GROUP BY scope
    ORDER BY max(id) DESC
    LIMIT %(limit)s
) AS s
JOIN inbox_messages AS m ON m.id = s.last_id
JOIN inbox_contents AS c ON c.id = m.content_id
ORDER BY s.last_id DESC;

-- trim_scope --
-- The per-scope cap: drop the oldest messages beyond the newest `keep` (in the storing transaction); a trigger frees contents no scope keeps.
DELETE FROM inbox_messages
WHERE scope = %(scope)s AND id < (
    SELECT id FROM inbox_messages WHERE scope = %(scope)s ORDER BY id DESC OFFSET %(keep)s - 1 LIMIT 1
);

-- get_raw_message --
-- The bytes exactly as received; past retention it is gone, as for get_message.
SELECT c.raw
FROM inbox_messages AS m
JOIN inbox_contents AS c ON c.id = m.content_id
WHERE m.scope = %(scope)s AND m.id = %(id)s
  AND m.received_at > now() - make_interval(secs => %(retention_seconds)s);

-- delete_scope --
-- Empty a scope; later mail still lands in it. A trigger frees contents no other scope keeps.
DELETE FROM inbox_messages WHERE scope = %(scope)s;

-- delete_message --
-- One message out of its scope (the trigger frees its content when no other scope lists it).
DELETE FROM inbox_messages WHERE scope = %(scope)s AND id = %(id)s;

-- prune_messages --
-- Retention: drop messages older than the retention period (a trigger frees their contents).
DELETE FROM inbox_messages WHERE received_at < now() - make_interval(secs => %(retention_seconds)s);

-- free_orphan_contents --
-- Contents no scope points at: left only when two transactions dropped a content's last rows at once (inbox_free_contents).
DELETE FROM inbox_contents AS c
WHERE NOT EXISTS (SELECT 1 FROM inbox_messages AS m WHERE m.content_id = c.id);

-- inbox_usage --
-- Bytes the stored contents take (raw and parsed bodies), for the sink's byte budget.
SELECT coalesce(sum(bytes), 0)::bigint AS bytes FROM inbox_usage_deltas;

-- fold_inbox_usage --
-- One row for all the deltas so far, so reading the figure stays cheap; rows inserted meanwhile are kept.
WITH gone AS (DELETE FROM inbox_usage_deltas RETURNING bytes)
INSERT INTO inbox_usage_deltas (bytes)
SELECT sum(bytes) FROM gone HAVING count(*) > 0;
