-- insert_app --
-- Register an embedding app with the hash of its API key.
INSERT INTO apps (name, key_hash, redirect_urls) VALUES (%(name)s, %(key_hash)s, %(redirect_urls)s)
RETURNING id, name, redirect_urls;

-- find_app_by_key_hash --
-- The app an API key belongs to.
SELECT id, name, redirect_urls FROM apps WHERE key_hash = %(key_hash)s;
