-- The PostgreSQL store's own statements: transactions, connection settings, schema and the
-- migrations table. The ledger's statements are in queries.sql.

-- name: begin_write
BEGIN ISOLATION LEVEL READ COMMITTED;

-- name: budgeted_timeouts
-- A write with a time budget: right after BEGIN, its timeouts are set until the transaction ends
-- (set_config with is_local, as SET LOCAL). The store sends BEGIN, this and the transaction's
-- first statement together, in one round trip (pipeline mode).
SELECT set_config('lock_timeout', %(lock)s, true), set_config('statement_timeout', %(statement)s, true);

-- name: begin_read
BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;

-- name: commit
COMMIT;

-- name: rollback
ROLLBACK;

-- name: set_search_path
SELECT set_config('search_path', %(schema)s, false);

-- name: set_lock_timeout
SELECT set_config('lock_timeout', %(lock_timeout)s, false);

-- name: migration_lock
-- One lock per search_path: concurrent processes configured alike migrate one at a time.
SELECT pg_advisory_xact_lock(
    hashtextextended('effectledger.migrate:' || current_setting('search_path'), 0)
);

-- name: schema_create
DO $$ BEGIN
    EXECUTE format('CREATE SCHEMA IF NOT EXISTS %I', current_setting('search_path'));
END $$;

-- name: migrations_create
CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_us BIGINT NOT NULL
);

-- name: migration_done
SELECT 1 AS present FROM schema_migrations WHERE version = %(version)s;

-- name: migration_record
INSERT INTO schema_migrations (version, name, applied_us)
VALUES (%(version)s, %(name)s, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint);

-- name: replication
-- What the server says of its standbys: how many stream from it, how many of those it waits
-- for at COMMIT, and whether COMMIT waits at all. Seen without privileges, sync_state is NULL.
SELECT
    (SELECT count(*) FROM pg_stat_replication) AS standbys,
    (SELECT count(*) FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum')) AS synchronous,
    (SELECT count(*) FROM pg_stat_replication WHERE sync_state IS NULL) AS unknown,
    current_setting('synchronous_commit') AS synchronous_commit;

-- name: local_search_path
-- Behind a pooler in transaction mode a connection's session settings may belong to another
-- client's session: the schema is set for this transaction only.
SELECT set_config('search_path', %(schema)s, true);

-- name: local_lock_timeout
SELECT set_config('lock_timeout', %(lock_timeout)s, true);

-- name: set_local_lock_timeout_off
-- A long migration elsewhere is waited for, not given up on.
SELECT set_config('lock_timeout', '0', true);

-- name: backend_pid
-- The server process this statement runs in. A connection pooler hands its client a process id
-- of its own making at connect time, so the two differ behind one.
SELECT pg_backend_pid() AS pid;
