-- Statements that move a whole ledger from one store to another (effectledger migrate --from/--to).
-- A table's and its columns' names cannot be bound parameters: the store fills {table},
-- {columns}, {order}, {after} and {values} as quoted identifiers (psycopg.sql.Identifier) of
-- names it has checked against the schema itself, and with placeholders.

-- name: copy_tables
SELECT table_name AS name FROM information_schema.tables
WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name;

-- name: copy_columns
SELECT column_name AS name FROM information_schema.columns
WHERE table_schema = current_schema() AND table_name = %(table)s ORDER BY ordinal_position;

-- name: copy_count
SELECT count(*) AS n FROM {table};

-- name: copy_first
SELECT {columns} FROM {table} ORDER BY {order} LIMIT %(limit)s;

-- name: copy_after
SELECT {columns} FROM {table} WHERE ({order}) > ({after}) ORDER BY {order} LIMIT %(limit)s;

-- name: copy_insert
INSERT INTO {table} ({columns}) VALUES ({values});

-- name: copy_clear
DELETE FROM {table};
