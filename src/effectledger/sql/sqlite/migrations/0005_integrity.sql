-- effectledger SQLite schema, migration 5: a concurrency token apart from the event sequence,
-- and approvals that cannot be inserted without the event that records them.
--
-- operations.version now moves only when the operation's state or recorded facts change;
-- operations.event_sequence is the sequence of the latest event of its trail (audit-only events
-- such as a denied admission by another actor move it, not the version).

ALTER TABLE operations ADD COLUMN event_sequence INTEGER NOT NULL DEFAULT 0;

UPDATE operations SET event_sequence = version;

-- A decision is written after its ApprovalGranted / ApprovalDenied / PreauthorizationApplied
-- event, in the same transaction; a row inserted any other way has no such event and is refused.
CREATE TRIGGER approvals_insert_needs_event BEFORE INSERT ON approvals
WHEN NOT EXISTS (
    SELECT 1 FROM audit_events AS e
    JOIN proposals AS p ON p.tenant_id = e.tenant_id AND p.operation_id = e.operation_id
    WHERE p.tenant_id = NEW.tenant_id AND p.proposal_id = NEW.proposal_id
      AND e.evidence_reference = 'approval/' || NEW.approval_id
      AND e.event_type IN ('ApprovalGranted', 'ApprovalDenied', 'PreauthorizationApplied')
)
BEGIN
    SELECT RAISE(ABORT, 'an approval needs the audit event that records it');
END;
