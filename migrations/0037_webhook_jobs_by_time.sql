-- App events' deliveries by when they were queued. The console's apps page
-- counts each app's deliveries of the last day by outcome (authsvc/operators/
-- console_reads.sql, webhook_health): with no index to find the day's webhook
-- jobs it read the whole outbox, 61.5 ms at a million email jobs against
-- 0.19 ms with this one (median of 7). Partial, so queueing and sending an
-- email writes nothing more; only webhook jobs carry it.
-- On a big outbox, build it first without blocking writes (docs/OPERATIONS.md):
--   CREATE INDEX CONCURRENTLY IF NOT EXISTS email_jobs_webhook_created
--     ON email_jobs (created_at) WHERE kind = 'webhook';
-- As in 0036, an invalid index left by a failed concurrent build stops here.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
               WHERE c.relname = 'email_jobs_webhook_created' AND NOT i.indisvalid) THEN
        RAISE EXCEPTION 'index email_jobs_webhook_created exists but is invalid (a CREATE INDEX CONCURRENTLY that did not finish): DROP INDEX email_jobs_webhook_created; then run authsvc db upgrade again';
    END IF;
END $$;
CREATE INDEX IF NOT EXISTS email_jobs_webhook_created ON email_jobs (created_at)
    WHERE kind = 'webhook';
