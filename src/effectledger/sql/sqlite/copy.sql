-- Statements that move a whole ledger from one store to another (effectledger migrate --from/--to).
-- A table's and its columns' names cannot be bound parameters: the store fills {table},
-- {columns}, {order}, {after} and {values} with names it has checked against the schema itself
-- (each one quoted), and with placeholders.

-- name: copy_tables
SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name;

-- name: copy_columns
SELECT name FROM pragma_table_info(:table) ORDER BY cid;

-- name: copy_count
SELECT count(*) AS n FROM {table};

-- name: copy_first
SELECT {columns} FROM {table} ORDER BY {order} LIMIT :limit;

-- name: copy_after
SELECT {columns} FROM {table} WHERE ({order}) > ({after}) ORDER BY {order} LIMIT :limit;

-- name: copy_insert
INSERT INTO {table} ({columns}) VALUES ({values});

-- name: copy_clear
DELETE FROM {table};
