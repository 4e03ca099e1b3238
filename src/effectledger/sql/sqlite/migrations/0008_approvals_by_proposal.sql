-- effectledger SQLite schema, migration 8: a proposal's approvals found by the proposal.
--
-- Admission reads a proposal's first denial beside the presented approval, a multi-approver
-- policy reads the proposal's other grants, and a perform that names no approval looks for the
-- recorded decision: each of those finds the proposal's few approvals through this index instead
-- of reading every approval of the tenant.

CREATE INDEX approvals_by_proposal ON approvals (tenant_id, proposal_id, decided_us);
