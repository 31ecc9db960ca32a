-- An app event's stored envelope, built in one place. The web side's events
-- (authsvc/sql/events.sql queue_event) and the worker's email.* events
-- (worker/jobs.sql record_outcomes) each built it inline, with the timestamp
-- formatted once in Python and once in SQL. The webhook-id is fixed here, at
-- queue time, so every retry of the delivery carries the same one.
CREATE FUNCTION app_event_payload(event_type text, happened_at timestamptz, data jsonb)
RETURNS jsonb LANGUAGE sql VOLATILE
RETURN jsonb_build_object(
    'webhook_id', 'evt_' || replace(gen_random_uuid()::text, '-', ''),
    'event', jsonb_build_object(
        'type', event_type,
        -- RFC 3339 in UTC with milliseconds, e.g. 2026-12-01T21:01:20.123Z.
        'timestamp', to_char(happened_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
        'data', data));
