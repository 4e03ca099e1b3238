"""Tampering with an exported bundle file, for real, and the stable code verify names it by."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from effectledger import Context, ManualClock, SimulatedReceiver
from effectledger.audit.bundles.export import export_log
from effectledger.audit.bundles.format import (
    checkpoint_line,
    consistency_line,
    event_line,
    header_line,
)
from effectledger.audit.bundles.verify import VerificationReport
from effectledger.audit.keys.signers import Signer
from effectledger.audit.log.merkle import MerkleTree
from effectledger.audit.log.tlog import Checkpoint, sign_checkpoint
from effectledger.audit.sealing.sealer import LogSealer
from effectledger.errors import AuditVerificationFailed
from effectledger.events.chain import GENESIS_HASH
from effectledger.events.record import entry_bytes, hash_of_entry, leaf_of_entry
from effectledger.ledger import Ledger
from effectledger.store import Store
from tests.support.evidence import (
    ROGUE_SIGNER,
    SIGNER,
    VERIFIER_KEY,
    canonical_line,
    event_index,
    make_history,
    parsed,
    read_lines,
    write_lines,
)
from tests.support.evidence import (
    verify_both_ways as verify_bundle,
)


@pytest.fixture
def bundle(
    ledger: Ledger,
    context: Context,
    receiver: SimulatedReceiver,
    store: Store,
    clock: ManualClock,
    tmp_path: Path,
) -> Path:
    """A genuine bundle of the mixed history: 12 events, 3 checkpoints, verified."""
    make_history(ledger, receiver, context)
    LogSealer(store, SIGNER, clock=clock, batch_size=5).seal("acme")
    path = tmp_path / "acme.jsonl"
    export_log(store, "acme", path, clock=clock)
    assert verify_bundle(path, [VERIFIER_KEY]).ok
    return path


def _codes(report: VerificationReport) -> list[str]:
    return [finding.code for finding in report.findings]


def _primary(path: Path, **options: Any) -> str:
    report = verify_bundle(path, [VERIFIER_KEY], **options)
    assert not report.ok
    with pytest.raises(AuditVerificationFailed) as raised:
        report.raise_for_findings()
    assert raised.value.reason == report.findings[0].code
    return report.findings[0].code


def _event_lines(lines: list[bytes]) -> list[int]:
    return [i for i, line in enumerate(lines) if parsed(line)["type"] == "event"]


def _renumber(lines: list[bytes]) -> list[bytes]:
    """Give the remaining event lines contiguous positions, as a careful tamperer would."""
    out, position = [], 0
    for line in lines:
        value = parsed(line)
        if value["type"] == "event":
            value["position"] = position
            position += 1
            line = canonical_line(value)
        out.append(line)
    return out


def _rewrite(
    lines: list[bytes], edit: Callable[[dict[str, Any]], None], signer: Signer | None
) -> list[bytes]:
    """Edit events and recompute every hash, chain link and leaf consistently; re-sign the log
    with ``signer``, or keep the genuine checkpoints when it is ``None``."""
    heads: dict[str, str] = {}
    leaves: list[bytes] = []
    events: list[bytes] = []
    for line in lines:
        value = parsed(line)
        if value["type"] != "event":
            continue
        entry = value["entry"]
        edit(entry)
        entry["prev_hash"] = heads.get(entry["operation_id"], GENESIS_HASH)
        data = entry_bytes(entry)
        heads[entry["operation_id"]] = hash_of_entry(data)
        leaves.append(leaf_of_entry(data))
        events.append(event_line(data, hash_of_entry(data), leaves[-1], len(leaves) - 1))
    if signer is None:
        signed = [line for line in lines if parsed(line)["type"] in ("checkpoint", "consistency")]
    else:
        tree = MerkleTree(leaves)
        note = sign_checkpoint(Checkpoint("effectledger/acme", tree.size, tree.root()), [signer])
        signed = [checkpoint_line(1, note)]
    return [header_line("acme"), *events, *signed]


def test_an_untouched_bundle_verifies(bundle: Path) -> None:
    """The genuine export verifies with the trusted key and names its signer."""
    report = verify_bundle(bundle, [VERIFIER_KEY])
    assert report.ok
    assert report.signers == (SIGNER.name,)


def test_an_edited_event_is_named(bundle: Path) -> None:
    """Changing an event's provider reference in the file is ``event_edited`` at that event."""
    lines = read_lines(bundle)
    index = event_index(lines, "op-ok", "ProviderAcceptanceConfirmed")
    value = parsed(lines[index])
    value["entry"]["details"]["provider_reference"] = "rcpt-forged"
    lines[index] = canonical_line(value)
    write_lines(bundle, lines)
    assert _primary(bundle) == "event_edited"
    report = verify_bundle(bundle, [VERIFIER_KEY])
    assert report.findings[0].event_id == value["entry"]["event_id"]


def test_a_deleted_event_is_named(bundle: Path) -> None:
    """Removing the middle event of an operation's chain is ``event_deleted``."""
    lines = read_lines(bundle)
    del lines[event_index(lines, "op-lost", "AttemptPrepared")]
    write_lines(bundle, lines)
    assert _primary(bundle) == "event_deleted"
    assert "op-lost" in verify_bundle(bundle, [VERIFIER_KEY]).findings[0].message


def test_a_deleted_event_with_renumbered_positions_is_named(bundle: Path) -> None:
    """Removing an event and closing the position gap is still ``event_deleted``."""
    lines = read_lines(bundle)
    del lines[event_index(lines, "op-lost", "AttemptPrepared")]
    write_lines(bundle, _renumber(lines))
    assert _primary(bundle) == "event_deleted"


def test_reordered_events_are_named(bundle: Path) -> None:
    """Swapping two event lines is ``event_reordered``."""
    lines = read_lines(bundle)
    first, second = _event_lines(lines)[5:7]
    lines[first], lines[second] = lines[second], lines[first]
    write_lines(bundle, lines)
    assert _primary(bundle) == "event_reordered"


def test_reordered_events_with_swapped_positions_are_named(bundle: Path) -> None:
    """Swapping two events of one operation and their positions is ``event_reordered``."""
    lines = read_lines(bundle)
    first = event_index(lines, "op-lost", "AttemptPrepared")
    second = event_index(lines, "op-lost", "SubmissionOutcomeUnknown")
    lines[first], lines[second] = lines[second], lines[first]
    write_lines(bundle, _renumber(lines))
    assert _primary(bundle) == "event_reordered"


@pytest.mark.parametrize("where", ["end", "middle"])
def test_an_inserted_event_is_named(bundle: Path, where: str) -> None:
    """A fabricated, correctly chained acceptance of the lost operation is ``event_inserted``."""
    lines = read_lines(bundle)
    last = parsed(lines[event_index(lines, "op-lost", "SubmissionOutcomeUnknown")])
    forged = {
        **last["entry"],
        "event_id": "f" * 32,
        "event_type": "ProviderAcceptanceConfirmed",
        "details": {"outcome": "Accepted", "provider_reference": "rcpt-forged"},
        "evidence_reference": "reply/forged",
        "prev_hash": last["event_hash"],
        "sequence": last["entry"]["sequence"] + 1,
    }
    data = entry_bytes(forged)
    line = event_line(data, hash_of_entry(data), leaf_of_entry(data), 12)
    if where == "end":
        lines.insert(max(_event_lines(lines)) + 1, line)
    else:
        lines.insert(event_index(lines, "op-lost", "SubmissionOutcomeUnknown") + 1, line)
        lines = _renumber(lines)
    write_lines(bundle, lines)
    assert _primary(bundle) == "event_inserted"


@pytest.mark.parametrize("renumber", [False, True])
def test_a_deleted_operation_is_named(bundle: Path, renumber: bool) -> None:
    """Removing every event of one operation is ``operation_deleted``."""
    lines = read_lines(bundle)
    kept = [
        line for line in lines if parsed(line).get("entry", {}).get("operation_id") != "op-rejected"
    ]
    assert len(kept) == len(lines) - 3
    write_lines(bundle, _renumber(kept) if renumber else kept)
    assert _primary(bundle) == "operation_deleted"


def test_a_history_rewritten_and_re_signed_with_another_key_is_named(bundle: Path) -> None:
    """A consistent rewrite signed with a key the reviewer does not trust is ``unknown_key``."""

    def forge(entry: dict[str, Any]) -> None:
        if entry["event_type"] == "SubmissionOutcomeUnknown":
            entry["event_type"] = "ProviderAcceptanceConfirmed"

    write_lines(bundle, _rewrite(read_lines(bundle), forge, ROGUE_SIGNER))
    assert verify_bundle(bundle, [ROGUE_SIGNER.verifier()]).ok  # internally consistent
    assert _primary(bundle) == "unknown_key"


def test_a_consistent_rewrite_under_genuine_checkpoints_is_named(bundle: Path) -> None:
    """Recomputing every hash after an edit still fails the signed roots: ``log_root_mismatch``."""

    def forge(entry: dict[str, Any]) -> None:
        if entry["event_type"] == "PermanentRejection":
            entry["evidence_reference"] = "reply/forged"

    write_lines(bundle, _rewrite(read_lines(bundle), forge, None))
    assert _primary(bundle) == "log_root_mismatch"


def test_a_checkpoint_inconsistent_with_an_earlier_one_is_named(bundle: Path) -> None:
    """A checkpoint the genuine key signed over a forked tree is ``checkpoint_inconsistent``."""
    lines = read_lines(bundle)
    forked = Checkpoint("effectledger/acme", 13, bytes(range(32)))
    lines.append(consistency_line(12, 13, [bytes(32)] * 4))
    lines.append(checkpoint_line(4, sign_checkpoint(forked, [SIGNER])))
    write_lines(bundle, lines)
    assert _primary(bundle) == "checkpoint_inconsistent"
    del lines[-2]  # without a proof line, the events decide
    write_lines(bundle, lines)
    assert _primary(bundle) == "checkpoint_inconsistent"


def test_two_roots_for_one_size_are_inconsistent(bundle: Path) -> None:
    """Two signed checkpoints of the same size with different roots are inconsistent."""
    lines = read_lines(bundle)
    forked = Checkpoint("effectledger/acme", 12, bytes(range(32)))
    lines.append(checkpoint_line(4, sign_checkpoint(forked, [SIGNER])))
    write_lines(bundle, lines)
    assert _primary(bundle) == "checkpoint_inconsistent"


def test_a_truncated_history_fails_against_a_kept_checkpoint(bundle: Path) -> None:
    """A bundle that ends before a checkpoint the reviewer kept is ``checkpoint_inconsistent``."""
    lines = read_lines(bundle)
    kept = parsed([line for line in lines if parsed(line)["type"] == "checkpoint"][-1])["note"]
    last_kept = max(i for i, line in enumerate(lines) if parsed(line).get("seq") == 2)
    write_lines(bundle, lines[: last_kept + 1])
    assert verify_bundle(bundle, [VERIFIER_KEY]).ok  # on its own, a shorter log is fine
    assert _primary(bundle, trusted_checkpoints=[kept]) == "checkpoint_inconsistent"


def test_a_corrupted_signature_is_named(bundle: Path) -> None:
    """Flipping a byte of a checkpoint's signature is ``checkpoint_signature_invalid``."""
    lines = read_lines(bundle)
    index = next(i for i, line in enumerate(lines) if parsed(line)["type"] == "checkpoint")
    value = parsed(lines[index])
    body, signature = value["note"].rsplit(" ", 1)
    value["note"] = (
        body + " " + ("A" if signature[10] != "A" else "B").join((signature[:10], signature[11:]))
    )
    lines[index] = canonical_line(value)
    write_lines(bundle, lines)
    assert _primary(bundle) == "checkpoint_signature_invalid"


def test_a_garbled_line_is_named(bundle: Path) -> None:
    """A line that is not a bundle line is ``bundle_malformed``."""
    lines = read_lines(bundle)
    lines.insert(3, b"this is not json\n")
    write_lines(bundle, lines)
    assert _primary(bundle) == "bundle_malformed"


def test_a_reformatted_but_unchanged_event_is_refused(bundle: Path) -> None:
    """Only the canonical bytes are a line: a re-spaced, re-ordered event line is malformed."""
    lines = read_lines(bundle)
    index = _event_lines(lines)[3]
    value = parsed(lines[index])
    lines[index] = json.dumps(dict(reversed(list(value.items()))), indent=None).encode() + b"\n"
    assert lines[index] != canonical_line(value)
    write_lines(bundle, lines)
    assert _primary(bundle) == "bundle_malformed"


def _duplicate(line: bytes, key: bytes, forged: bytes) -> bytes:
    """``line`` with a forged ``"key":value`` pair inserted before the genuine one."""
    at = line.index(b'"' + key + b'":')
    return line[:at] + b'"' + key + b'":' + forged + b"," + line[at:]


@pytest.mark.parametrize(
    ("what", "key", "forged"),
    [
        ("event", b"actor", b'"mallory"'),
        ("event", b"event_type", b'"ProviderAcceptanceConfirmed"'),
        ("event", b"leaf_hash", b'"' + b"0" * 64 + b'"'),
        ("checkpoint", b"note", b'"forged note"'),
        ("bundle", b"tenant_id", b'"globex"'),
    ],
)
def test_a_duplicate_key_with_the_genuine_value_last_is_refused(
    bundle: Path, what: str, key: bytes, forged: bytes
) -> None:
    """A forged value before the genuine one (read by first-value readers) is malformed."""
    lines = read_lines(bundle)
    index = next(i for i, line in enumerate(lines) if parsed(line)["type"] == what)
    if what == "event" and key != b"leaf_hash":
        index = _event_lines(lines)[4]
    lines[index] = _duplicate(lines[index], key, forged)
    assert parsed(lines[index]) == parsed(read_lines(bundle)[index])  # last value wins: genuine
    write_lines(bundle, lines)
    report = verify_bundle(bundle, [VERIFIER_KEY])
    assert _primary(bundle) == "bundle_malformed", report.findings
    assert f"line {index + 1}" in report.findings[0].message


@pytest.mark.parametrize("spelling", ["crlf", "bom", "space", "escaped"])
def test_a_line_in_another_spelling_is_refused(bundle: Path, spelling: str) -> None:
    """CRLF endings, a byte order mark, extra spacing or needless escapes are malformed."""
    lines = read_lines(bundle)
    if spelling == "crlf":
        lines = [line[:-1] + b"\r\n" for line in lines]
    elif spelling == "bom":
        lines[0] = b"\xef\xbb\xbf" + lines[0]
    elif spelling == "space":
        index = next(i for i, line in enumerate(lines) if parsed(line)["type"] == "checkpoint")
        lines[index] = lines[index].replace(b'"seq":', b'"seq": ')
    else:
        index = _event_lines(lines)[2]
        lines[index] = lines[index].replace(b'"acme"', b'"\\u0061cme"')
    write_lines(bundle, lines)
    assert _primary(bundle) == "bundle_malformed"


def test_an_empty_bundle_is_malformed_or_inconsistent_with_a_kept_checkpoint(
    bundle: Path, store: Store, tmp_path: Path
) -> None:
    """No bytes at all: malformed; with a checkpoint the reviewer kept: inconsistent."""
    kept = store.one("log_checkpoint_latest", {"tenant_id": "acme"})
    assert kept is not None
    assert _codes(verify_bundle(b"", [VERIFIER_KEY])) == ["bundle_malformed"]
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert _primary(empty) == "bundle_malformed"
    assert _primary(empty, trusted_checkpoints=[kept["note"]]) == "checkpoint_inconsistent"
    header_only = tmp_path / "header.jsonl"
    header_only.write_bytes(read_lines(bundle)[0])
    assert _primary(header_only, trusted_checkpoints=[kept["note"]]) == "checkpoint_inconsistent"


def test_a_missing_middle_checkpoint_is_named(bundle: Path) -> None:
    """Dropping checkpoint #2 (and its proof) skips a number: ``checkpoint_deleted``."""
    lines = read_lines(bundle)
    seconds = [
        i
        for i, line in enumerate(lines)
        if parsed(line).get("seq") == 2 or parsed(line).get("new_size") == 10
    ]
    assert len(seconds) == 2
    write_lines(bundle, [line for i, line in enumerate(lines) if i not in seconds])
    assert _primary(bundle) == "checkpoint_deleted"


def test_a_checkpoint_moved_before_its_events_is_named(bundle: Path) -> None:
    """Checkpoint #2 (10 leaves) placed right after #1 (5 leaves) is ``checkpoint_reordered``."""
    lines = read_lines(bundle)
    moved = [
        line for line in lines if parsed(line).get("seq") == 2 or parsed(line).get("new_size") == 10
    ]
    rest = [line for line in lines if line not in moved]
    after_first = next(i for i, line in enumerate(rest) if parsed(line).get("seq") == 1) + 1
    write_lines(bundle, rest[:after_first] + moved + rest[after_first:])
    assert _primary(bundle) == "checkpoint_reordered"


def test_a_bundle_without_checkpoints_does_not_verify(bundle: Path) -> None:
    """Events with no signed checkpoint prove nothing: ``checkpoint_missing``."""
    lines = [line for line in read_lines(bundle) if parsed(line)["type"] not in ("checkpoint",)]
    write_lines(bundle, lines)
    assert _primary(bundle) == "checkpoint_missing"
    assert "checkpoint_missing" in _codes(verify_bundle(bundle, [VERIFIER_KEY]))


def test_dropped_proof_lines_are_named(bundle: Path) -> None:
    """A log bundle without its consistency lines is ``checkpoint_inconsistent``, as documented."""
    lines = [line for line in read_lines(bundle) if parsed(line)["type"] != "consistency"]
    write_lines(bundle, lines)
    assert _primary(bundle) == "checkpoint_inconsistent"


def test_a_forged_key_rotation_hands_over_nothing(bundle: Path) -> None:
    """A 'rotation' to a rogue key that the genuine key did not co-sign grants no trust."""
    from effectledger.audit.log.origins import rotation_line

    lines = read_lines(bundle)
    tree_root = MerkleTree(
        [
            bytes.fromhex(parsed(line)["leaf_hash"])
            for line in lines
            if parsed(line)["type"] == "event"
        ]
    ).root()
    forged = Checkpoint(
        "effectledger/acme",
        12,
        tree_root,
        (rotation_line(SIGNER.verifier(), ROGUE_SIGNER.verifier()),),
    )
    lines.append(checkpoint_line(4, sign_checkpoint(forged, [ROGUE_SIGNER])))
    write_lines(bundle, lines)
    assert _primary(bundle) == "unknown_key"
    assert verify_bundle(bundle, [VERIFIER_KEY]).checkpoints == 3


def _checkpoint_lines(lines: list[bytes], seq: int) -> list[int]:
    """The indexes of checkpoint ``seq``'s line and of the consistency proof just before it."""
    at = next(i for i, line in enumerate(lines) if parsed(line).get("seq") == seq)
    return [at - 1, at] if parsed(lines[at - 1])["type"] == "consistency" else [at]


def _signed(lines: list[bytes], seq: int) -> Checkpoint:
    """The checkpoint that checkpoint line ``seq`` signs."""
    note = parsed(lines[_checkpoint_lines(lines, seq)[-1]])["note"]
    return Checkpoint.parse(note[: note.rfind("\n\n") + 1])


def test_a_duplicated_checkpoint_line_is_refused(bundle: Path) -> None:
    """Checkpoint #2's line written twice in a row is ``bundle_malformed``: each appears once."""
    lines = read_lines(bundle)
    at = _checkpoint_lines(lines, 2)[-1]
    write_lines(bundle, [*lines[: at + 1], lines[at], *lines[at + 1 :]])
    report = verify_bundle(bundle, [VERIFIER_KEY])
    assert _codes(report) == ["bundle_malformed"]
    assert "comes again" in report.findings[0].message


def test_a_deleted_and_renumbered_checkpoint_is_harmless(bundle: Path) -> None:
    """Without checkpoint #2, a new proof from #1 to #3 and #3 renumbered #2, the bundle verifies
    and still proves every event: its last checkpoint covers all 12 under the genuine key."""
    lines = read_lines(bundle)
    events = [parsed(line) for line in lines if line.startswith(b'{"entry"')]
    tree = MerkleTree([bytes.fromhex(event["leaf_hash"]) for event in events])
    dropped = set(_checkpoint_lines(lines, 2) + _checkpoint_lines(lines, 3)[:-1])
    first, last = (_signed(lines, seq) for seq in (1, 3))
    out: list[bytes] = []
    for index, line in enumerate(lines):
        if index in dropped:
            continue
        if parsed(line).get("seq") == 3:
            proof = tree.consistency_proof(first.size, last.size)
            out.append(consistency_line(first.size, last.size, proof))
            out.append(checkpoint_line(2, parsed(line)["note"]))
        else:
            out.append(line)
    write_lines(bundle, out)
    report = verify_bundle(bundle, [VERIFIER_KEY])
    assert report.ok, report.findings
    assert (report.checkpoints, report.size, report.events) == (2, 12, 12)
    assert report.root_hash == tree.root().hex()


def test_a_torn_last_event_line_is_named_even_when_canonical(bundle: Path) -> None:
    """A bundle cut right after an event line's bytes, before its newline, is malformed."""
    lines = read_lines(bundle)
    last_event = max(i for i, line in enumerate(lines) if line.startswith(b'{"entry"'))
    write_lines(bundle, [*lines[:last_event], lines[last_event].rstrip(b"\n")])
    report = verify_bundle(bundle, [VERIFIER_KEY])
    assert any(f.code == "bundle_malformed" and "incomplete" in f.message for f in report.findings)
