"""Helpers of the evidence tests: fixed log keys, a small mixed history, bundle line editing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from effectledger import Context, Observation, Outcome, SimulatedReceiver, SubmitMode
from effectledger.audit.keys.signers import Signer
from effectledger.ledger import Ledger
from effectledger.workers import Executor
from tests.conftest import admit

SIGNER = Signer("log.example/test", bytes(range(32)))
"""The log key of the tests (a fixed seed, so failures are reproducible)."""

NEW_SIGNER = Signer("log.example/test-2", bytes(range(100, 132)))
"""The key a rotation hands the log to."""

ROGUE_SIGNER = Signer("log.example/test", bytes(range(200, 232)))
"""A key with the same name that nobody trusts: what a hostile administrator would sign with."""

VERIFIER_KEY = SIGNER.verifier().key_string()


def make_history(ledger: Ledger, receiver: SimulatedReceiver, context: Context) -> list[str]:
    """Four operations: succeeded, reply lost (OUTCOME_UNKNOWN), rejected, succeeded with an
    observation id. Returns their ids (12 events)."""
    executor = Executor(ledger, receiver)
    admit(ledger, context, receiver, "op-ok")
    executor.execute(context, "op-ok")
    receiver.submit_mode = SubmitMode.ACCEPT_THEN_LOSE_REPLY
    admit(ledger, context, receiver, "op-lost")
    executor.execute(context, "op-lost")
    receiver.submit_mode = SubmitMode.PERMANENT_REJECT
    admit(ledger, context, receiver, "op-rejected")
    executor.execute(context, "op-rejected")
    receiver.submit_mode = SubmitMode.ACCEPT
    admit(ledger, context, receiver, "op-observed")
    prepared = ledger.claim(context, "op-observed", attempt_id="attempt-observed")
    assert prepared is not None
    ledger.record(
        prepared,
        Observation(
            outcome=Outcome.ACCEPTED,
            provider_reference="ref-observed",
            evidence_reference="reply/observed",
            observation_id="obs-observed-1",
        ),
    )
    return ["op-ok", "op-lost", "op-rejected", "op-observed"]


def read_lines(path: Path) -> list[bytes]:
    """The bundle's lines, each with its newline."""
    return path.read_bytes().splitlines(keepends=True)


def write_lines(path: Path, lines: list[bytes]) -> None:
    """Overwrite the bundle with ``lines``."""
    path.write_bytes(b"".join(lines))


def parsed(line: bytes) -> dict[str, Any]:
    """One bundle line as JSON."""
    value: dict[str, Any] = json.loads(line)
    return value


def event_index(lines: list[bytes], operation_id: str, event_type: str) -> int:
    """The index of the line holding ``operation_id``'s event of ``event_type``."""
    for index, line in enumerate(lines):
        value = parsed(line)
        entry = value.get("entry", {})
        if entry.get("operation_id") == operation_id and entry.get("event_type") == event_type:
            return index
    raise AssertionError(f"no {event_type} of {operation_id} in the bundle")


def canonical_line(value: dict[str, Any]) -> bytes:
    """``value`` as a canonical bundle line, as the exporter writes it."""
    from effectledger.model.canonical import canonical_bytes

    return canonical_bytes(value, limit=1 << 20) + b"\n"


def verify_both_ways(source: Any, keys: Any, **options: Any) -> Any:
    """``verify_bundle`` serially and split three ways; asserts both give the same report.

    For a file, the split scan (when it does not decline) must equal the serial scan too, so a
    tampered bundle is named identically whichever way it is verified.
    """
    from effectledger.audit.bundles.scan import scan_bundle
    from effectledger.audit.bundles.split import split_scan
    from effectledger.audit.bundles.verify import verify_bundle

    serial = verify_bundle(source, keys, jobs=1, **options)
    if isinstance(source, bytes) or not Path(source).is_file():
        return serial
    split = verify_bundle(source, keys, jobs=3, **options)
    assert split == serial, (split.findings, serial.findings)
    scan = split_scan(source, 3)
    assert scan is None or scan == scan_bundle(source)
    return serial
