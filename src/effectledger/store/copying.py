"""Move a whole ledger from one store to another, all or nothing, and prove the rows arrived.

:func:`copy_ledger` reads the source in one snapshot and writes the target in one transaction:
every table of :data:`TABLES`, in an order that satisfies the schema's keys and triggers, in
batches (progress is reported after each). Before the target's transaction commits, each
table's row count and a SHA-256 digest of its rows read back from the target are compared with
the source's, and the caller's ``verify`` runs on the target's rows (the chains and the logs,
:mod:`effectledger.audit.moving`). Any failure rolls the whole transaction back: the target is
left as empty as it was. A target that holds any row is refused with
:class:`~effectledger.errors.LedgerNotEmpty` before anything is written.

:data:`TABLES` names every table of the schema with the key its rows are read in; a test fails
when a migration adds a table that is not listed here.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from effectledger.errors import InvalidInput, LedgerNotEmpty, StorageError
from effectledger.store import Store, Transaction

__all__ = ["TABLES", "CopyReport", "Progress", "TableAccess", "copy_ledger", "table_names"]

TABLES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("operations", ("tenant_id", "operation_id")),
    ("operation_traces", ("tenant_id", "operation_id")),
    ("attempts", ("tenant_id", "operation_id", "attempt_id")),
    ("audit_events", ("event_id",)),
    ("proposals", ("tenant_id", "proposal_id")),
    ("approvals", ("tenant_id", "approval_id")),
    ("approval_consumptions", ("tenant_id", "approval_id")),
    ("capacity_limits", ("tenant_id", "pool")),
    ("log_pending", ("pending_id",)),
    ("log_entries", ("tenant_id", "position")),
    ("log_heads", ("tenant_id",)),
    ("log_checkpoints", ("tenant_id", "seq")),
    ("checkpoint_cosignatures", ("tenant_id", "seq", "witness_key")),
    ("export_cursors", ("exporter_id", "tenant_id")),
    ("evidence_blobs", ("tenant_id", "sha256")),
    ("api_keys", ("key_id",)),
)
"""Every table moved, parents before children, with the key its rows are read in.

Events come before approvals (an approval's insert checks its event exists). Inserting an event
queues it for sealing (a trigger adds its ``log_pending`` row), so ``log_pending`` is emptied and
refilled from the source, in the source's order, without its ids: the target numbers them."""

RENUMBERED = {"log_pending": "pending_id"}
"""Columns the target numbers itself: left out of the copy and of the digest."""

NOT_MOVED = frozenset({"schema_migrations", "capacity_totals"})
"""Tables the target fills itself: its migrations, and the running capacity totals, which its
triggers build from the operations as they are copied (sharded by the target's own rule)."""

_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]{0,62}")

Progress = Callable[[str, int, int], None]
"""Told ``(table, rows copied so far, rows in all)`` after each batch."""


class TableAccess(Protocol):
    """Whole-table reads and writes of one open transaction (both stores' ``tx.tables()``)."""

    def tables(self) -> list[str]:
        """The schema's table names."""
        ...

    def columns(self, table: str) -> list[str]:
        """The table's column names, in their order."""
        ...

    def count(self, table: str) -> int:
        """How many rows the table holds."""
        ...

    def page(
        self,
        table: str,
        columns: Sequence[str],
        order: Sequence[str],
        after: Sequence[Any] | None,
        limit: int,
    ) -> list[tuple[Any, ...]]:
        """Up to ``limit`` rows after the key ``after`` (from the first with ``None``)."""
        ...

    def insert(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """Insert ``rows`` (values in ``columns`` order)."""
        ...

    def clear(self, table: str) -> None:
        """Delete every row of the table."""
        ...


@dataclass(slots=True)
class CopyReport:
    """What moved: rows and SHA-256 digests per table, equal on both sides."""

    rows: dict[str, int] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)


def access(tx: Transaction) -> TableAccess:
    """The whole-table access of a store's transaction."""
    tables = getattr(tx, "tables", None)
    if tables is None:
        raise InvalidInput("this store cannot move whole tables", reason="store_cannot_copy")
    return cast(TableAccess, tables())


def table_names(store: Store) -> list[str]:
    """The tables of ``store``'s schema (``schema_migrations`` included)."""
    return store.read(lambda tx: access(tx).tables())


def _checked(name: str) -> str:
    if not _IDENTIFIER.fullmatch(name):  # pragma: no cover - the names come from this module
        raise InvalidInput(f"not a table or column name: {name!r}")
    return name


def _value(value: object) -> str:
    if value is None:
        return "n"
    if isinstance(value, bytes | bytearray | memoryview):
        return "b" + bytes(value).hex()
    if isinstance(value, bool):  # pragma: no cover - no boolean columns today
        return f"i{int(value)}"
    if isinstance(value, int):
        return f"i{value}"
    return "s" + str(value)


def _feed(digest: Any, rows: Sequence[Sequence[Any]]) -> None:
    for row in rows:
        digest.update("\x1f".join(_value(value) for value in row).encode() + b"\x1e")


def _columns(source: TableAccess, target: TableAccess, table: str) -> list[str]:
    theirs, ours = source.columns(table), target.columns(table)
    if sorted(theirs) != sorted(ours):
        raise InvalidInput(
            f"the table {table} has other columns in the source than in the target; migrate "
            "both to the same version first",
            reason="schema_mismatch",
            table=table,
        )
    skip = RENUMBERED.get(table)
    return [_checked(name) for name in ours if name != skip]


def _scan(
    tables: TableAccess,
    table: str,
    columns: list[str],
    order: tuple[str, ...],
    batch: int,
    each: Callable[[list[tuple[Any, ...]]], None],
) -> None:
    """Feed every row of ``table`` to ``each``, a batch at a time, in key order."""
    # The key leads the selected columns, so each batch's last key is its rows' first values.
    selected = list(order) + [name for name in columns if name not in order]
    after: tuple[Any, ...] | None = None
    while True:
        rows = tables.page(table, selected, order, after, batch)
        if not rows:
            return
        after = rows[-1][: len(order)]
        positions = [selected.index(name) for name in columns]
        each([tuple(row[index] for index in positions) for row in rows])
        if len(rows) < batch:
            return


def copy_ledger(
    source: Store,
    target: Store,
    *,
    batch: int = 1000,
    progress: Progress | None = None,
    verify: Callable[[Transaction], None] | None = None,
) -> CopyReport:
    """Copy every row of ``source`` into the empty ``target`` in one transaction; verify it.

    Raises :class:`LedgerNotEmpty` if the target holds a row, ``invalid_input`` if a table of
    either schema is not in :data:`TABLES` or their columns differ, and
    :class:`~effectledger.errors.StorageError` if the copy does not read back equal; in every
    case nothing was written to the target.
    """
    if batch < 1:
        raise InvalidInput("batch must be at least 1", field="batch")

    def moved(src: Transaction) -> CopyReport:
        theirs = access(src)
        _refuse_unknown_tables(theirs.tables(), "source")
        totals = {table: theirs.count(table) for table, _ in TABLES}

        def write(dst: Transaction) -> CopyReport:
            # Racing moves into one target take turns: the second finds the first one's rows.
            dst.run("advisory_lock", {"tenant_id": "", "scope": "migrate --to"})
            ours = access(dst)
            _refuse_unknown_tables(ours.tables(), "target")
            filled = {table: n for table, _ in TABLES if (n := ours.count(table))}
            if filled:
                raise LedgerNotEmpty(
                    "the target ledger is not empty: it holds "
                    + ", ".join(f"{n} {table}" for table, n in filled.items())
                    + "; migrate --to needs an empty ledger",
                    tables=filled,
                )
            report = CopyReport()
            for table, order in TABLES:
                report.digests[table] = _copy_table(
                    theirs, ours, table, order, batch, totals[table], progress
                )
                report.rows[table] = totals[table]
            _check_arrived(ours, report, batch)
            if verify is not None:
                verify(dst)
            return report

        return target.write(write, label="migrate --to")

    return source.read(moved)


def _refuse_unknown_tables(names: list[str], side: str) -> None:
    known = {table for table, _ in TABLES} | NOT_MOVED
    unknown = sorted(set(names) - known)
    if unknown:
        raise InvalidInput(
            f"the {side} ledger has tables this version does not move: {', '.join(unknown)}",
            reason="schema_mismatch",
            tables=unknown,
        )


def _copy_table(
    source: TableAccess,
    target: TableAccess,
    table: str,
    order: tuple[str, ...],
    batch: int,
    total: int,
    progress: Progress | None,
) -> str:
    columns = _columns(source, target, table)
    if table in RENUMBERED:  # filled by a trigger while events were copied: the source's rows
        target.clear(table)
    digest = hashlib.sha256()
    done = 0

    def each(rows: list[tuple[Any, ...]]) -> None:
        nonlocal done
        target.insert(table, columns, rows)
        _feed(digest, rows)
        done += len(rows)
        if progress is not None:
            progress(table, done, total)

    _scan(source, table, columns, order, batch, each)
    if progress is not None and total == 0:
        progress(table, 0, 0)
    return digest.hexdigest()


def _check_arrived(target: TableAccess, report: CopyReport, batch: int) -> None:
    """Read every table back from the target: the same rows and the same digest as the source."""
    for table, order in TABLES:
        columns = [name for name in target.columns(table) if name != RENUMBERED.get(table)]
        digest = hashlib.sha256()
        rows = 0

        def each(page: list[tuple[Any, ...]], digest: Any = digest) -> None:
            nonlocal rows
            _feed(digest, page)
            rows += len(page)

        _scan(target, table, columns, order, batch, each)
        if rows != report.rows[table] or digest.hexdigest() != report.digests[table]:
            raise StorageError(
                f"migrate --to: the table {table} read back other than it was sent ({rows} of "
                f"{report.rows[table]} rows); nothing was committed",
                table=table,
            )
