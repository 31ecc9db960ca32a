-- Which of a scope's messages an inbox reader sees, as one function: newer
-- than `since`, within retention, and matching the to / subject / q filters
-- (each NULL for no filter, else an escaped ILIKE pattern). A long poll's
-- check (authsvc/inbox/inbox.sql scan_scope) and the listing it then answers
-- with (list_summaries) repeated this WHERE; had they drifted, a poll would
-- count messages the listing does not return. Both read this now.
--
-- A STABLE SQL function of one SELECT: the planner inlines it into the query
-- that reads it, so the (scope, id) index still serves the scope, `since`
-- and the callers' ORDER BY id LIMIT, and the columns a caller leaves unread
-- (raw, the bodies) are never fetched.
CREATE FUNCTION inbox_visible_messages(
    in_scope text, in_since bigint, in_retention_seconds double precision,
    in_to text, in_subject text, in_q text
) RETURNS TABLE (
    id bigint, scope text, recipients text[], received_at timestamptz,
    mail_from text, subject text, message_id text, headers jsonb, links text[],
    raw bytea, text_body text, html_body text
)
LANGUAGE sql STABLE AS $$
    SELECT m.id, m.scope, m.recipients, m.received_at,
           c.mail_from, c.subject, c.message_id, c.headers, c.links,
           c.raw, c.text_body, c.html_body
    FROM inbox_messages AS m
    JOIN inbox_contents AS c ON c.id = m.content_id
    WHERE m.scope = in_scope AND m.id > in_since
      AND m.received_at > now() - make_interval(secs => in_retention_seconds)
      AND (in_to IS NULL
           OR EXISTS (SELECT 1 FROM unnest(m.recipients) AS r WHERE r ILIKE in_to))
      AND (in_subject IS NULL OR c.subject ILIKE in_subject)
      AND (in_q IS NULL OR c.subject ILIKE in_q OR c.mail_from ILIKE in_q
           OR c.text_body ILIKE in_q
           OR EXISTS (SELECT 1 FROM unnest(m.recipients) AS r WHERE r ILIKE in_q))
$$;
