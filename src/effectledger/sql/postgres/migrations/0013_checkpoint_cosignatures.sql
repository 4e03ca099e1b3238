-- effectledger PostgreSQL schema, migration 13: witness cosignatures kept beside their checkpoints.
--
-- The sealer submits each checkpoint it signs to the witnesses it is configured with; each
-- cosignature line a witness returns is verified with that witness's key and stored here, keyed
-- by the checkpoint and the witness's verifier key. Size and root repeat the checkpoint's, so a
-- cosignature never attaches to another checkpoint stored under the same number.

CREATE TABLE checkpoint_cosignatures (
    tenant_id   TEXT   NOT NULL,
    seq         BIGINT NOT NULL CHECK (seq >= 1),
    witness_key TEXT   NOT NULL,
    size        BIGINT NOT NULL CHECK (size >= 0),
    root_hash   TEXT   NOT NULL CHECK (length(root_hash) = 64),
    cosignature TEXT   NOT NULL,
    cosigned_us BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, seq, witness_key)
);

-- The sealer finds the latest checkpoint each witness cosigned.
CREATE INDEX checkpoint_cosignatures_by_witness
    ON checkpoint_cosignatures (tenant_id, witness_key, seq);

CREATE TRIGGER checkpoint_cosignatures_append_only
    BEFORE UPDATE OR DELETE ON checkpoint_cosignatures
    FOR EACH ROW EXECUTE FUNCTION effectledger_evidence_append_only();

CREATE TRIGGER checkpoint_cosignatures_no_truncate BEFORE TRUNCATE ON checkpoint_cosignatures
    FOR EACH STATEMENT EXECUTE FUNCTION effectledger_evidence_append_only();
