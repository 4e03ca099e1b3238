-- effectledger SQLite schema, migration 10: operations found by their provider reference.
--
-- A reference a destination reports for one operation may already be held by another operation
-- of the same destination (a lookup record or a reply naming someone else's effect). Recording
-- it checks for that holder first; this index keeps the check to the operations holding that
-- reference, whatever the history.

CREATE INDEX operations_by_reference
    ON operations (tenant_id, destination_account, destination_endpoint, provider_reference);
