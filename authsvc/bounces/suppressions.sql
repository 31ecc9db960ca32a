-- suppress --
-- Put an address on the list; a later report keeps the first one (what started it).
INSERT INTO suppressions (address, event, provider, provider_message_id, detail)
VALUES (%(address)s, %(event)s, %(provider)s, %(provider_message_id)s, %(detail)s)
ON CONFLICT (address) DO NOTHING;

-- list_suppressions --
-- Every suppressed address, newest first.
SELECT address, event, provider, provider_message_id, detail, suppressed_at
FROM suppressions ORDER BY suppressed_at DESC, address;

-- remove_suppression --
-- The operator lifts a suppression; returns the row removed, if any.
DELETE FROM suppressions WHERE address = %(address)s RETURNING address;

-- remember_webhook_message --
-- First sight of a provider's webhook message id; no row back means a replay.
INSERT INTO provider_webhook_messages (provider, message_id)
VALUES (%(provider)s, %(message_id)s)
ON CONFLICT DO NOTHING
RETURNING message_id;

-- prune_webhook_messages --
-- Ids older than the replay horizon can go: their signatures are long stale.
DELETE FROM provider_webhook_messages
WHERE received_at < now() - make_interval(secs => %(keep_seconds)s);

-- forget_webhook_message --
-- A message whose handling failed after it was remembered (an SNS subscription
-- that could not be confirmed): its provider's retry must not read as a replay.
DELETE FROM provider_webhook_messages
WHERE provider = %(provider)s AND message_id = %(message_id)s;
