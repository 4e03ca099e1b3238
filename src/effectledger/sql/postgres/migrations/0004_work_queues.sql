-- effectledger PostgreSQL schema, migration 4: indexes for the shared work queues.
-- Executors pull the READY operations of their destination, oldest first; recovery starts from
-- the unresolved operations. Neither walks the history of resolved operations.

CREATE INDEX operations_ready
    ON operations (destination_account, destination_endpoint, created_us, tenant_id, operation_id)
    WHERE state = 'READY';

CREATE INDEX operations_unresolved
    ON operations (tenant_id, operation_id)
    WHERE state IN ('IN_PROGRESS', 'OUTCOME_UNKNOWN');
