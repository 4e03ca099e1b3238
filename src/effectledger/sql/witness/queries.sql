-- Named statements of a witness's own store (same "-- name:" format as the ledger's): one row
-- per log origin, the latest checkpoint the witness cosigned for it.

-- name: journal_mode_wal
PRAGMA journal_mode = WAL;

-- name: create_table
CREATE TABLE IF NOT EXISTS witnessed (
    origin TEXT    NOT NULL PRIMARY KEY,
    size   INTEGER NOT NULL CHECK (size >= 0),
    root   TEXT    NOT NULL CHECK (length(root) = 64),
    note   TEXT    NOT NULL
) WITHOUT ROWID;

-- name: begin_write
-- The check of the old size and the update are one transaction (no rollback race).
BEGIN IMMEDIATE;

-- name: commit
COMMIT;

-- name: rollback
ROLLBACK;

-- name: latest
SELECT size, root, note FROM witnessed WHERE origin = :origin;

-- name: record
INSERT INTO witnessed (origin, size, root, note) VALUES (:origin, :size, :root, :note)
ON CONFLICT (origin) DO UPDATE SET size = excluded.size, root = excluded.root,
    note = excluded.note;
