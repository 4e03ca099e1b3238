-- Group commit (effectledger.store.group_postgres): each write of a batch between a savepoint
-- and its release, the whole batch in one BEGIN ... COMMIT of store.sql.

-- name: savepoint
SAVEPOINT member;

-- name: release
RELEASE SAVEPOINT member;

-- name: rollback_to
ROLLBACK TO SAVEPOINT member;
