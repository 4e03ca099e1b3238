-- The reference receiver's own database: the effects it performed, one per (collection, key).
CREATE TABLE IF NOT EXISTS effects (
    collection         TEXT    NOT NULL,
    idempotency_key    TEXT    NOT NULL,
    body_sha256        TEXT    NOT NULL,
    body_json          TEXT    NOT NULL,
    provider_reference TEXT    NOT NULL,
    state              TEXT    NOT NULL CHECK (state IN ('processing', 'performed')),
    created_ns         INTEGER NOT NULL,
    PRIMARY KEY (collection, idempotency_key)
);

CREATE TABLE IF NOT EXISTS counters (
    name  TEXT    PRIMARY KEY,
    value INTEGER NOT NULL
);

INSERT OR IGNORE INTO counters (name, value)
VALUES ('submissions', 0), ('lookups', 0), ('conflicts', 0), ('replays', 0);
