"""A bundle's checkpoints: signatures under the trusted keys, rotations, and consistency.

:class:`CheckpointChecks` opens every checkpoint of a bundle with the verifier keys a reviewer
trusts, following genuine co-signed key rotations
(:func:`~effectledger.audit.log.origins.key_epochs`), and accepts a checkpoint only if it extends
the previously accepted one by the bundle's RFC 9162 consistency proof (a missing proof line is a
``checkpoint_inconsistent`` finding). A checkpoint that cannot be shown consistent is not used to
judge the events. Checkpoints are taken in the order of their lines; their numbers (``seq``, not
signed) are only labels here (a log bundle's numbering is checked as structure by
:mod:`effectledger.audit.bundles.verify`).

Every checkpoint carries the log's origin, except after a restore from a backup: a genuine
restore checkpoint (:func:`~effectledger.audit.log.origins.parse_restore`) names the origin in force
as the one it continues and starts the next segment's (``<origin>#2``, …), which later
checkpoints then carry. Any other origin is ``checkpoint_origin_mismatch``. The restores are
kept (``restores``) for the report: the reviewer sees each, and what it lost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from effectledger.audit.findings import Finding
from effectledger.audit.keys.signers import Verifier
from effectledger.audit.log.origins import Restore, key_epochs, parse_restore, segment_in
from effectledger.audit.log.proofs import verify_consistency
from effectledger.audit.log.tlog import Checkpoint, open_checkpoint
from effectledger.errors import NoteError, ProofError

__all__ = ["Accepted", "CheckpointChecks", "open_signed", "refusal_reason"]

_REFUSALS: Final = {
    "note_unverified": "unknown_key",
    "note_bad_signature": "checkpoint_signature_invalid",
    "key_invalid": "checkpoint_signature_invalid",
    "note_malformed": "checkpoint_malformed",
    "checkpoint_malformed": "checkpoint_malformed",
    "checkpoint_origin_mismatch": "checkpoint_origin_mismatch",
}


def refusal_reason(error: NoteError) -> str:
    """The :class:`~effectledger.errors.AuditVerificationFailed` reason for a checkpoint's error.

    The one translation of :class:`~effectledger.errors.NoteError` for stored or exported
    evidence, used by verification and by the sealer alike.
    """
    return _REFUSALS.get(error.reason, "checkpoint_malformed")


@dataclass(slots=True)
class Accepted:
    """A checkpoint whose signature verified and that extends the ones accepted before it."""

    index: int
    seq: int
    checkpoint: Checkpoint
    signers: tuple[str, ...]


def open_signed(
    note: str, allowed: Sequence[Verifier], origin: str | None, label: str
) -> tuple[Checkpoint | None, tuple[str, ...], Finding | None]:
    """Open one signed checkpoint (of ``origin``, unless ``None``); a failure becomes a finding
    with the matching code."""
    try:
        checkpoint, signatures = open_checkpoint(note, allowed, origin=origin)
    except NoteError as exc:
        code = refusal_reason(exc)
        message = f"{label} {exc}"
        if code == "unknown_key":
            names = ", ".join(exc.details.get("signed_by", ()))
            message = f"{label} is signed by no trusted key (signed by: {names or 'nobody'})"
        return None, (), Finding(code=code, message=message)
    return checkpoint, tuple(signature.name for signature in signatures), None


class CheckpointChecks:
    """Signature and consistency checks over a bundle's checkpoints, in bundle order.

    ``notes`` are ``(seq, signed note)`` pairs, ``proofs`` maps ``(old_size, new_size)`` to the
    bundle's consistency proof (``None`` for a malformed one). After construction, ``accepted``
    holds the checkpoints that verified and were proven consistent, ``findings`` the failures.
    """

    def __init__(
        self,
        notes: Sequence[tuple[int, str]],
        proofs: Mapping[tuple[int, int], list[bytes] | None],
        trusted: Sequence[Verifier],
        origin: str,
    ) -> None:
        self.findings: list[Finding] = []
        self.accepted: list[Accepted] = []
        self.restores: list[tuple[int, Restore]] = []
        self.origin = origin
        self.origins = [origin]  # the segments' origins, in order; the last one is in force
        self._proofs = proofs
        self.trusted = list(trusted)
        epochs = key_epochs([note for _, note in notes])
        chain_trusted = epochs is not None and any(e.key in self.trusted for e in epochs)
        if chain_trusted and epochs is not None:
            self.trusted += [e.key for e in epochs if e.key not in self.trusted]
        for index, (seq, note) in enumerate(notes):
            if epochs is None:
                allowed = list(trusted)
            elif chain_trusted:
                allowed = [
                    e.key
                    for e in epochs
                    if e.first <= index and (e.last is None or index <= e.last)
                ]
            else:
                allowed = []
            checkpoint, signers, finding = self._open(note, allowed, f"checkpoint #{seq}")
            if finding is not None:
                self.findings.append(finding)
            elif checkpoint is not None:
                self._accept(Accepted(index, seq, checkpoint, signers))

    def _open(
        self, note: str, allowed: Sequence[Verifier], label: str
    ) -> tuple[Checkpoint | None, tuple[str, ...], Finding | None]:
        """Open one checkpoint of the segment in force, or a restore that starts the next."""
        checkpoint, signers, finding = open_signed(note, allowed, None, label)
        if checkpoint is None or checkpoint.origin == self.origins[-1]:
            return checkpoint, signers, finding
        restore = parse_restore(checkpoint)
        current = segment_in(self.origins[-1], self.origin) or 1
        started = segment_in(checkpoint.origin, self.origin)
        if restore is None or started is None or started <= current:
            return None, (), _origin_mismatch(label, checkpoint.origin, self.origins[-1])
        previous = segment_in(restore.previous_origin, self.origin)
        if previous is None or not current <= previous < started:
            # the log it continues is the one in force, or a later segment a second restore of
            # the same backup lost (the statement names the last one known)
            return None, (), _origin_mismatch(label, restore.previous_origin, self.origins[-1])
        return checkpoint, signers, None

    def _started(self, accepted: Accepted) -> None:
        """Follow a restore checkpoint, once accepted, into the segment it starts."""
        if accepted.checkpoint.origin != self.origins[-1]:
            restore = parse_restore(accepted.checkpoint)
            if restore is not None:  # always: _open let only a restore change the origin
                self.origins.append(accepted.checkpoint.origin)
                self.restores.append((accepted.seq, restore))

    def sizes(self) -> list[int]:
        """The tree sizes of the accepted checkpoints."""
        return [accepted.checkpoint.size for accepted in self.accepted]

    def open_kept(self, notes: Sequence[str]) -> list[tuple[Checkpoint | None, Finding | None]]:
        """Open checkpoints the reviewer kept from earlier, under the same trusted keys, of any
        segment of the log."""
        kept: list[tuple[Checkpoint | None, Finding | None]] = []
        for number, note in enumerate(notes, start=1):
            label = f"kept checkpoint {number}"
            checkpoint, _, finding = open_signed(note, self.trusted, None, label)
            known = {*self.origins, *(restore.previous_origin for _, restore in self.restores)}
            if checkpoint is not None and checkpoint.origin not in known:
                finding = _origin_mismatch(label, checkpoint.origin, self.origin)
                checkpoint = None
            kept.append((checkpoint, finding))
        return kept

    def _inconsistent(self, previous: Accepted, current: Accepted, problem: str) -> None:
        self.findings.append(
            Finding(
                code="checkpoint_inconsistent",
                message=f"checkpoint #{current.seq} is inconsistent with checkpoint "
                f"#{previous.seq}: {problem}",
            )
        )

    def _accept(self, current: Accepted) -> None:
        if not self.accepted:
            self.accepted.append(current)
            self._started(current)
            return
        previous = self.accepted[-1]
        old, new = previous.checkpoint, current.checkpoint
        if new.size < old.size:
            self._inconsistent(previous, current, f"the log shrank to {new.size} leaves")
            return
        if new.size == old.size:
            if new.root_hash != old.root_hash:
                self._inconsistent(previous, current, f"two roots for {new.size} leaves")
                return
        elif (old.size, new.size) not in self._proofs:
            if old.size > 0:  # every tree extends the empty one; any other pair needs a proof
                self._inconsistent(previous, current, "the bundle has no consistency proof")
                return
        else:
            try:
                verify_consistency(
                    old.size,
                    new.size,
                    old.root_hash,
                    new.root_hash,
                    self._proofs[(old.size, new.size)] or [],
                )
            except ProofError as exc:
                self._inconsistent(previous, current, f"the consistency proof fails: {exc}")
                return
        self.accepted.append(current)
        self._started(current)


def _origin_mismatch(label: str, found: str, expected: str) -> Finding:
    return Finding(
        code="checkpoint_origin_mismatch",
        message=f"{label} checkpoint origin {found!r} is not the expected {expected!r}",
    )
