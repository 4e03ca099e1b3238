-- effectledger PostgreSQL schema, migration 9: a pool's units summed from its index alone.
--
-- The capacity read sums the units of a pool's operations by state. With the units in the
-- index, that sum reads the index entries of the pool and never the operation rows (before,
-- SQLite's planner read every operation of the tenant instead). It still grows with the pool's
-- history; docs/scaling.md says what would not.

DROP INDEX operations_capacity;
CREATE INDEX operations_capacity ON operations (tenant_id, pool, state, units);
