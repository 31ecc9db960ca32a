-- The test inbox's code per message, search, and faults on demand (SPEC §16).
--
-- code: the 6-digit code of the text part, found once by the sink when it
-- stores the message (authsvc/inbox/parsing.py find_code), so a listing that
-- leaves the bodies out still answers it.
ALTER TABLE inbox_contents ADD COLUMN code text;

-- The listing's function (0026) returns the code too; its WHERE is unchanged.
DROP FUNCTION inbox_visible_messages(text, bigint, double precision, text, text, text);
CREATE FUNCTION inbox_visible_messages(
    in_scope text, in_since bigint, in_retention_seconds double precision,
    in_to text, in_subject text, in_q text
) RETURNS TABLE (
    id bigint, scope text, recipients text[], received_at timestamptz,
    mail_from text, subject text, message_id text, headers jsonb, links text[],
    raw bytea, text_body text, html_body text, code text
)
LANGUAGE sql STABLE AS $$
    SELECT m.id, m.scope, m.recipients, m.received_at,
           c.mail_from, c.subject, c.message_id, c.headers, c.links,
           c.raw, c.text_body, c.html_body, c.code
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

-- Faults on demand: the sink answers the next `remaining` deliveries to a
-- scope with `reply` instead of storing them. One row per scope; setting a
-- fault again replaces it. In the database, not the sink's memory, so that
-- every sink process and the HTTP server that sets it agree.
CREATE TABLE inbox_faults (
    scope text PRIMARY KEY CHECK (scope = lower(scope)),
    reply text NOT NULL CHECK (reply ~ '^[45][0-9][0-9]( [ -~]{0,200})?$'),
    remaining integer NOT NULL CHECK (remaining BETWEEN 0 AND 100),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Search across scopes: whether one message matches every term of a query
-- (each array holds escaped ILIKE patterns; an empty array asks nothing).
-- PL/pgSQL, so the planner cannot inline it: it then judges the filter by a
-- default selectivity rather than by estimates it cannot make for substring
-- patterns (it guessed "one row" and sorted the whole inbox), and with COST
-- high it walks the primary key newest first and stops at the page's LIMIT.
-- A search for a common word reads a few rows; one that matches nothing
-- reads every message once. `in_text` is NULL when no free word is asked
-- for, so the text part is never read for a to:/from:/subject: search.
CREATE FUNCTION inbox_search_matches(
    in_scope text, in_recipients text[], in_from text, in_subject text, in_text text,
    to_patterns text[], from_patterns text[], subject_patterns text[], word_patterns text[]
) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE COST 1000 AS $$
DECLARE
    pattern text;
    -- No pattern holds a newline (a query is one line), so none matches across two addresses.
    recipients text := array_to_string(in_recipients, E'\n');
BEGIN
    FOREACH pattern IN ARRAY to_patterns LOOP
        IF recipients NOT ILIKE pattern THEN
            RETURN false;
        END IF;
    END LOOP;
    FOREACH pattern IN ARRAY from_patterns LOOP
        IF coalesce(in_from, '') NOT ILIKE pattern THEN
            RETURN false;
        END IF;
    END LOOP;
    FOREACH pattern IN ARRAY subject_patterns LOOP
        IF coalesce(in_subject, '') NOT ILIKE pattern THEN
            RETURN false;
        END IF;
    END LOOP;
    FOREACH pattern IN ARRAY word_patterns LOOP
        IF NOT (coalesce(in_subject, '') ILIKE pattern OR coalesce(in_from, '') ILIKE pattern
                OR in_scope ILIKE pattern OR recipients ILIKE pattern
                OR coalesce(in_text, '') ILIKE pattern) THEN
            RETURN false;
        END IF;
    END LOOP;
    RETURN true;
END $$;
