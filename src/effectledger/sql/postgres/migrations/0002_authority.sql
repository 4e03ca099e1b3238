-- effectledger PostgreSQL schema, migration 2: proposals, approvals, their consumption, capacity.

CREATE TABLE proposals (
    tenant_id        TEXT    NOT NULL,
    proposal_id      TEXT    NOT NULL,
    operation_id     TEXT    NOT NULL,
    proposer_id      TEXT    NOT NULL,
    action           TEXT    NOT NULL,
    contract_version TEXT    NOT NULL,
    target           TEXT    NOT NULL,
    resource_version TEXT    NOT NULL,
    arguments_json   TEXT    NOT NULL,
    units            BIGINT  NOT NULL CHECK (units >= 0),
    pool             TEXT    NOT NULL,
    destination_account  TEXT NOT NULL,
    destination_endpoint TEXT NOT NULL,
    policy_version   TEXT    NOT NULL,
    expires_us       BIGINT  NOT NULL,
    correlation_json TEXT    NOT NULL,
    digest           TEXT    NOT NULL,
    created_us       BIGINT  NOT NULL,
    PRIMARY KEY (tenant_id, proposal_id),
    UNIQUE (tenant_id, operation_id)
);

-- Proposals, approvals and consumptions never change once written. SQLSTATE 23000 makes the
-- store report a refused change as a constraint violation, as SQLite's RAISE(ABORT) does.
CREATE FUNCTION authority_rows_immutable() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% are immutable', TG_TABLE_NAME USING ERRCODE = 'integrity_constraint_violation';
END;
$$;

CREATE TRIGGER proposals_no_update BEFORE UPDATE ON proposals
    FOR EACH ROW EXECUTE FUNCTION authority_rows_immutable();
CREATE TRIGGER proposals_no_delete BEFORE DELETE ON proposals
    FOR EACH ROW EXECUTE FUNCTION authority_rows_immutable();
CREATE TRIGGER proposals_no_truncate BEFORE TRUNCATE ON proposals
    FOR EACH STATEMENT EXECUTE FUNCTION authority_rows_immutable();

CREATE TABLE approvals (
    tenant_id      TEXT    NOT NULL,
    approval_id    TEXT    NOT NULL,
    proposal_id    TEXT    NOT NULL,
    digest         TEXT    NOT NULL,
    decision       TEXT    NOT NULL CHECK (decision IN ('granted', 'denied')),
    kind           TEXT    NOT NULL CHECK (kind IN ('approval', 'preauthorization')),
    approver_id    TEXT    NOT NULL,
    policy_version TEXT    NOT NULL,
    reason         TEXT,
    decided_us     BIGINT  NOT NULL,
    expires_us     BIGINT  NOT NULL,
    PRIMARY KEY (tenant_id, approval_id),
    FOREIGN KEY (tenant_id, proposal_id) REFERENCES proposals (tenant_id, proposal_id)
);

CREATE INDEX approvals_by_kind ON approvals (tenant_id, kind, decided_us);

CREATE TRIGGER approvals_no_update BEFORE UPDATE ON approvals
    FOR EACH ROW EXECUTE FUNCTION authority_rows_immutable();
CREATE TRIGGER approvals_no_delete BEFORE DELETE ON approvals
    FOR EACH ROW EXECUTE FUNCTION authority_rows_immutable();
CREATE TRIGGER approvals_no_truncate BEFORE TRUNCATE ON approvals
    FOR EACH STATEMENT EXECUTE FUNCTION authority_rows_immutable();

-- Single use is a primary key: an approval can be consumed by one operation, once.
CREATE TABLE approval_consumptions (
    tenant_id    TEXT    NOT NULL,
    approval_id  TEXT    NOT NULL,
    operation_id TEXT    NOT NULL,
    consumed_us  BIGINT  NOT NULL,
    PRIMARY KEY (tenant_id, approval_id),
    FOREIGN KEY (tenant_id, approval_id) REFERENCES approvals (tenant_id, approval_id),
    FOREIGN KEY (tenant_id, operation_id) REFERENCES operations (tenant_id, operation_id)
);

CREATE TRIGGER approval_consumptions_no_update BEFORE UPDATE ON approval_consumptions
    FOR EACH ROW EXECUTE FUNCTION authority_rows_immutable();
CREATE TRIGGER approval_consumptions_no_delete BEFORE DELETE ON approval_consumptions
    FOR EACH ROW EXECUTE FUNCTION authority_rows_immutable();
CREATE TRIGGER approval_consumptions_no_truncate BEFORE TRUNCATE ON approval_consumptions
    FOR EACH STATEMENT EXECUTE FUNCTION authority_rows_immutable();

CREATE TABLE capacity_limits (
    tenant_id   TEXT    NOT NULL,
    pool        TEXT    NOT NULL,
    limit_units BIGINT  NOT NULL CHECK (limit_units >= 0),
    updated_us  BIGINT  NOT NULL,
    PRIMARY KEY (tenant_id, pool)
);

CREATE INDEX operations_capacity ON operations (tenant_id, pool, state);
