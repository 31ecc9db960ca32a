-- bound_search_time --
-- This transaction's statements end after `ms` milliseconds (QueryCanceled), however broad the search.
SELECT set_config('statement_timeout', %(ms)s, true);

-- search_messages --
-- The ids of the messages of every scope matching every term (inbox_search_matches, migrations/0028), newest first; the page shows them described (messages.sql describe_messages).
SELECT m.id
FROM inbox_messages AS m
JOIN inbox_contents AS c ON c.id = m.content_id
WHERE m.id < %(older_than)s
  AND m.received_at > now() - make_interval(secs => %(retention_seconds)s)
  AND m.received_at >= coalesce(%(after)s::timestamptz, '-infinity')
  AND m.received_at < coalesce(%(before)s::timestamptz, 'infinity')
  AND inbox_search_matches(
      m.scope, m.recipients, c.mail_from, c.subject,
      CASE WHEN cardinality(%(words)s::text[]) > 0 THEN c.text_body END,
      %(to)s::text[], %(sender)s::text[], %(subject)s::text[], %(words)s::text[])
ORDER BY m.id DESC
LIMIT %(limit)s;
