-- effectledger SQLite schema, migration 10: the reviewer's queues, read a page at a time.
--
-- The queue lists a tenant's proposals that still wait for a decision, soonest-expiring or
-- newest first, a page at a time. Both orders walk one index from the live end (unexpired
-- proposals, or the newest) and stop after a page, instead of reading every proposal ever made. The manual-review queue reads
-- the operations in review alone, soonest deadline first.

CREATE INDEX proposals_by_expiry ON proposals (tenant_id, expires_us, proposal_id);
CREATE INDEX proposals_by_age ON proposals (tenant_id, created_us, proposal_id);
CREATE INDEX operations_in_review
    ON operations (tenant_id, review_deadline_us, operation_id)
    WHERE state = 'MANUAL_REVIEW';
