"""Evidence blobs in the ledger's store: kept with the event that cites them, read back by hash.

The records and their redaction are :mod:`effectledger.model.evidence`; this module is the part
that touches the database.
"""

from __future__ import annotations

from effectledger.errors import EvidenceMissing, IntegrityError
from effectledger.model.evidence import EVIDENCE_REFERENCE, Evidence
from effectledger.store import Store, Transaction

__all__ = ["load_evidence", "store_evidence"]


def store_evidence(tx: Transaction, tenant_id: str, evidence: Evidence, *, now_us: int) -> str:
    """Keep ``evidence`` for ``tenant_id`` inside ``tx`` (once per content); its reference."""
    tx.run(
        "evidence_blob_insert",
        {
            "tenant_id": tenant_id,
            "sha256": evidence.sha256,
            "media_type": evidence.media_type,
            "size_bytes": len(evidence.content),
            "content": evidence.content,
            "now_us": now_us,
        },
    )
    return evidence.reference


def load_evidence(store: Store, tenant_id: str, reference: str) -> Evidence | None:
    """The blob an event's evidence reference names; ``None`` if the reference names no blob.

    A reference of the form ``evidence_blobs/sha256:<hex>`` commits to that blob: if the store
    holds no such blob for ``tenant_id`` (it was deleted, or the reference is another
    tenant's), :class:`~effectledger.errors.EvidenceMissing` is raised, never "no evidence".
    The content is re-hashed: a blob whose bytes no longer match its address raises
    :class:`~effectledger.errors.IntegrityError` rather than being returned.
    """
    match = EVIDENCE_REFERENCE.fullmatch(reference)
    if match is None:
        return None
    row = store.one("evidence_blob_get", {"tenant_id": tenant_id, "sha256": match.group(1)})
    if row is None:
        raise EvidenceMissing(
            f"the evidence {reference} is not stored for tenant {tenant_id}", reference=reference
        )
    found = Evidence(content=bytes(row["content"]), media_type=str(row["media_type"]))
    if found.sha256 != match.group(1):
        raise IntegrityError("the stored evidence does not match its hash", reference=reference)
    return found
