-- The simulated receiver's own database: one effect per idempotency key, and its counters.
CREATE TABLE IF NOT EXISTS effects (
    idempotency_key    TEXT PRIMARY KEY,
    fingerprint        TEXT NOT NULL,
    command_json       TEXT NOT NULL,
    provider_reference TEXT NOT NULL,
    created_ns         INTEGER NOT NULL,
    operation_id       TEXT,
    proposal_id        TEXT,
    approval_id        TEXT,
    digest             TEXT,
    amount             INTEGER,
    unit               TEXT
);
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO counters VALUES
    ('submissions', 0), ('lookups', 0), ('conflicts', 0), ('replays', 0);
