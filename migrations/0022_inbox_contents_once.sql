-- The test inbox stored a message whole once per recipient scope: 1 MiB to
-- 100 scopes took 217 MB, 10 MiB to 100 scopes about 2 GB per SMTP
-- transaction. The message (raw bytes and what was parsed from them) is now
-- stored once per transaction in inbox_contents; inbox_messages keeps one row
-- per scope (its id, scope, recipients, time) pointing at it. The API answers
-- exactly as before: ids, order and every field are the same.
--
-- A content goes when no scope row points at it any more (per-scope cap,
-- DELETE of a scope, retention), by a trigger, so every deleter frees it.
-- What the contents take is summed in inbox_usage_deltas for the sink's byte
-- budget (AUTHSVC_TEST_INBOX_MAX_BYTES): insert-only deltas, as the outbox
-- counters do (0011), so concurrent stores never wait on one hot row; the
-- sink folds them.

ALTER TABLE inbox_messages RENAME TO inbox_messages_0001;
ALTER INDEX inbox_messages_pkey RENAME TO inbox_messages_0001_pkey;
ALTER SEQUENCE inbox_messages_id_seq RENAME TO inbox_messages_0001_id_seq;
DROP INDEX inbox_messages_scope;
DROP INDEX inbox_messages_received;

CREATE TABLE inbox_contents (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    mail_from    text,
    subject      text,
    message_id   text,
    headers      jsonb NOT NULL DEFAULT '{}',
    text_body    text,
    html_body    text,
    links        text[] NOT NULL DEFAULT '{}',
    raw          bytea NOT NULL,
    -- What the budget counts: the raw bytes and the parsed bodies kept beside them.
    stored_bytes bigint GENERATED ALWAYS AS (
        octet_length(raw)::bigint + coalesce(octet_length(text_body), 0)
        + coalesce(octet_length(html_body), 0)
    ) STORED
);

CREATE TABLE inbox_messages (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    scope       text NOT NULL CHECK (scope = lower(scope)),
    recipients  text[] NOT NULL,
    content_id  bigint NOT NULL REFERENCES inbox_contents (id),
    received_at timestamptz NOT NULL DEFAULT now()
);

-- What was stored before stays, one content per old row, under the same ids.
INSERT INTO inbox_contents
    (id, mail_from, subject, message_id, headers, text_body, html_body, links, raw)
OVERRIDING SYSTEM VALUE
SELECT id, mail_from, subject, message_id, headers, text_body, html_body, links, raw
FROM inbox_messages_0001;
INSERT INTO inbox_messages (id, scope, recipients, content_id, received_at)
OVERRIDING SYSTEM VALUE
SELECT id, scope, recipients, id, received_at FROM inbox_messages_0001;
-- Clients page with since=<id>: new ids continue after the old ones.
SELECT setval(pg_get_serial_sequence('inbox_messages', 'id'),
              coalesce((SELECT max(id) FROM inbox_messages_0001), 0) + 1, false);
SELECT setval(pg_get_serial_sequence('inbox_contents', 'id'),
              coalesce((SELECT max(id) FROM inbox_messages_0001), 0) + 1, false);
DROP TABLE inbox_messages_0001;

CREATE INDEX inbox_messages_scope ON inbox_messages (scope, id);
CREATE INDEX inbox_messages_received ON inbox_messages (received_at);
CREATE INDEX inbox_messages_content ON inbox_messages (content_id);

-- Bytes the contents take: the sum of the rows is the figure.
CREATE TABLE inbox_usage_deltas (bytes bigint NOT NULL);
INSERT INTO inbox_usage_deltas (bytes) SELECT coalesce(sum(stored_bytes), 0) FROM inbox_contents;

CREATE FUNCTION inbox_count_contents() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO inbox_usage_deltas (bytes)
        SELECT sum(stored_bytes) FROM new_contents HAVING count(*) > 0;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO inbox_usage_deltas (bytes)
        SELECT -sum(stored_bytes) FROM old_contents HAVING count(*) > 0;
    ELSE
        INSERT INTO inbox_usage_deltas (bytes)
        SELECT coalesce((SELECT sum(stored_bytes) FROM new_contents), 0)
             - coalesce((SELECT sum(stored_bytes) FROM old_contents), 0);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER inbox_count_inserted_contents AFTER INSERT ON inbox_contents
    REFERENCING NEW TABLE AS new_contents
    FOR EACH STATEMENT EXECUTE FUNCTION inbox_count_contents();
CREATE TRIGGER inbox_count_updated_contents AFTER UPDATE ON inbox_contents
    REFERENCING OLD TABLE AS old_contents NEW TABLE AS new_contents
    FOR EACH STATEMENT EXECUTE FUNCTION inbox_count_contents();
CREATE TRIGGER inbox_count_deleted_contents AFTER DELETE ON inbox_contents
    REFERENCING OLD TABLE AS old_contents
    FOR EACH STATEMENT EXECUTE FUNCTION inbox_count_contents();

-- After scope rows go, their contents go too unless another scope still
-- points at one. Two transactions dropping a content's last two rows at once
-- each still see the other's row and keep it: the sink's prune sweeps such
-- orphans (inbox.sql free_orphan_contents), rather than every delete taking
-- row locks that could deadlock against a store trimming several scopes.
CREATE FUNCTION inbox_free_contents() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM inbox_contents AS c
    WHERE c.id IN (SELECT content_id FROM gone_messages)
      AND NOT EXISTS (SELECT 1 FROM inbox_messages AS m WHERE m.content_id = c.id);
    RETURN NULL;
END $$;
CREATE TRIGGER inbox_free_deleted_contents AFTER DELETE ON inbox_messages
    REFERENCING OLD TABLE AS gone_messages
    FOR EACH STATEMENT EXECUTE FUNCTION inbox_free_contents();
