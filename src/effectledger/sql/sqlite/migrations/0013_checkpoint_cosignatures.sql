-- effectledger SQLite schema, migration 13: witness cosignatures kept beside their checkpoints.
--
-- The sealer submits each checkpoint it signs to the witnesses it is configured with; each
-- cosignature line a witness returns is verified with that witness's key and stored here, keyed
-- by the checkpoint and the witness's verifier key. Size and root repeat the checkpoint's, so a
-- cosignature never attaches to another checkpoint stored under the same number.

CREATE TABLE checkpoint_cosignatures (
    tenant_id   TEXT    NOT NULL,
    seq         INTEGER NOT NULL CHECK (seq >= 1),
    witness_key TEXT    NOT NULL,
    size        INTEGER NOT NULL CHECK (size >= 0),
    root_hash   TEXT    NOT NULL CHECK (length(root_hash) = 64),
    cosignature TEXT    NOT NULL,
    cosigned_us INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, seq, witness_key)
) WITHOUT ROWID;

-- The sealer finds the latest checkpoint each witness cosigned.
CREATE INDEX checkpoint_cosignatures_by_witness
    ON checkpoint_cosignatures (tenant_id, witness_key, seq);

CREATE TRIGGER checkpoint_cosignatures_no_update BEFORE UPDATE ON checkpoint_cosignatures
BEGIN
    SELECT RAISE(ABORT, 'checkpoint_cosignatures is append-only');
END;

CREATE TRIGGER checkpoint_cosignatures_no_delete BEFORE DELETE ON checkpoint_cosignatures
BEGIN
    SELECT RAISE(ABORT, 'checkpoint_cosignatures is append-only');
END;
