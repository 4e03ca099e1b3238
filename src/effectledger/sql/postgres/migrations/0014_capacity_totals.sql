-- effectledger PostgreSQL schema, migration 14: running capacity totals per pool.
--
-- Admission reads a pool's held and committed units from capacity_totals instead of summing the
-- pool's whole history. Triggers on operations move the units in the same transaction as the
-- state change that moves them (an admission inserts held units; success commits them;
-- rejection and release free them), so no statement that moves units can forget to. A pool's
-- units and pool are fixed once admitted. The totals of existing ledgers are built from their
-- operations here (creating the triggers first holds off writers until this commits);
-- `effectledger capacity check` recomputes and compares them. The index that the old sum read
-- is dropped.

CREATE TABLE capacity_totals (
    tenant_id TEXT    NOT NULL,
    pool      TEXT    NOT NULL,
    shard     INTEGER NOT NULL CHECK (shard >= 0),
    held      BIGINT  NOT NULL DEFAULT 0,
    committed BIGINT  NOT NULL DEFAULT 0,
    freed     BIGINT  NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, pool, shard)
);

-- Each pool's totals are spread over 8 rows, chosen by the server process that moves the units:
-- transactions on different connections rarely wait for one another's row, and a read sums the
-- pool's rows (benchmarks/capacity_pool.py measured one row per pool at half the throughput of
-- separate pools under 8 processes; docs/scaling.md).
CREATE FUNCTION effectledger_capacity_moved() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    held_delta      BIGINT := 0;
    committed_delta BIGINT := 0;
    freed_delta     BIGINT := 0;
BEGIN
    IF NEW.state = 'SUCCEEDED' THEN
        committed_delta := NEW.units;
    ELSIF NEW.state IN ('REJECTED', 'RELEASED') THEN
        freed_delta := NEW.units;
    ELSE
        held_delta := NEW.units;
    END IF;
    IF TG_OP = 'UPDATE' THEN
        IF OLD.state = 'SUCCEEDED' THEN
            committed_delta := committed_delta - OLD.units;
        ELSIF OLD.state IN ('REJECTED', 'RELEASED') THEN
            freed_delta := freed_delta - OLD.units;
        ELSE
            held_delta := held_delta - OLD.units;
        END IF;
    END IF;
    IF held_delta = 0 AND committed_delta = 0 AND freed_delta = 0 THEN
        RETURN NULL;
    END IF;
    INSERT INTO capacity_totals AS t (tenant_id, pool, shard, held, committed, freed)
    VALUES (NEW.tenant_id, NEW.pool, pg_backend_pid() % 8, held_delta, committed_delta,
            freed_delta)
    ON CONFLICT (tenant_id, pool, shard) DO UPDATE SET
        held = t.held + EXCLUDED.held,
        committed = t.committed + EXCLUDED.committed,
        freed = t.freed + EXCLUDED.freed;
    RETURN NULL;
END;
$$;

CREATE TRIGGER operations_capacity_admitted AFTER INSERT ON operations
    FOR EACH ROW WHEN (NEW.pool IS NOT NULL AND NEW.units > 0)
    EXECUTE FUNCTION effectledger_capacity_moved();

CREATE TRIGGER operations_capacity_moved AFTER UPDATE OF state ON operations
    FOR EACH ROW WHEN (NEW.pool IS NOT NULL AND NEW.units > 0 AND OLD.state <> NEW.state)
    EXECUTE FUNCTION effectledger_capacity_moved();

CREATE FUNCTION effectledger_capacity_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'an operation''s pool and units are fixed at admission'
        USING ERRCODE = 'integrity_constraint_violation';
END;
$$;

CREATE TRIGGER operations_capacity_fixed BEFORE UPDATE OF pool, units ON operations
    FOR EACH ROW WHEN (NEW.pool IS DISTINCT FROM OLD.pool OR NEW.units <> OLD.units)
    EXECUTE FUNCTION effectledger_capacity_fixed();

INSERT INTO capacity_totals (tenant_id, pool, shard, held, committed, freed)
SELECT tenant_id, pool, 0,
    sum(CASE WHEN state IN ('READY', 'IN_PROGRESS', 'OUTCOME_UNKNOWN', 'MANUAL_REVIEW',
                            'RETRY_PENDING') THEN units ELSE 0 END),
    sum(CASE WHEN state = 'SUCCEEDED' THEN units ELSE 0 END),
    sum(CASE WHEN state IN ('REJECTED', 'RELEASED') THEN units ELSE 0 END)
FROM operations WHERE pool IS NOT NULL AND units > 0
GROUP BY tenant_id, pool;

DROP INDEX operations_capacity;
