-- effectledger SQLite schema, migration 7: API keys for the HTTP API.
--
-- A key is found by its public key_id and checked against the SHA-256 of the whole secret token;
-- the token itself is never stored. A key's identity (tenant, actor, roles) never changes; it can
-- only be revoked, once.

CREATE TABLE api_keys (
    key_id      TEXT    NOT NULL PRIMARY KEY,
    secret_hash TEXT    NOT NULL,
    tenant_id   TEXT    NOT NULL,
    actor_id    TEXT    NOT NULL,
    roles_json  TEXT    NOT NULL,
    created_us  INTEGER NOT NULL,
    revoked_us  INTEGER
) WITHOUT ROWID;

CREATE INDEX api_keys_tenant ON api_keys (tenant_id, created_us);

CREATE TRIGGER api_keys_identity_fixed BEFORE UPDATE ON api_keys
WHEN NEW.key_id IS NOT OLD.key_id OR NEW.secret_hash IS NOT OLD.secret_hash
  OR NEW.tenant_id IS NOT OLD.tenant_id OR NEW.actor_id IS NOT OLD.actor_id
  OR NEW.roles_json IS NOT OLD.roles_json OR NEW.created_us IS NOT OLD.created_us
  OR OLD.revoked_us IS NOT NULL
BEGIN
    SELECT RAISE(ABORT, 'an API key can only be revoked, once');
END;
