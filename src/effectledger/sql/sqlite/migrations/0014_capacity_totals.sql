-- effectledger SQLite schema, migration 14: running capacity totals per pool.
--
-- Admission reads a pool's held and committed units from capacity_totals instead of summing the
-- pool's whole history. Triggers on operations move the units in the same transaction as the
-- state change that moves them (an admission inserts held units; success commits them;
-- rejection and release free them), so no statement that moves units can forget to. SQLite has
-- one writer at a time, so every pool keeps a single row (shard 0). A pool's units and pool are
-- fixed once admitted. The totals of existing ledgers are built from their operations here;
-- `effectledger capacity check` recomputes and compares them. The index that the old sum read
-- is dropped.

CREATE TABLE capacity_totals (
    tenant_id TEXT    NOT NULL,
    pool      TEXT    NOT NULL,
    shard     INTEGER NOT NULL CHECK (shard >= 0),
    held      INTEGER NOT NULL DEFAULT 0,
    committed INTEGER NOT NULL DEFAULT 0,
    freed     INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, pool, shard)
) WITHOUT ROWID;

INSERT INTO capacity_totals (tenant_id, pool, shard, held, committed, freed)
SELECT tenant_id, pool, 0,
    sum(CASE WHEN state IN ('READY', 'IN_PROGRESS', 'OUTCOME_UNKNOWN', 'MANUAL_REVIEW',
                            'RETRY_PENDING') THEN units ELSE 0 END),
    sum(CASE WHEN state = 'SUCCEEDED' THEN units ELSE 0 END),
    sum(CASE WHEN state IN ('REJECTED', 'RELEASED') THEN units ELSE 0 END)
FROM operations WHERE pool IS NOT NULL AND units > 0
GROUP BY tenant_id, pool;

CREATE TRIGGER operations_capacity_admitted AFTER INSERT ON operations
WHEN NEW.pool IS NOT NULL AND NEW.units > 0
BEGIN
    INSERT INTO capacity_totals (tenant_id, pool, shard, held, committed, freed)
    VALUES (
        NEW.tenant_id, NEW.pool, 0,
        CASE WHEN NEW.state IN ('READY', 'IN_PROGRESS', 'OUTCOME_UNKNOWN', 'MANUAL_REVIEW',
                                'RETRY_PENDING') THEN NEW.units ELSE 0 END,
        CASE WHEN NEW.state = 'SUCCEEDED' THEN NEW.units ELSE 0 END,
        CASE WHEN NEW.state IN ('REJECTED', 'RELEASED') THEN NEW.units ELSE 0 END
    )
    ON CONFLICT (tenant_id, pool, shard) DO UPDATE SET
        held = held + excluded.held,
        committed = committed + excluded.committed,
        freed = freed + excluded.freed;
END;

-- Only a change of category (held, committed, freed) touches the pool's row.
CREATE TRIGGER operations_capacity_moved AFTER UPDATE OF state ON operations
WHEN NEW.pool IS NOT NULL AND NEW.units > 0
    AND (OLD.state = 'SUCCEEDED') + 2 * (OLD.state IN ('REJECTED', 'RELEASED'))
        != (NEW.state = 'SUCCEEDED') + 2 * (NEW.state IN ('REJECTED', 'RELEASED'))
BEGIN
    INSERT INTO capacity_totals (tenant_id, pool, shard, held, committed, freed)
    VALUES (
        NEW.tenant_id, NEW.pool, 0,
        NEW.units * ((NEW.state NOT IN ('SUCCEEDED', 'REJECTED', 'RELEASED'))
                     - (OLD.state NOT IN ('SUCCEEDED', 'REJECTED', 'RELEASED'))),
        NEW.units * ((NEW.state = 'SUCCEEDED') - (OLD.state = 'SUCCEEDED')),
        NEW.units * ((NEW.state IN ('REJECTED', 'RELEASED'))
                     - (OLD.state IN ('REJECTED', 'RELEASED')))
    )
    ON CONFLICT (tenant_id, pool, shard) DO UPDATE SET
        held = held + excluded.held,
        committed = committed + excluded.committed,
        freed = freed + excluded.freed;
END;

CREATE TRIGGER operations_capacity_fixed BEFORE UPDATE OF pool, units ON operations
WHEN NEW.pool IS NOT OLD.pool OR NEW.units != OLD.units
BEGIN
    SELECT RAISE(ABORT, 'an operation''s pool and units are fixed at admission');
END;

DROP INDEX operations_capacity;
