-- effectledger SQLite schema, migration 18: the agent's stated reason for a proposal.
--
-- A proposal may carry the reason the agent gave for it: untrusted, model-written text shown to
-- the reviewer as the agent's (escaped like every model-derived string), never part of the
-- digest an approval binds to. The proposal's ProposalRecorded event carries the same text, so
-- the trail key authenticates what the reviewer was shown. Proposals made before have none.
ALTER TABLE proposals ADD COLUMN stated_reason TEXT;
