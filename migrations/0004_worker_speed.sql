-- Worker speed (issue 11). The claim asks, per claimed job, whether an
-- earlier attempt ended ambiguous; without an index of its own PostgreSQL
-- answered that by hashing a sequential scan of the whole trail, which grows
-- with every job ever sent. Ambiguous sends are rare, so this index is tiny.
CREATE INDEX email_job_events_ambiguous ON email_job_events (job_id) WHERE event = 'ambiguous';
