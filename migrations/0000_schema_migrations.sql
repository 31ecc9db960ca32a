-- The migrations' own bookkeeping: one row per applied file. authsvc/db/migrate.py
-- applies this file first, before it reads the table, and records it here like
-- any other. IF NOT EXISTS because databases made before this file existed
-- already have the table (migrate.py used to create it in Python): for them
-- this migration only adds its own row.
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    text PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
