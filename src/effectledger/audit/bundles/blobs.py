"""Evidence blobs in bundles: every blob an exported event cites travels with it.

An event whose ``evidence_reference`` is ``evidence_blobs/sha256:<hex>`` commits, through its
canonical bytes and so through the signed log, to that SHA-256 of the blob's content. The
exporter and the receipt writer put a ``blob`` line
(:func:`~effectledger.audit.bundles.format.blob_line`) before each such event line, and refuse
(:class:`~effectledger.errors.EvidenceMissing`) to hand on an event whose blob the store no longer
holds; verification requires every cited blob and checks each blob's content against its hash
(:mod:`effectledger.audit.bundles.scan`).
"""

from __future__ import annotations

from collections.abc import Iterable

from effectledger.errors import EvidenceMissing
from effectledger.model.evidence import EVIDENCE_REFERENCE
from effectledger.model.operations import Row
from effectledger.store import Transaction

__all__ = ["cited_hash", "require_blobs", "stored_blobs"]


def cited_hash(reference: object) -> str | None:
    """The SHA-256 (hex) an evidence reference cites, or ``None`` if it names no blob."""
    if not isinstance(reference, str):
        return None
    match = EVIDENCE_REFERENCE.fullmatch(reference)
    return None if match is None else match.group(1)


def stored_blobs(tx: Transaction, tenant_id: str, rows: Iterable[Row]) -> dict[str, bytes]:
    """The stored content of every blob the event ``rows`` cite, by hash, as stored.

    Raises :class:`~effectledger.errors.EvidenceMissing` for a blob the store does not hold
    for ``tenant_id``. The content is returned as it is, even if it no longer matches its hash:
    the bundle carries what the database holds and verification names the edit.
    """
    found: dict[str, bytes] = {}
    for row in rows:
        digest = cited_hash(row["evidence_reference"])
        if digest is None or digest in found:
            continue
        blob = tx.one("evidence_blob_get", {"tenant_id": tenant_id, "sha256": digest})
        if blob is None:
            raise EvidenceMissing(
                f"event {row['event_id']} cites evidence sha256:{digest} that the store no "
                "longer holds",
                reference=row["evidence_reference"],
                event_id=row["event_id"],
            )
        found[digest] = bytes(blob["content"])
    return found


def require_blobs(tx: Transaction, tenant_id: str, rows: Iterable[Row]) -> None:
    """Raise :class:`~effectledger.errors.EvidenceMissing` unless every cited blob is stored."""
    stored_blobs(tx, tenant_id, rows)
