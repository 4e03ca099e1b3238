-- effectledger PostgreSQL schema, migration 16: each log entry names the trail position it sealed.
--
-- A log entry held only the id of the event it sealed. An event deleted after sealing (its trail
-- cut back to the admission, the row set back to READY) left nothing that tied its operation to
-- the entry, so a claim saw a shorter trail and no sign of what was cut. Each entry now records
-- the operation and the sequence it sealed: a claim compares its trail with every sealed position
-- of its operation, and the sealer refuses to seal a second event at a sealed position. Entries
-- sealed before are filled in from their events (an entry whose event is already gone stays
-- empty, and the export still names it).
ALTER TABLE log_entries ADD COLUMN operation_id TEXT;
ALTER TABLE log_entries ADD COLUMN sequence BIGINT CHECK (sequence >= 1);

ALTER TABLE log_entries DISABLE TRIGGER log_entries_append_only;
UPDATE log_entries AS l SET operation_id = e.operation_id, sequence = e.sequence
FROM audit_events AS e
WHERE e.event_id = l.event_id;
ALTER TABLE log_entries ENABLE TRIGGER log_entries_append_only;

-- A claim reads its operation's sealed positions; the sealer looks one up before sealing it.
CREATE UNIQUE INDEX log_entries_by_position ON log_entries (tenant_id, operation_id, sequence);
