-- Email codes (SPEC §4 "Codes"): the 6-digit code beside each link is derived
-- from the link's claims and never stored; only the count of tries is.

-- Tries per (purpose, address, version): five retire that version's code
-- (its link keeps working). Keyed by a digest of the address, not the user,
-- so an address without an account is counted, and retired, exactly like
-- one with an account; version 0 stands for "no code outstanding". The
-- count is taken (one upsert) before the code is checked, so concurrent
-- guesses cannot exceed the cap.
CREATE TABLE code_attempts (
    purpose        text NOT NULL CHECK (purpose IN ('reset', 'verify')),
    address_digest bytea NOT NULL,
    version        integer NOT NULL,
    attempts       integer NOT NULL CHECK (attempts >= 0),
    created_at     timestamptz NOT NULL,
    PRIMARY KEY (purpose, address_digest, version)
);
CREATE INDEX code_attempts_created ON code_attempts (created_at);

-- Redeeming a code finds the email that carried the address's current
-- version; the existing email_jobs_user index serves it.
