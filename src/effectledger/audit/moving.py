"""Move a ledger to another store (``effectledger migrate --from URL --to URL``), verified.

The rows are copied by :func:`effectledger.store.copying.copy_ledger`, in one transaction of
the target that commits only after the copy read back equal and :func:`verify_moved` found, in
the target's own rows: every trail's hash chain unbroken up to its operation's head, every event
on exactly one trail, and every tenant's log rebuilt from its leaves reproducing the root and
size of each of its signed checkpoints and its stored head. A failure anywhere leaves the target
empty. Signatures are not checked here (the key is not needed to move a ledger); ``effectledger
audit verify`` checks them on the moved ledger as on any other.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from effectledger.audit.frontier import Frontier
from effectledger.errors import AuditVerificationFailed, InvalidInput
from effectledger.events.chain import verify_chain
from effectledger.events.record import event_from_row
from effectledger.store import Store, Transaction, open_store
from effectledger.store.copying import CopyReport, Progress, access, copy_ledger

__all__ = ["MoveReport", "move_ledger", "verify_moved"]

_PAGE = 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class MoveReport:
    """What moved, and what the target's rows were verified to hold."""

    rows: dict[str, int]
    trails: int
    logs: int
    checkpoints: int


@dataclass(slots=True)
class _Verified:
    trails: int = 0
    logs: int = 0
    checkpoints: int = 0


def _refuse(message: str, reason: str) -> AuditVerificationFailed:
    return AuditVerificationFailed(f"migrate --to: {message}; nothing was committed", reason=reason)


def _rows(
    tx: Transaction, table: str, columns: list[str], order: tuple[str, ...]
) -> list[tuple[Any, ...]]:
    tables = access(tx)
    found: list[tuple[Any, ...]] = []
    after: tuple[Any, ...] | None = None
    while True:
        page = tables.page(table, columns, order, after, _PAGE)
        found.extend(page)
        if len(page) < _PAGE:
            return found
        after = page[-1][: len(order)]


def verify_moved(tx: Transaction, verified: _Verified | None = None) -> None:
    """Check every trail and every log of the ledger ``tx`` reads (see the module's text)."""
    verified = verified if verified is not None else _Verified()
    _verify_trails(tx, verified)
    _verify_logs(tx, verified)


def _verify_trails(tx: Transaction, verified: _Verified) -> None:
    heads = {
        (str(tenant), str(operation)): str(head)
        for tenant, operation, head in _rows(
            tx,
            "operations",
            ["tenant_id", "operation_id", "last_event_hash"],
            ("tenant_id", "operation_id"),
        )
    }
    trails = set(heads)
    for tenant, operation in _rows(
        tx, "audit_events", ["tenant_id", "operation_id"], ("tenant_id", "operation_id")
    ):
        trails.add((str(tenant), str(operation)))
    events = 0
    for tenant, operation in sorted(trails):
        rows = tx.all("events_for_operation", {"tenant_id": tenant, "operation_id": operation})
        try:
            verify_chain([event_from_row(row) for row in rows], head=heads.get((tenant, operation)))
        except Exception as exc:
            raise _refuse(
                f"the trail of {tenant}/{operation} does not verify: {exc}", "event_edited"
            ) from exc
        events += len(rows)
    if events != access(tx).count("audit_events"):
        raise _refuse("some events are on no operation's trail", "event_inserted")
    verified.trails = len(trails)


def _verify_logs(tx: Transaction, verified: _Verified) -> None:
    checkpoints: dict[str, list[tuple[int, int, str, str]]] = {}
    for tenant, seq, size, root, note in _rows(
        tx,
        "log_checkpoints",
        ["tenant_id", "seq", "size", "root_hash", "note"],
        ("tenant_id", "seq"),
    ):
        checkpoints.setdefault(str(tenant), []).append((int(seq), int(size), str(root), str(note)))
    leaves: dict[str, list[tuple[int, str]]] = {}
    for tenant, position, leaf in _rows(
        tx, "log_entries", ["tenant_id", "position", "leaf_hash"], ("tenant_id", "position")
    ):
        leaves.setdefault(str(tenant), []).append((int(position), str(leaf)))
    heads = _rows(
        tx,
        "log_heads",
        ["tenant_id", "size", "root_hash", "frontier", "checkpoint_seq"],
        ("tenant_id",),
    )
    if not set(checkpoints) | set(leaves) <= {str(head[0]) for head in heads}:
        raise _refuse("a log has checkpoints or entries but no head", "checkpoint_inconsistent")
    for tenant_id, size, root, stored_frontier, checkpoint_seq in heads:
        tenant = str(tenant_id)
        frontier = Frontier()
        due = {
            at: (seq, root_hash, note) for seq, at, root_hash, note in checkpoints.get(tenant, [])
        }
        if 0 in due:
            _check_checkpoint(tenant, frontier, *due[0])
        for position, leaf in leaves.get(tenant, []):
            if position != frontier.size:
                raise _refuse(f"{tenant}'s log misses leaf {frontier.size}", "event_deleted")
            frontier.append(bytes.fromhex(leaf))
            if frontier.size in due:
                _check_checkpoint(tenant, frontier, *due[frontier.size])
        latest = max(checkpoints.get(tenant, [(0, 0, "", "")]))
        if (
            frontier.size != int(size)
            or frontier.root().hex() != str(root)
            or frontier.to_hex() != str(stored_frontier)
            or int(checkpoint_seq) != latest[0]
            or latest[1] != frontier.size
        ):
            raise _refuse(
                f"{tenant}'s log head does not match its leaves and latest checkpoint",
                "log_root_mismatch",
            )
        verified.logs += 1
        verified.checkpoints += len(checkpoints.get(tenant, []))


def _check_checkpoint(tenant: str, frontier: Frontier, seq: int, root_hash: str, note: str) -> None:
    body = note.partition("\n\n")[0] + "\n"
    lines = body.split("\n")
    root = frontier.root()
    noted = lines[2] if len(lines) > 3 else ""
    if root.hex() != root_hash or noted != base64.b64encode(root).decode():
        raise _refuse(
            f"{tenant}'s checkpoint #{seq} does not match the root of its first "
            f"{frontier.size} leaves",
            "log_root_mismatch",
        )


def move_ledger(
    from_url: str,
    to_url: str,
    *,
    batch: int = 1000,
    progress: Progress | None = None,
) -> MoveReport:
    """Copy the ledger at ``from_url`` into the empty ledger at ``to_url`` and verify it there.

    The source is opened as it is (it must exist at the current schema version); the target is
    created and migrated if needed. Raises :class:`~effectledger.errors.LedgerNotEmpty` for a
    target that holds rows; on any failure nothing was committed to the target.
    """
    if from_url == to_url:
        raise InvalidInput("migrate --from and --to name the same store", field="to")
    source = open_store(from_url, create=False)
    try:
        target: Store = open_store(to_url)
        try:
            verified = _Verified()
            report: CopyReport = copy_ledger(
                source,
                target,
                batch=batch,
                progress=progress,
                verify=_verifier(verified),
            )
        finally:
            target.close()
    finally:
        source.close()
    return MoveReport(
        rows=dict(report.rows),
        trails=verified.trails,
        logs=verified.logs,
        checkpoints=verified.checkpoints,
    )


def _verifier(verified: _Verified) -> Callable[[Transaction], None]:
    def verify(tx: Transaction) -> None:
        verify_moved(tx, verified)

    return verify
