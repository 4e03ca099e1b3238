-- Group commit (effectledger.store.group_sqlite): each write of a batch between a savepoint
-- and its release, the whole batch in one BEGIN IMMEDIATE ... COMMIT of store.sql.

-- name: savepoint
SAVEPOINT member;

-- name: release
RELEASE member;

-- name: rollback_to
ROLLBACK TO member;
