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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from effectledger.audit.log.frontier import Frontier
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


def _pages(
    tx: Transaction, table: str, columns: list[str], order: tuple[str, ...]
) -> Iterator[tuple[Any, ...]]:
    """Every row of ``table`` in the order of its unique key ``order`` (the key's columns lead
    ``columns``), read a page at a time."""
    tables = access(tx)
    after: tuple[Any, ...] | None = None
    while True:
        page = tables.page(table, columns, order, after, _PAGE)
        yield from page
        if len(page) < _PAGE:
            return
        after = page[-1][: len(order)]


def verify_moved(tx: Transaction, verified: _Verified | None = None) -> None:
    """Check every trail and every log of the ledger ``tx`` reads (see the module's text).

    Reads the events and the log's entries a page at a time: memory stays bounded by a page,
    one trail and one tenant's checkpoints, whatever the ledger's size.
    """
    verified = verified if verified is not None else _Verified()
    _verify_trails(tx, verified)
    _verify_logs(tx, verified)


def _verify_trails(tx: Transaction, verified: _Verified) -> None:
    """Walk the events in trail order beside the operations in key order (the database's own
    order for both, so no comparison is made here): each trail's chain must verify up to its
    operation's head, and every operation must meet its trail."""
    order = ("tenant_id", "operation_id", "sequence")
    columns = list(order) + [
        name for name in access(tx).columns("audit_events") if name not in order
    ]
    operations = _pages(
        tx,
        "operations",
        ["tenant_id", "operation_id", "last_event_hash"],
        ("tenant_id", "operation_id"),
    )
    pending = next(operations, None)
    matched = 0
    trail: list[dict[str, Any]] = []

    def close() -> None:
        nonlocal pending, matched
        if not trail:
            return
        key = (trail[0]["tenant_id"], trail[0]["operation_id"])
        head = None
        if pending is not None and (pending[0], pending[1]) == key:
            head = str(pending[2])
            matched += 1
            pending = next(operations, None)
        try:
            verify_chain([event_from_row(event) for event in trail], head=head)
        except Exception as exc:
            raise _refuse(
                f"the trail of {key[0]}/{key[1]} does not verify: {exc}", "event_edited"
            ) from exc
        verified.trails += 1
        trail.clear()

    for values in _pages(tx, "audit_events", columns, order):
        event = dict(zip(columns, values, strict=True))
        if trail and (event["tenant_id"], event["operation_id"]) != (
            trail[0]["tenant_id"],
            trail[0]["operation_id"],
        ):
            close()
        trail.append(event)
    close()
    if matched != access(tx).count("operations"):
        raise _refuse("an operation has no trail", "event_deleted")


def _verify_logs(tx: Transaction, verified: _Verified) -> None:
    heads = {
        str(tenant): (int(size), str(root), str(frontier), int(seq))
        for tenant, size, root, frontier, seq in _pages(
            tx,
            "log_heads",
            ["tenant_id", "size", "root_hash", "frontier", "checkpoint_seq"],
            ("tenant_id",),
        )
    }
    tenants = set()
    for tenant, _ in _pages(tx, "log_checkpoints", ["tenant_id", "seq"], ("tenant_id", "seq")):
        tenants.add(str(tenant))
    log = _Log(tx, verified)
    for tenant, position, leaf in _pages(
        tx, "log_entries", ["tenant_id", "position", "leaf_hash"], ("tenant_id", "position")
    ):
        log.leaf(str(tenant), int(position), str(leaf))
    tenants |= log.tenants
    if not tenants <= set(heads):
        raise _refuse("a log has checkpoints or entries but no head", "checkpoint_inconsistent")
    for tenant in sorted(heads):
        if tenant not in log.tenants:
            log.start(tenant)
    log.finish()
    for tenant, head in heads.items():
        frontier, latest = log.ends[tenant]
        if (frontier.size, frontier.root().hex(), frontier.to_hex(), latest) != head:
            raise _refuse(
                f"{tenant}'s log head does not match its leaves and latest checkpoint",
                "log_root_mismatch",
            )
        verified.logs += 1


class _Log:
    """One tenant's log at a time, rebuilt leaf by leaf against its checkpoints."""

    def __init__(self, tx: Transaction, verified: _Verified) -> None:
        self.tx = tx
        self.verified = verified
        self.tenants: set[str] = set()
        self.ends: dict[str, tuple[Frontier, int]] = {}
        self.tenant: str | None = None
        self.frontier = Frontier()
        self.due: dict[int, tuple[int, str, str]] = {}
        self.latest = 0

    def start(self, tenant: str) -> None:
        """Finish the tenant in hand and start ``tenant``'s log, empty."""
        self.finish()
        self.tenant = tenant
        self.tenants.add(tenant)
        self.frontier = Frontier()
        self.due = {}
        self.latest = 0
        after = 0
        while True:
            rows = self.tx.all(
                "log_checkpoints_after", {"tenant_id": tenant, "seq": after, "limit": _PAGE}
            )
            for row in rows:
                after = int(row["seq"])
                self.due[int(row["size"])] = (after, str(row["root_hash"]), str(row["note"]))
            if len(rows) < _PAGE:
                break
        self.latest = after
        self._check_due()

    def leaf(self, tenant: str, position: int, leaf: str) -> None:
        """Append ``tenant``'s leaf at ``position``."""
        if tenant != self.tenant:
            self.start(tenant)
        if position != self.frontier.size:
            raise _refuse(f"{tenant}'s log misses leaf {self.frontier.size}", "event_deleted")
        self.frontier.append(bytes.fromhex(leaf))
        self._check_due()

    def _check_due(self) -> None:
        found = self.due.pop(self.frontier.size, None)
        if found is not None and self.tenant is not None:
            _check_checkpoint(self.tenant, self.frontier, *found)
            self.verified.checkpoints += 1

    def finish(self) -> None:
        """Close the tenant in hand: a checkpoint past its last leaf does not verify."""
        if self.tenant is None:
            return
        if self.due:
            raise _refuse(
                f"{self.tenant}'s log has a checkpoint beyond its leaves", "log_root_mismatch"
            )
        self.ends[self.tenant] = (self.frontier, self.latest)
        self.tenant = None


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
