-- effectledger PostgreSQL schema, migration 6: evidence blobs.
-- The destination's answer that justified an outcome (a response or a lookup answer), redacted
-- and size-bounded before it is hashed, kept by its SHA-256 within its tenant. Audit events name
-- a blob by reference ('evidence_blobs/sha256:<hex>'); identical answers share one row.

CREATE TABLE evidence_blobs (
    tenant_id  TEXT    NOT NULL,
    sha256     TEXT    NOT NULL CHECK (length(sha256) = 64),
    media_type TEXT    NOT NULL,
    size_bytes INTEGER NOT NULL CHECK (size_bytes BETWEEN 0 AND 65536),
    content    BYTEA   NOT NULL CHECK (octet_length(content) = size_bytes),
    stored_us  BIGINT  NOT NULL,
    PRIMARY KEY (tenant_id, sha256)
);

-- Evidence is append-only: a stored answer is never edited or removed. SQLSTATE 23000 makes the
-- store report a refused change as a constraint violation, as SQLite's RAISE(ABORT) does.
CREATE FUNCTION evidence_blobs_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'evidence_blobs is append-only' USING ERRCODE = 'integrity_constraint_violation';
END;
$$;

CREATE TRIGGER evidence_blobs_no_update BEFORE UPDATE ON evidence_blobs
    FOR EACH ROW EXECUTE FUNCTION evidence_blobs_append_only();

CREATE TRIGGER evidence_blobs_no_delete BEFORE DELETE ON evidence_blobs
    FOR EACH ROW EXECUTE FUNCTION evidence_blobs_append_only();

CREATE TRIGGER evidence_blobs_no_truncate BEFORE TRUNCATE ON evidence_blobs
    FOR EACH STATEMENT EXECUTE FUNCTION evidence_blobs_append_only();
