-- The SQLite store's own statements: transactions, connection settings, the migrations table.
-- PRAGMA takes no bound parameters: {placeholders} are filled by effectledger.sql.fill
-- with a whole number or a word from a fixed list, never with text from outside.

-- name: begin_write
BEGIN IMMEDIATE;

-- name: begin_read
BEGIN;

-- name: commit
COMMIT;

-- name: rollback
ROLLBACK;

-- name: busy_timeout
PRAGMA busy_timeout = {milliseconds};

-- name: foreign_keys_on
PRAGMA foreign_keys = ON;

-- name: journal_mode_wal
PRAGMA journal_mode = WAL;

-- name: synchronous
PRAGMA synchronous = {level};

-- name: cache_size
-- Negative: the page cache of each connection in KiB, whatever the page size.
PRAGMA cache_size = -{kib};

-- name: migrations_create
CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_us INTEGER NOT NULL
);

-- name: migrations_applied
-- The newest migration applied and how many are: a ledger missing one below the newest runs it.
SELECT max(version), count(*) FROM schema_migrations;

-- name: migration_done
SELECT 1 FROM schema_migrations WHERE version = :version;

-- name: migration_record
INSERT INTO schema_migrations (version, name, applied_us) VALUES (:version, :name, :applied_us);
