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
