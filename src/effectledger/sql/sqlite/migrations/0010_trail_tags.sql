-- effectledger SQLite schema, migration 10: each event's trail tag.
--
-- A ledger that holds a trail key stores beside each event it writes the key's MAC of the
-- event's hash (t1:<key id>:<hex>), so a claim can tell the ledger's events from rows written
-- around it; the key itself never enters the database. NULL: written without a key (before
-- the ledger had one). The tag is outside the chain body, so hashes and leaves are unchanged.

ALTER TABLE audit_events ADD COLUMN trail_tag TEXT;
