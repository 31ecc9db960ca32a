-- bound_search_time --
-- This transaction's statements end after `ms` milliseconds (QueryCanceled), however broad the search.
SELECT set_config('statement_timeout', %(ms)s, true);

-- search_messages --
-- Messages of every scope matching every term (each list holds escaped ILIKE patterns, all must match), newest first, without bodies.
SELECT m.id, m.scope, c.mail_from, m.recipients, c.subject, c.message_id, c.headers,
       NULL::text AS text_body, NULL::text AS html_body, c.links, m.received_at,
       extract(epoch FROM clock_timestamp() - m.received_at)::float8 AS age_seconds,
       octet_length(c.raw) AS size,
       coalesce(octet_length(c.text_body), 0) + coalesce(octet_length(c.html_body), 0)
           AS body_bytes,
       true AS body_omitted, c.code
FROM inbox_messages AS m
JOIN inbox_contents AS c ON c.id = m.content_id
WHERE m.id < %(older_than)s
  AND m.received_at > now() - make_interval(secs => %(retention_seconds)s)
  AND m.received_at >= coalesce(%(after)s::timestamptz, '-infinity')
  AND m.received_at < coalesce(%(before)s::timestamptz, 'infinity')
  AND NOT EXISTS (
      SELECT FROM unnest(%(to)s::text[]) AS p(pattern)
      WHERE NOT EXISTS (SELECT FROM unnest(m.recipients) AS r WHERE r ILIKE p.pattern))
  AND NOT EXISTS (
      SELECT FROM unnest(%(sender)s::text[]) AS p(pattern)
      WHERE (c.mail_from ILIKE p.pattern) IS NOT TRUE)
  AND NOT EXISTS (
      SELECT FROM unnest(%(subject)s::text[]) AS p(pattern)
      WHERE (c.subject ILIKE p.pattern) IS NOT TRUE)
  AND NOT EXISTS (
      SELECT FROM unnest(%(words)s::text[]) AS p(pattern)
      WHERE (c.subject ILIKE p.pattern OR c.mail_from ILIKE p.pattern OR m.scope ILIKE p.pattern
             OR c.text_body ILIKE p.pattern
             OR EXISTS (SELECT FROM unnest(m.recipients) AS r WHERE r ILIKE p.pattern))
            IS NOT TRUE)
ORDER BY m.id DESC
LIMIT %(limit)s;
