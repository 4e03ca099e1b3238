-- effectledger PostgreSQL schema, migration 15: hash columns hold the hash's bytes.
--
-- A hash was its hex text (64 characters, 67 with the "v2:" of a version 2 hash); it is now its
-- 32 bytes, with the byte 0x02 in front for version 2 (effectledger.store.hashes). The store
-- reads these columns back as the same strings, so every hash, leaf, checkpoint and bundle stays
-- byte for byte as it was. Text the ledger did not write (a hand edit) keeps its UTF-8 bytes.
-- Each table is rewritten once; the append-only triggers are row triggers and do not fire.

ALTER TABLE operations
    ALTER COLUMN fingerprint TYPE BYTEA USING CASE
        WHEN fingerprint ~ '^[0-9a-f]{64}$' THEN decode(fingerprint, 'hex')
        WHEN fingerprint ~ '^v2:[0-9a-f]{64}$' THEN '\x02'::bytea || decode(substr(fingerprint, 4), 'hex')
        ELSE convert_to(fingerprint, 'UTF8') END,
    ALTER COLUMN last_event_hash TYPE BYTEA USING CASE
        WHEN last_event_hash ~ '^[0-9a-f]{64}$' THEN decode(last_event_hash, 'hex')
        WHEN last_event_hash ~ '^v2:[0-9a-f]{64}$'
            THEN '\x02'::bytea || decode(substr(last_event_hash, 4), 'hex')
        ELSE convert_to(last_event_hash, 'UTF8') END;

ALTER TABLE audit_events
    ALTER COLUMN prev_hash TYPE BYTEA USING CASE
        WHEN prev_hash ~ '^[0-9a-f]{64}$' THEN decode(prev_hash, 'hex')
        WHEN prev_hash ~ '^v2:[0-9a-f]{64}$' THEN '\x02'::bytea || decode(substr(prev_hash, 4), 'hex')
        ELSE convert_to(prev_hash, 'UTF8') END,
    ALTER COLUMN event_hash TYPE BYTEA USING CASE
        WHEN event_hash ~ '^[0-9a-f]{64}$' THEN decode(event_hash, 'hex')
        WHEN event_hash ~ '^v2:[0-9a-f]{64}$' THEN '\x02'::bytea || decode(substr(event_hash, 4), 'hex')
        ELSE convert_to(event_hash, 'UTF8') END;

ALTER TABLE proposals
    ALTER COLUMN digest TYPE BYTEA USING CASE
        WHEN digest ~ '^[0-9a-f]{64}$' THEN decode(digest, 'hex')
        WHEN digest ~ '^v2:[0-9a-f]{64}$' THEN '\x02'::bytea || decode(substr(digest, 4), 'hex')
        ELSE convert_to(digest, 'UTF8') END;

ALTER TABLE approvals
    ALTER COLUMN digest TYPE BYTEA USING CASE
        WHEN digest ~ '^[0-9a-f]{64}$' THEN decode(digest, 'hex')
        WHEN digest ~ '^v2:[0-9a-f]{64}$' THEN '\x02'::bytea || decode(substr(digest, 4), 'hex')
        ELSE convert_to(digest, 'UTF8') END;

-- A leaf is always 32 bytes: its text check gives way to one on its bytes.
ALTER TABLE log_entries DROP CONSTRAINT log_entries_leaf_hash_check;
ALTER TABLE log_entries
    ALTER COLUMN leaf_hash TYPE BYTEA USING CASE
        WHEN leaf_hash ~ '^[0-9a-f]{64}$' THEN decode(leaf_hash, 'hex')
        ELSE convert_to(leaf_hash, 'UTF8') END;
ALTER TABLE log_entries
    ADD CONSTRAINT log_entries_leaf_hash_check CHECK (octet_length(leaf_hash) = 32);

-- Only pre-authorizations are counted by kind (their budget): the index holds nothing else.
DROP INDEX approvals_by_kind;
CREATE INDEX approvals_by_kind ON approvals (tenant_id, kind, decided_us)
    WHERE kind = 'preauthorization';
