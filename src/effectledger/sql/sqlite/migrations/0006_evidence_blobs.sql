-- effectledger SQLite schema, migration 6: evidence blobs.
-- The destination's answer that justified an outcome (a response or a lookup answer), redacted
-- and size-bounded before it is hashed, kept by its SHA-256 within its tenant. Audit events name
-- a blob by reference ('evidence_blobs/sha256:<hex>'); identical answers share one row.

CREATE TABLE evidence_blobs (
    tenant_id  TEXT    NOT NULL,
    sha256     TEXT    NOT NULL CHECK (length(sha256) = 64),
    media_type TEXT    NOT NULL,
    size_bytes INTEGER NOT NULL CHECK (size_bytes BETWEEN 0 AND 65536),
    content    BLOB    NOT NULL CHECK (length(content) = size_bytes),
    stored_us  INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, sha256)
) WITHOUT ROWID;

-- Evidence is append-only: a stored answer is never edited or removed.
CREATE TRIGGER evidence_blobs_no_update BEFORE UPDATE ON evidence_blobs
BEGIN
    SELECT RAISE(ABORT, 'evidence_blobs is append-only');
END;

CREATE TRIGGER evidence_blobs_no_delete BEFORE DELETE ON evidence_blobs
BEGIN
    SELECT RAISE(ABORT, 'evidence_blobs is append-only');
END;
