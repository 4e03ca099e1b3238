-- effectledger SQLite schema, migration 2: proposals, approvals, their consumption, capacity.

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
    units            INTEGER NOT NULL CHECK (units >= 0),
    pool             TEXT    NOT NULL,
    destination_account  TEXT NOT NULL,
    destination_endpoint TEXT NOT NULL,
    policy_version   TEXT    NOT NULL,
    expires_us       INTEGER NOT NULL,
    correlation_json TEXT    NOT NULL,
    digest           TEXT    NOT NULL,
    created_us       INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, proposal_id),
    UNIQUE (tenant_id, operation_id)
) WITHOUT ROWID;

CREATE TRIGGER proposals_no_update BEFORE UPDATE ON proposals
BEGIN
    SELECT RAISE(ABORT, 'proposals are immutable');
END;

CREATE TRIGGER proposals_no_delete BEFORE DELETE ON proposals
BEGIN
    SELECT RAISE(ABORT, 'proposals are immutable');
END;

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
    decided_us     INTEGER NOT NULL,
    expires_us     INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, approval_id),
    FOREIGN KEY (tenant_id, proposal_id) REFERENCES proposals (tenant_id, proposal_id)
) WITHOUT ROWID;

CREATE INDEX approvals_by_kind ON approvals (tenant_id, kind, decided_us);

CREATE TRIGGER approvals_no_update BEFORE UPDATE ON approvals
BEGIN
    SELECT RAISE(ABORT, 'approvals are immutable');
END;

CREATE TRIGGER approvals_no_delete BEFORE DELETE ON approvals
BEGIN
    SELECT RAISE(ABORT, 'approvals are immutable');
END;

-- Single use is a primary key: an approval can be consumed by one operation, once.
CREATE TABLE approval_consumptions (
    tenant_id    TEXT    NOT NULL,
    approval_id  TEXT    NOT NULL,
    operation_id TEXT    NOT NULL,
    consumed_us  INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, approval_id),
    FOREIGN KEY (tenant_id, approval_id) REFERENCES approvals (tenant_id, approval_id),
    FOREIGN KEY (tenant_id, operation_id) REFERENCES operations (tenant_id, operation_id)
) WITHOUT ROWID;

CREATE TRIGGER approval_consumptions_no_update BEFORE UPDATE ON approval_consumptions
BEGIN
    SELECT RAISE(ABORT, 'approval consumption is permanent');
END;

CREATE TRIGGER approval_consumptions_no_delete BEFORE DELETE ON approval_consumptions
BEGIN
    SELECT RAISE(ABORT, 'approval consumption is permanent');
END;

CREATE TABLE capacity_limits (
    tenant_id   TEXT    NOT NULL,
    pool        TEXT    NOT NULL,
    limit_units INTEGER NOT NULL CHECK (limit_units >= 0),
    updated_us  INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, pool)
) WITHOUT ROWID;

CREATE INDEX operations_capacity ON operations (tenant_id, pool, state);
