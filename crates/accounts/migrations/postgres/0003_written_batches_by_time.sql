-- shoal accounts schema, version 3 (PostgreSQL): an index on written_batches.written_at. Every
-- accounting write deletes the batch ids older than a week (WHERE written_at < ?); without
-- it that delete read the whole table, a week of batches (about 120,000 rows at one flush
-- every 5 s), on every flush.

CREATE INDEX written_batches_by_time ON written_batches (written_at);
