-- Jobs by the address they went to. A provider's bounce or complaint
-- suppresses an address only when it names an email authsvc sent there
-- (authsvc/outbox/admin.sql, sent_to): without this index that check read a
-- month of the outbox. With a million emails sent in the last 30 days it took
-- 156 ms against 0.22 ms with it (median of 15, bench/bounce_match.py); the
-- claim of 100 link jobs costs about 5 % more with it (bench/mechanics.py,
-- p50 8.1-8.7 ms against 8.0-8.7; the drain's rate within its noise). The
-- console's recipient filter (console_reads.sql, find_jobs: newest first, by
-- id) can walk it too.
--
-- Building it blocks every write to the outbox while it reads the table. On a
-- large outbox, build it beforehand without blocking writes, under the same
-- name, and this file then finds it there (docs/OPERATIONS.md, "Upgrading"):
--   CREATE INDEX CONCURRENTLY IF NOT EXISTS email_jobs_recipient
--     ON email_jobs (recipient, id);
-- A concurrent build that failed leaves an invalid index under the name, which
-- IF NOT EXISTS would keep: that stops here instead.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
               WHERE c.relname = 'email_jobs_recipient' AND NOT i.indisvalid) THEN
        RAISE EXCEPTION 'index email_jobs_recipient exists but is invalid (a CREATE INDEX CONCURRENTLY that did not finish): DROP INDEX email_jobs_recipient; then run authsvc db upgrade again';
    END IF;
END $$;
CREATE INDEX IF NOT EXISTS email_jobs_recipient ON email_jobs (recipient, id);
