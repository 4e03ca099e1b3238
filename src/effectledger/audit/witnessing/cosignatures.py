"""Witness cosignatures a reviewer requires of a bundle's latest checkpoint (offline).

A bundle carries each checkpoint's witness cosignatures as extra signature lines of its signed
note (C2SP tlog-cosignature/v1: the same note, lines a log-key verifier ignores). A reviewer who
holds witness verifier keys asks for ``required`` of them: the latest checkpoint the verdict
rests on must carry a valid cosignature by ``required`` distinct given witness keys. Checkpoints
before it are covered by the bundle's consistency proofs to it. Findings:

``cosignature_missing``
    fewer than ``required`` of the given witnesses cosigned the latest checkpoint: e.g. the log
    was emptied and re-sealed, rolled back or forked, and the witnesses refused it;
``cosignature_invalid``
    a line names a given witness key but its signature does not verify (bytes were changed).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence

from effectledger.audit.findings import Finding
from effectledger.audit.witnessing.cosign import CosignatureVerifier
from effectledger.errors import InvalidInput, LogKeyInvalid

__all__ = ["cosignature_findings", "parse_witness_keys", "required_cosignatures"]

_SIG_PREFIX = "\u2014 "


def parse_witness_keys(keys: Sequence[CosignatureVerifier | str]) -> list[CosignatureVerifier]:
    """Witness verifier keys from key strings; a key given twice counts once."""
    found: dict[tuple[str, int], CosignatureVerifier] = {}
    for key in keys:
        try:
            verifier = (
                key
                if isinstance(key, CosignatureVerifier)
                else CosignatureVerifier.from_key_string(key)
            )
        except LogKeyInvalid as exc:
            raise InvalidInput(
                f"not a witness verifier key: {exc.message}", field="witness_key"
            ) from exc
        found.setdefault((verifier.name, verifier.key_id), verifier)
    return list(found.values())


def required_cosignatures(keys: Sequence[CosignatureVerifier], required: int | None) -> int:
    """How many cosignatures to require: ``required``, else one per given key (0 without keys)."""
    if required is None:
        return len(keys)
    if isinstance(required, bool) or not isinstance(required, int) or required < 1:
        raise InvalidInput("the number of witnesses required is a whole number >= 1")
    if required > len(keys):
        raise InvalidInput(
            f"{required} cosignatures required but only {len(keys)} distinct witness key(s) given"
        )
    return required


def _names_key(line: str, key: CosignatureVerifier) -> bool:
    if not line.startswith(_SIG_PREFIX):
        return False
    name, _, encoded = line[len(_SIG_PREFIX) :].partition(" ")
    try:
        raw = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        return False
    return name == key.name and raw[:4] == key.key_id.to_bytes(4, "big")


def cosignature_findings(
    note: str, label: str, keys: Sequence[CosignatureVerifier], required: int
) -> list[Finding]:
    """The findings for one checkpoint ``note`` that must carry ``required`` cosignatures."""
    if required < 1:
        return []
    split = note.rfind("\n\n")
    body, lines = (note[: split + 1], note[split + 2 :].splitlines()) if split >= 0 else ("", [])
    findings: list[Finding] = []
    cosigned: list[str] = []
    for key in keys:
        named = [line for line in lines if _names_key(line, key)]
        if any(key.timestamp(body, line) is not None for line in named):
            cosigned.append(key.name)
        elif named:
            findings.append(
                Finding(
                    code="cosignature_invalid",
                    message=f"{label} has a cosignature line of witness {key.name} that does "
                    "not verify: the note or the line was changed",
                )
            )
    if len(cosigned) < required:
        findings.append(
            Finding(
                code="cosignature_missing",
                message=f"{label} carries {len(cosigned)} of the {required} witness "
                f"cosignature(s) required (cosigned by: {', '.join(cosigned) or 'none'}): the "
                "witnesses did not see this log, e.g. it was emptied and re-sealed, rolled "
                "back or forked",
            )
        )
    return findings


def cosignature_times(note: str, keys: Sequence[CosignatureVerifier]) -> list[int]:
    """The timestamps (POSIX seconds) of the valid cosignatures by ``keys`` on ``note``, one per
    witness that cosigned it, newest first."""
    split = note.rfind("\n\n")
    body, lines = (note[: split + 1], note[split + 2 :].splitlines()) if split >= 0 else ("", [])
    times: list[int] = []
    for key in keys:
        found = [
            stamp
            for line in lines
            if _names_key(line, key) and (stamp := key.timestamp(body, line)) is not None
        ]
        if found:
            times.append(max(found))
    return sorted(times, reverse=True)


def freshness_findings(
    note: str,
    label: str,
    keys: Sequence[CosignatureVerifier],
    required: int,
    max_age_s: float,
    now_s: float,
) -> list[Finding]:
    """``cosignature_stale`` unless ``required`` witnesses cosigned ``note`` within ``max_age_s``
    seconds of ``now_s``: the ``required``-th newest cosignature is the one that must be fresh.
    (Too few cosignatures at all is ``cosignature_missing``, reported by
    :func:`cosignature_findings`.)"""
    times = cosignature_times(note, keys)
    if required < 1 or len(times) < required:
        return []
    age = now_s - times[required - 1]
    if age <= max_age_s:
        return []
    return [
        Finding(
            code="cosignature_stale",
            message=f"{label} was last cosigned by {required} witness(es) {age:.0f} s ago, "
            f"more than the {max_age_s:.0f} s allowed: the bundle may be an old copy of a log "
            "that has grown since (ask the witnesses, or the ledger's operator, for a fresh one)",
        )
    ]
