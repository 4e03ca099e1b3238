"""Offline verification of an evidence bundle, naming what was tampered with.

:func:`verify_bundle` needs the bundle file and the verifier keys the reviewer trusts — no
database. It checks, in this order, and reports every failure as a :class:`Finding` with a stable
code (the reasons of :class:`~effectledger.errors.AuditVerificationFailed`):

1. the bundle's shape (``bundle_malformed``);
2. each checkpoint's signature under the trusted keys, following co-signed key rotations
   (``unknown_key``, ``checkpoint_signature_invalid``, ``checkpoint_malformed``,
   ``checkpoint_origin_mismatch``), and each checkpoint's consistency with the one before it and
   with checkpoints the reviewer kept from earlier (``checkpoint_inconsistent``);
3. for a ``log`` bundle: every event's hash, its link to the previous event of its operation,
   its log position, and the Merkle root of all leaves against every checkpoint. When anything
   fails, a second pass over the file names it: ``event_edited``, ``event_deleted``,
   ``event_reordered``, ``event_inserted``, ``operation_deleted``, or ``log_root_mismatch``
   when the events are internally consistent yet do not reproduce a signed root;
4. for a ``receipt`` bundle: each event's inclusion proof (``inclusion_proof_invalid``);
5. for both: every evidence blob an event cites is carried, its content matching the hash the
   event commits to (``evidence_missing``, ``evidence_edited``).

:func:`verify_bundle` gathers the findings of one scan (:mod:`effectledger.audit.bundles.scan`)
from one function per step: ``_numbering`` (log bundles), ``_checkpoint_findings`` (signatures,
consistency, kept checkpoints), ``_log_findings`` or ``_receipt_findings``, and
``_evidence_findings``. Checkpoint numbers (``seq``) are not signed and serve only as labels and
for ``_numbering``: every check relies on the order of the lines.

The fast path hashes each event line's canonical bytes in place (two SHA-256 per event plus one
per Merkle node) and keeps only the leaf hashes and each operation's chain head in memory.
A large log bundle file is scanned by several processes (:mod:`~.split`, ``jobs``),
to the same scan: the report does not depend on how it was scanned.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from effectledger.audit.bundles.diagnose import diagnose
from effectledger.audit.bundles.format import FORMAT, KIND_LOG, KIND_RECEIPT
from effectledger.audit.bundles.reader import EventLine
from effectledger.audit.bundles.scan import (
    BundleScan,
    Source,
    bundle_lines,
    proof_hashes,
)
from effectledger.audit.bundles.split import scan_in_parts
from effectledger.audit.findings import Finding
from effectledger.audit.keys.files import parse_verifiers
from effectledger.audit.keys.signers import Verifier
from effectledger.audit.log.checkpoints import Accepted, CheckpointChecks
from effectledger.audit.log.frontier import roots_at
from effectledger.audit.log.origins import Restore, origin_for
from effectledger.audit.log.proofs import verify_inclusion
from effectledger.audit.log.tlog import Checkpoint
from effectledger.audit.witnessing.cosign import CosignatureVerifier
from effectledger.audit.witnessing.cosignatures import (
    cosignature_findings,
    freshness_findings,
    parse_witness_keys,
    required_cosignatures,
)
from effectledger.errors import AuditVerificationFailed, InvalidInput, ProofError

__all__ = ["Finding", "VerificationReport", "verify_bundle"]


@dataclass(frozen=True, slots=True, kw_only=True)
class VerificationReport:
    """The outcome of :func:`verify_bundle`; ``ok`` when there is no finding."""

    tenant_id: str | None
    origin: str | None
    kind: str | None
    events: int
    operations: int
    checkpoints: int
    size: int
    root_hash: str | None
    signers: tuple[str, ...]
    findings: tuple[Finding, ...]
    restores: tuple[Restore, ...] = ()

    @property
    def ok(self) -> bool:
        """True when every check passed."""
        return not self.findings

    def raise_for_findings(self) -> None:
        """Raise :class:`AuditVerificationFailed` naming the first finding, if there is one."""
        if self.findings:
            first = self.findings[0]
            more = len(self.findings) - 1
            raise AuditVerificationFailed(
                f"{first.code}: {first.message}"
                + (f" (and {more} more finding{'s' if more > 1 else ''})" if more else ""),
                reason=first.code,
                findings=[finding.to_dict() for finding in self.findings],
            )


def verify_bundle(
    source: Source,
    keys: Sequence[Verifier | str],
    *,
    trusted_checkpoints: Sequence[str] = (),
    origin: str | None = None,
    witness_keys: Sequence[CosignatureVerifier | str] = (),
    witnesses: int | None = None,
    jobs: int | None = None,
    max_age: timedelta | None = None,
    now: datetime | None = None,
) -> VerificationReport:
    """Verify a bundle offline against the trusted verifier ``keys``.

    ``source`` is a file path or the bundle's bytes. ``trusted_checkpoints`` are signed
    checkpoints the reviewer kept from earlier; the bundle must extend each of them. ``origin``
    pins the log the reviewer asked for (``origin_for(tenant)``): a genuine bundle of another
    log is ``checkpoint_origin_mismatch``, since one key may sign many tenants' logs.
    ``witness_keys`` / ``witnesses``: the latest accepted checkpoint must carry valid
    cosignatures by ``witnesses`` distinct given witness keys (default: all of them), else
    ``cosignature_missing`` (:mod:`effectledger.audit.witnessing.cosignatures`). Returns a report;
    call :meth:`VerificationReport.raise_for_findings` to turn findings into an error. ``jobs``:
    processes scanning a log bundle file (:func:`~effectledger.audit.bundles.split.scan_in_parts`;
    default: several for a large file, ``1``: serial); the report is the same whatever it is.
    ``max_age``: freshness — the required cosignatures of the latest checkpoint must be at most
    this old at ``now`` (default: the current time), by their C2SP timestamps, else
    ``cosignature_stale``; it needs ``witness_keys``, since only a witness's timestamp says when
    the log was last seen (the log's own checkpoints carry none).
    """
    pinned = origin
    verifiers = [key if isinstance(key, Verifier) else parse_verifiers([key])[0] for key in keys]
    if not verifiers:
        raise InvalidInput("name at least one trusted verifier key")
    witness_verifiers = parse_witness_keys(witness_keys)
    required = required_cosignatures(witness_verifiers, witnesses)
    if max_age is not None:
        if not isinstance(max_age, timedelta) or max_age <= timedelta(0):
            raise InvalidInput("max_age must be a positive duration", field="max_age")
        if not required:
            raise InvalidInput(
                "a freshness rule (max_age) needs witness keys: only a witness's cosignature "
                "says when the log was last seen",
                field="max_age",
            )
    checked_at = (datetime.now(UTC) if now is None else now).timestamp()
    try:
        scan = scan_in_parts(source, jobs)
    except OSError as exc:
        raise InvalidInput(f"cannot read the bundle: {exc.strerror or exc}") from exc
    header = scan.header
    empty = VerificationReport(
        tenant_id=None,
        origin=None,
        kind=None,
        events=0,
        operations=0,
        checkpoints=0,
        size=0,
        root_hash=None,
        signers=(),
        findings=tuple(scan.findings),
    )
    if header is None:
        if scan.findings:
            return empty
        # Nothing at all: withheld history to a reviewer who kept a checkpoint, else no bundle.
        code, message = (
            ("checkpoint_inconsistent", "the bundle is empty, before a checkpoint you kept")
            if trusted_checkpoints
            else ("bundle_malformed", "the bundle is empty: it has no header line")
        )
        return dataclasses.replace(empty, findings=(Finding(code=code, message=message),))
    tenant, kind = header.get("tenant_id"), header.get("kind")
    try:
        origin = origin_for(tenant) if isinstance(tenant, str) else None
    except InvalidInput:
        origin = None
    if (
        header.get("format") != FORMAT
        or kind not in (KIND_LOG, KIND_RECEIPT)
        or origin is None
        or header.get("origin") != origin
    ):
        bad = Finding(code="bundle_malformed", message=f"the header is not a {FORMAT} header")
        return dataclasses.replace(empty, findings=(*scan.findings, bad))
    assert isinstance(tenant, str)
    findings = list(scan.findings)
    if pinned is not None and origin != pinned:
        findings.append(
            Finding(
                code="checkpoint_origin_mismatch",
                message=f"the bundle is the log {origin}, not {pinned}, the log asked for",
            )
        )
    checks = CheckpointChecks(scan.notes, scan.consistency, verifiers, origin)
    kept = checks.open_kept(trusted_checkpoints)
    kept, lost = _lost_to_restores(checks, kept)
    findings += lost
    if kind == KIND_RECEIPT:
        findings += _checkpoint_findings(checks, kept)
        findings += _receipt_findings(scan, checks.accepted)
        events, operations = (
            len(scan.receipt_events),
            len({event.operation_id for event in scan.receipt_events}),
        )
    else:
        roots = roots_at(scan.leaves, checks.sizes() + [c.size for c, _ in kept if c])
        findings += _numbering(scan)  # a skipped number names what the missing proof follows from
        findings += _checkpoint_findings(checks, kept)
        findings += _log_findings(source, scan, checks, roots, [c for c, _ in kept if c], tenant)
        events, operations = len(scan.leaves), len(scan.chains)
    findings += _evidence_findings(scan)
    accepted = checks.accepted
    if not accepted and not any(f.code != "bundle_malformed" for f in findings):
        findings.append(Finding(code="checkpoint_missing", message="no signed checkpoint"))
    if accepted and required:
        latest = accepted[-1]
        note, label = scan.notes[latest.index][1], f"checkpoint #{latest.seq}"
        findings += cosignature_findings(note, label, witness_verifiers, required)
        if max_age is not None:
            findings += freshness_findings(
                note, label, witness_verifiers, required, max_age.total_seconds(), checked_at
            )
    last = accepted[-1].checkpoint if accepted else None
    return VerificationReport(
        tenant_id=tenant,
        origin=origin,
        kind=kind,
        events=events,
        operations=operations,
        checkpoints=len(accepted),
        size=0 if last is None else last.size,
        root_hash=None if last is None else last.root_hash.hex(),
        signers=tuple(sorted({name for a in accepted for name in a.signers})),
        findings=tuple(_unique(findings)),
        restores=tuple(restore for _, restore in checks.restores),
    )


def _lost_to_restores(
    checks: CheckpointChecks, kept: Sequence[tuple[Checkpoint | None, Finding | None]]
) -> tuple[list[tuple[Checkpoint | None, Finding | None]], list[Finding]]:
    """Take out the kept checkpoints of a segment a restore closed that lie beyond it.

    The restored log goes on from a smaller (or another) tree, so such a checkpoint is in no
    tree of the bundle. One within what the restore states its segment signed (its last known
    tree, or a smaller one) is ``log_restored``: history the restore lost, which the reviewer
    holds and the log no longer does. Any other is ``checkpoint_inconsistent``: the restore
    understated what its segment had signed.
    """
    closed = {restore.previous_origin: (seq, restore) for seq, restore in checks.restores}
    left: list[tuple[Checkpoint | None, Finding | None]] = []
    findings: list[Finding] = []
    for checkpoint, finding in kept:
        found = None if checkpoint is None else closed.get(checkpoint.origin)
        if checkpoint is None or found is None or not _beyond(checkpoint, found[1]):
            left.append((checkpoint, finding))
            continue
        seq, restore = found
        said = (
            f"the checkpoint you kept ({checkpoint.size} leaves of {checkpoint.origin}) is beyond "
            f"the {restore.size} leaves that restore checkpoint #{seq} goes on from "
            f"({restore.reason})"
        )
        if checkpoint.size < restore.previous_size or (
            checkpoint.size == restore.previous_size
            and checkpoint.root_hash == restore.previous_root
        ):
            findings.append(
                Finding(
                    code="log_restored",
                    message=f"{said}: the restore states it lost those entries; this log does "
                    "not hold them",
                )
            )
        else:
            findings.append(
                Finding(
                    code="checkpoint_inconsistent",
                    message=f"{said}, and the restore states that its segment signed only "
                    f"{restore.previous_size} leaves: it understates what was lost",
                )
            )
    return left, findings


def _beyond(checkpoint: Checkpoint, restore: Restore) -> bool:
    """Whether ``checkpoint`` (of the segment ``restore`` closed) is not in the restored tree."""
    if checkpoint.size > restore.size:
        return True
    return checkpoint.size == restore.size and checkpoint.root_hash != restore.root_hash


def _unique(findings: Iterable[Finding]) -> Iterator[Finding]:
    seen: set[tuple[Any, ...]] = set()
    for finding in findings:
        key = (finding.code, finding.event_id, finding.position, finding.message)
        if key not in seen:
            seen.add(key)
            yield finding


def _checkpoint_findings(
    checks: CheckpointChecks, kept: Sequence[tuple[Checkpoint | None, Finding | None]]
) -> list[Finding]:
    """Step 2 for either kind of bundle: the checkpoints' signatures and consistency, and the
    checkpoints the reviewer kept. Further checks of the signed checkpoints (``checks.accepted``,
    in bundle order) belong here, beside these."""
    return [*checks.findings, *(finding for _, finding in kept if finding is not None)]


def _evidence_findings(scan: BundleScan) -> list[Finding]:
    """Every evidence blob an event cites travels in the bundle; every blob line is cited.

    A cited blob without its line is ``evidence_missing``; a blob line whose content does not
    match its hash was named ``evidence_edited`` by the scan; a blob no event cites carries bytes
    no signature covers, ``bundle_malformed``.
    """
    findings = [
        Finding(
            code="evidence_missing",
            message=f"the event at position {position} cites evidence sha256:{digest} that the "
            "bundle does not carry",
            position=position,
        )
        for digest, position in scan.cited.items()
        if digest not in scan.blobs
    ]
    findings += [
        Finding(
            code="bundle_malformed",
            message=f"the blob sha256:{digest} is cited by no event: no signature covers it",
        )
        for digest in sorted(scan.blobs - scan.cited.keys())
    ]
    return findings


def _log_findings(
    source: Source,
    scan: BundleScan,
    checks: CheckpointChecks,
    roots: dict[int, bytes],
    kept: Sequence[Checkpoint],
    tenant: str,
) -> list[Finding]:
    findings: list[Finding] = []
    accepted = checks.accepted
    count = len(scan.leaves)
    mismatched = [
        a
        for a in accepted
        if a.checkpoint.size in roots and roots[a.checkpoint.size] != a.checkpoint.root_hash
    ]
    latest = accepted[-1].checkpoint.size if accepted else None
    for checkpoint in kept:
        if checkpoint.size > (latest or 0):
            findings.append(
                Finding(
                    code="checkpoint_inconsistent",
                    message=f"the bundle's log ends at {latest} leaves, before a checkpoint you "
                    f"kept at {checkpoint.size}: history was truncated or withheld",
                )
            )
        elif checkpoint.size in roots and roots[checkpoint.size] != checkpoint.root_hash:
            findings.append(
                Finding(
                    code="checkpoint_inconsistent",
                    message=f"the bundle's log of {checkpoint.size} leaves differs from the "
                    "checkpoint you kept at that size",
                )
            )
    if not accepted:
        return findings
    short = latest is not None and count < latest
    long = latest is not None and count > latest
    # A checkpoint line followed by events it covers was moved; the second pass names it.
    early = any(a.checkpoint.size > scan.events_before[a.index] < count for a in accepted)
    if scan.suspicious or mismatched or short or long or early:
        named = diagnose(bundle_lines(source), tenant, latest)
        findings += named
        if not named:
            first = mismatched[0] if mismatched else accepted[-1]
            findings.append(
                Finding(
                    code="log_root_mismatch",
                    message=f"the events do not reproduce the root of checkpoint #{first.seq} "
                    f"({first.checkpoint.size} leaves) although each event and chain is "
                    "consistent: events were rewritten consistently before that size",
                )
            )
    return findings


def _numbering(scan: BundleScan) -> list[Finding]:
    """A log bundle holds every checkpoint once: their numbers run 1, 2, 3, ... without a gap.

    ``seq`` is not signed, so nothing else relies on it: checkpoints are judged in the order of
    their lines, each against the one before it. A gap is ``checkpoint_deleted``, a number that
    repeats or goes back (a duplicated line) ``bundle_malformed``. A deletion hidden by
    renumbering is harmless: the remaining checkpoints are each signed and proven consistent with
    the one before, and the last covers every event (docs/evidence.md §4).
    """
    findings: list[Finding] = []
    expected = 1
    for seq, _ in scan.notes:
        if seq > expected:
            missing = f"#{expected}" if seq == expected + 1 else f"#{expected} to #{seq - 1}"
            findings.append(
                Finding(
                    code="checkpoint_deleted",
                    message=f"checkpoint {missing} is missing before checkpoint #{seq}: a log "
                    "bundle holds every checkpoint",
                )
            )
        elif seq < expected:
            findings.append(
                Finding(
                    code="bundle_malformed",
                    message=f"checkpoint #{seq} comes again after #{expected - 1}: a log bundle "
                    "holds each checkpoint once",
                )
            )
        expected = max(expected, seq + 1)
    return findings


def _receipt_findings(scan: BundleScan, accepted: Sequence[Accepted]) -> list[Finding]:
    roots = {a.checkpoint.size: a.checkpoint.root_hash for a in accepted}
    findings: list[Finding] = []
    for event in scan.receipt_events:
        problem = _receipt_problem(scan, event, roots)
        if problem is not None:
            code, what = problem
            findings.append(
                Finding(
                    code=code,
                    message=f"event {event.event_id} {what}",
                    event_id=event.event_id,
                    position=event.position,
                    operation_id=event.operation_id,
                )
            )
    return findings


def _receipt_problem(
    scan: BundleScan, event: EventLine, roots: dict[int, bytes]
) -> tuple[str, str] | None:
    """``(code, what is wrong)`` of one event of a receipt, or ``None`` if it is proven."""
    if event.event_hash != event.stated_event_hash:
        return "event_edited", "no longer matches its recorded hash"
    proof = scan.inclusions.get(event.event_id)
    if proof is None:
        return "inclusion_proof_invalid", "has no inclusion proof"
    if proof.get("position") != event.position or proof.get("size") not in roots:
        return (
            "inclusion_proof_invalid",
            "has a proof for another position or an unsigned tree size",
        )
    path = proof_hashes(proof.get("proof"))
    try:
        verify_inclusion(
            event.leaf_hash,
            event.position,
            int(proof["size"]),
            path if path is not None else [],
            roots[int(proof["size"])],
        )
    except ProofError as exc:
        return "inclusion_proof_invalid", f"is not proven included: {exc}"
    return None
