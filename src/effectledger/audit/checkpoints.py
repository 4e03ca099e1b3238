"""A bundle's checkpoints: signatures under the trusted keys, rotations, and consistency.

:class:`CheckpointChecks` opens every checkpoint of a bundle with the verifier keys a reviewer
trusts, following genuine co-signed key rotations (:func:`~effectledger.audit.keys.key_epochs`),
and accepts a checkpoint only if it extends the previously accepted one by the bundle's RFC 9162
consistency proof (a missing proof line is a ``checkpoint_inconsistent`` finding). A checkpoint
that cannot be shown consistent is not used to judge the events. Checkpoints are taken in the
order of their lines; their numbers (``seq``, not signed) are only labels here (a log bundle's
numbering is checked as structure by :mod:`effectledger.audit.verify`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from effectledger.audit.diagnose import Finding
from effectledger.audit.keys import key_epochs
from effectledger.audit.proofs import verify_consistency
from effectledger.audit.signers import Verifier
from effectledger.audit.tlog import Checkpoint, open_checkpoint
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
    note: str, allowed: Sequence[Verifier], origin: str, label: str
) -> tuple[Checkpoint | None, tuple[str, ...], Finding | None]:
    """Open one signed checkpoint; a failure becomes a finding with the matching code."""
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
        self.origin = origin
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
            checkpoint, signers, finding = open_signed(note, allowed, origin, f"checkpoint #{seq}")
            if finding is not None:
                self.findings.append(finding)
            elif checkpoint is not None:
                self._accept(Accepted(index, seq, checkpoint, signers))

    def sizes(self) -> list[int]:
        """The tree sizes of the accepted checkpoints."""
        return [accepted.checkpoint.size for accepted in self.accepted]

    def open_kept(self, notes: Sequence[str]) -> list[tuple[Checkpoint | None, Finding | None]]:
        """Open checkpoints the reviewer kept from earlier, under the same trusted keys."""
        return [
            open_signed(note, self.trusted, self.origin, f"kept checkpoint {number}")[::2]
            for number, note in enumerate(notes, start=1)
        ]

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
