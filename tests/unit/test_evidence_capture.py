"""Evidence capture: redaction before hashing, the size bound, content addressing."""

from __future__ import annotations

import pytest

from effectledger.errors import InvalidInput
from effectledger.model.evidence import (
    MAX_EVIDENCE_BYTES,
    REDACTED,
    Evidence,
    EvidencePolicy,
    capture,
)


def test_configured_headers_and_fields_are_redacted_before_hashing() -> None:
    """Authorization (by default) and configured body fields are replaced before encoding, so
    neither the stored bytes nor the hash depend on them."""
    policy = EvidencePolicy(redact_fields=frozenset({"card_number"}))
    first = capture(
        {"status": 200},
        policy,
        headers=[("Authorization", "Bearer a"), ("X-Trace", "t")],
        body={"id": "r1", "card": {"card_number": "4111"}},
    )
    second = capture(
        {"status": 200},
        policy,
        headers=[("authorization", "Bearer b"), ("X-Trace", "t")],
        body={"id": "r1", "card": {"card_number": "5500"}},
    )
    assert first.sha256 == second.sha256
    document = first.document()
    assert document["headers"]["authorization"] == REDACTED
    assert document["body"]["card"]["card_number"] == REDACTED
    assert b"4111" not in first.content
    assert b"Bearer" not in first.content


def test_oversized_body_keeps_only_its_hash_and_size() -> None:
    """A body beyond the policy's limit is replaced by its size and SHA-256; the blob fits."""
    policy = EvidencePolicy(max_bytes=1024)
    evidence = capture({"status": 200}, policy, body={"blob": "x" * 10_000})
    assert len(evidence.content) <= 1024
    body = evidence.document()["body"]
    assert body["truncated"] is True
    assert len(body["sha256"]) == 64


def test_reference_names_the_table_and_the_hash() -> None:
    """The reference is evidence_blobs/sha256:<hex of the content>."""
    evidence = Evidence(content=b'{"a":1}')
    assert evidence.reference == "evidence_blobs/sha256:" + evidence.sha256


def test_limits_are_enforced() -> None:
    """A blob over the table's limit, or a policy outside 256..limit, is refused."""
    with pytest.raises(InvalidInput):
        Evidence(content=b"x" * (MAX_EVIDENCE_BYTES + 1))
    with pytest.raises(InvalidInput):
        EvidencePolicy(max_bytes=MAX_EVIDENCE_BYTES + 1)
