-- shoal accounts schema, version 2 (PostgreSQL): the ids of the accounting batches committed
-- in the last week, so that a batch whose COMMIT was cut off is not applied twice when the
-- tracker writes it again (docs/private.md, "Writing accounting: the contract").

CREATE TABLE written_batches (
    id          VARCHAR(64) NOT NULL PRIMARY KEY,  -- chosen by the tracker, unique per batch
    written_at  BIGINT      NOT NULL               -- Unix seconds
);
