-- effectledger PostgreSQL schema, migration 7: API keys for the HTTP API.
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
    created_us  BIGINT  NOT NULL,
    revoked_us  BIGINT
);

CREATE INDEX api_keys_tenant ON api_keys (tenant_id, created_us);

CREATE FUNCTION api_keys_identity_fixed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.key_id IS DISTINCT FROM OLD.key_id OR NEW.secret_hash IS DISTINCT FROM OLD.secret_hash
       OR NEW.tenant_id IS DISTINCT FROM OLD.tenant_id OR NEW.actor_id IS DISTINCT FROM OLD.actor_id
       OR NEW.roles_json IS DISTINCT FROM OLD.roles_json
       OR NEW.created_us IS DISTINCT FROM OLD.created_us OR OLD.revoked_us IS NOT NULL THEN
        RAISE EXCEPTION 'an API key can only be revoked, once'
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER api_keys_identity_fixed BEFORE UPDATE ON api_keys
    FOR EACH ROW EXECUTE FUNCTION api_keys_identity_fixed();
