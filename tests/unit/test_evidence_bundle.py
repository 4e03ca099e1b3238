"""Event bytes, hashes and bundle lines: what an outside verifier recomputes."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from effectledger.audit.bundles.format import event_line
from effectledger.audit.bundles.reader import (
    parse_event_line,
    parse_line,
    scan_event_line,
    text_bytes,
)
from effectledger.events.chain import GENESIS_HASH, event_body, event_hash
from effectledger.events.record import entry_bytes, hash_of_entry, leaf_of_entry

TEXT = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=20)
DETAILS = st.dictionaries(TEXT, st.one_of(st.integers(-(2**53 - 1), 2**53 - 1), TEXT, st.none()))


def _body(**overrides: object) -> dict[str, object]:
    fields: dict[str, object] = {
        "event_id": "e" * 32,
        "tenant_id": "acme",
        "operation_id": "op-1",
        "attempt_id": None,
        "sequence": 1,
        "actor": "alice",
        "event_type": "OperationAdmitted",
        "recorded_us": 1_767_225_600_000_000,
        "evidence_reference": "approval/1",
        "details": {"revision": "rev-1"},
        "observation_id": None,
        "prev_hash": GENESIS_HASH,
    }
    fields.update(overrides)
    return event_body(**fields)  # type: ignore[arg-type]


def test_hashes_follow_the_documented_formulas() -> None:
    """event_hash is SHA-256 of the domain and the bytes; the leaf hash is SHA-256(0x00 ‖ bytes)."""
    body = _body()
    data = entry_bytes(body)
    assert data == json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    assert hash_of_entry(data) == event_hash(body)
    v2 = hashlib.sha256(b"effectledger/event/v2\n" + data).hexdigest()
    assert hash_of_entry(data) == "v2:" + v2
    v1 = hashlib.sha256(b"effectledger/event/v1\n" + data).hexdigest()
    assert hash_of_entry(data, 1) == event_hash(body, 1) == v1
    assert leaf_of_entry(data) == hashlib.sha256(b"\x00" + data).digest()


@given(DETAILS, TEXT, st.integers(1, 2**40), st.integers(0, 2**40))
def test_the_fast_slice_equals_a_full_parse(
    details: dict[str, object], reference: str, sequence: int, position: int
) -> None:
    """Slicing a canonical event line yields exactly what parsing and re-encoding it yields."""
    body = _body(details=details, evidence_reference=reference, sequence=sequence)
    data = entry_bytes(body)
    line = event_line(data, hash_of_entry(data), leaf_of_entry(data), position)
    parsed = parse_event_line(line.rstrip(b"\n"))
    assert parsed.entry == data
    assert parsed.position == position
    assert parsed.sequence == sequence
    assert (parsed.event_id, parsed.operation_id, parsed.tenant_id) == ("e" * 32, "op-1", "acme")
    assert parsed.prev_hash == GENESIS_HASH
    assert parsed.event_hash == parsed.stated_event_hash
    assert parsed.body() == body
    assert scan_event_line(line.rstrip(b"\n")) == (
        parsed.leaf_hash,
        parsed.event_hash.encode(),
        position,
        b"op-1",
        GENESIS_HASH.encode(),
        sequence,
        b"acme",
    )


def test_an_id_with_escapes_is_scanned_as_its_canonical_text() -> None:
    """An operation id that needs JSON escapes is scanned as its escaped text, parsed as itself."""
    body = _body(operation_id='op "quoted"')
    data = entry_bytes(body)
    line = event_line(data, hash_of_entry(data), leaf_of_entry(data), 0).rstrip(b"\n")
    scanned = scan_event_line(line)
    assert scanned is not None
    assert scanned[3] == text_bytes('op "quoted"') == b'op \\"quoted\\"'
    assert parse_event_line(line).operation_id == 'op "quoted"'


def test_a_v1_event_line_still_parses_and_scans() -> None:
    """A line of an event written before v2 (bare hex hash, v1 domain) verifies by its own rule."""
    body = _body(prev_hash="1" * 64)
    data = entry_bytes(body, 1)
    line = event_line(data, hash_of_entry(data, 1), leaf_of_entry(data), 4).rstrip(b"\n")
    scanned = scan_event_line(line)
    assert scanned is not None
    assert scanned[1] == hash_of_entry(data, 1).encode()
    parsed = parse_event_line(line)
    assert parsed.event_hash == parsed.stated_event_hash == hash_of_entry(data, 1)


def test_a_line_whose_stated_hash_differs_leaves_the_fast_path() -> None:
    """The fast path only takes a line whose stated hashes it reproduces."""
    data = entry_bytes(_body())
    line = event_line(data, "0" * 64, leaf_of_entry(data), 0).rstrip(b"\n")
    assert scan_event_line(line) is None
    assert parse_event_line(line).stated_event_hash == "0" * 64


@pytest.mark.parametrize(
    "line",
    [
        b"[]",
        b'{"type":"event"}',
        b'{"type":"mystery"}',
        b'{"entry":{"a":1},"event_hash":"x","leaf_hash":"y","position":0,"type":"event"}',
        b'{"entry":{"actor":1.5',
    ],
)
def test_malformed_lines_are_value_errors(line: bytes) -> None:
    """A line that is not a well-formed bundle line raises ValueError, never anything else."""
    with pytest.raises(ValueError):
        parse_line(line)


@pytest.mark.parametrize(
    "line",
    [
        b'{"format":"effectledger-evidence/1","kind":"log","origin":"effectledger/acme",'
        b'"tenant_id":"globex","tenant_id":"acme","type":"bundle"}',
        b'{"note":"x","note":"y","seq":1,"type":"checkpoint"}',
        b'{"note":"x","seq":1,"type":"checkpoint"}\r',
        b'\xef\xbb\xbf{"note":"x","seq":1,"type":"checkpoint"}',
        b'{"note":"x", "seq":1,"type":"checkpoint"}',
        b'{"seq":1,"note":"x","type":"checkpoint"}',
        b'{"note":"\\u0078","seq":1,"type":"checkpoint"}',
    ],
)
def test_a_line_that_is_not_its_own_canonical_encoding_is_refused(line: bytes) -> None:
    """Duplicate keys, CR, a BOM, spacing, key order and needless escapes are all ValueErrors."""
    with pytest.raises(ValueError):
        parse_line(line)


def test_an_event_line_with_a_duplicate_key_is_refused_whatever_its_hashes() -> None:
    """A forged value before the genuine one inside the entry is refused, not re-encoded."""
    data = entry_bytes(_body())
    line = event_line(data, hash_of_entry(data), leaf_of_entry(data), 0).rstrip(b"\n")
    forged = line.replace(b'"actor":"alice"', b'"actor":"mallory","actor":"alice"', 1)
    assert json.loads(forged)["entry"]["actor"] == "alice"
    assert scan_event_line(forged) is None
    with pytest.raises(ValueError, match="duplicate key"):
        parse_line(forged)


def test_an_empty_bundle_never_verifies() -> None:
    """No bytes: ``bundle_malformed``; with a kept checkpoint: ``checkpoint_inconsistent``."""
    from effectledger.audit.bundles.verify import verify_bundle
    from effectledger.audit.log.tlog import Checkpoint, sign_checkpoint
    from tests.support.evidence import SIGNER

    kept = sign_checkpoint(Checkpoint("effectledger/acme", 3, bytes(32)), [SIGNER])
    alone = verify_bundle(b"", [SIGNER.verifier()])
    assert [f.code for f in alone.findings] == ["bundle_malformed"]
    assert not alone.ok
    withheld = verify_bundle(b"", [SIGNER.verifier()], trusted_checkpoints=[kept])
    assert [f.code for f in withheld.findings] == ["checkpoint_inconsistent"]


def _signed_bundle(bodies: list[dict[str, object]]) -> bytes:
    """A log bundle of ``bodies`` (one operation's chain, in order) under one checkpoint."""
    from effectledger.audit.bundles.format import checkpoint_line, header_line
    from effectledger.audit.log.merkle import MerkleTree
    from effectledger.audit.log.tlog import Checkpoint, sign_checkpoint
    from tests.support.evidence import SIGNER

    lines, tree, previous = [header_line("acme")], MerkleTree(), GENESIS_HASH
    for position, body in enumerate(bodies):
        data = entry_bytes({**body, "prev_hash": previous, "sequence": position + 1})
        previous = hash_of_entry(data)
        tree.append(leaf_of_entry(data))
        lines.append(event_line(data, previous, leaf_of_entry(data), position))
    note = sign_checkpoint(Checkpoint("effectledger/acme", tree.size, tree.root()), [SIGNER])
    return b"".join([*lines, checkpoint_line(1, note)])


@pytest.mark.parametrize("operation_id", ["op-1", 'op "quoted"', "op \\ back"])
def test_the_verifiers_loop_takes_escaped_ids_by_the_exact_path(operation_id: str) -> None:
    """A chain whose operation id needs escapes verifies like a plain one, and an edited event
    of it is still named: the loop's loose pattern leaves such lines to the exact parser."""
    from effectledger.audit.bundles.verify import verify_bundle
    from tests.support.evidence import VERIFIER_KEY

    bodies = [_body(operation_id=operation_id, event_id=f"{n:032x}") for n in range(3)]
    bundle = _signed_bundle(bodies)
    report = verify_bundle(bundle, [VERIFIER_KEY])
    assert report.ok, report.findings
    assert (report.events, report.operations) == (3, 1)
    edited = bundle.replace(b'"actor":"alice"', b'"actor":"mallory"', 1)
    assert not verify_bundle(edited, [VERIFIER_KEY]).ok


@pytest.mark.parametrize("operation_id", ["op-1", 'op "quoted"'])
def test_the_blob_an_event_cites_is_its_own_reference_not_one_its_details_spell(
    operation_id: str,
) -> None:
    """The scan notes the blob the body's own evidence_reference cites, on the fast path and the
    exact one alike, and not a blob reference spelled inside the details or another string."""
    from effectledger.audit.bundles.reader import cited_blob
    from effectledger.audit.bundles.scan import scan_bundle

    spelled = "evidence_blobs/sha256:" + "a" * 64
    details = {"evidence_reference": spelled, "note": f',"evidence_reference":"{spelled}"'}
    own = "evidence_blobs/sha256:" + "b" * 64
    bodies = [
        _body(operation_id=operation_id, event_id="1" * 32, details=details),
        _body(operation_id=operation_id, event_id="2" * 32, details=details, actor=spelled),
        _body(
            operation_id=operation_id, event_id="3" * 32, details=details, evidence_reference=own
        ),
    ]
    bodies[1]["evidence_reference"] = None
    scan = scan_bundle(_signed_bundle(bodies))
    assert scan.cited == {"b" * 64: 2}
    assert [cited_blob(entry_bytes(body)) for body in bodies] == [None, None, "b" * 64]
