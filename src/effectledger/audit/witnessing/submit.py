"""The sealer's side of witnessing: submit the latest checkpoint, keep each verified cosignature.

A sealer configured with witnesses (``LogSealer(..., witnesses=[...])``, each a URL and the
witness's cosignature verifier key) calls :func:`cosign_latest` at the start of every pass and
after every checkpoint it stores. It sends each witness the tenant's latest checkpoint with the
consistency proof from the size that witness last cosigned according to the database
(:func:`~effectledger.audit.witnessing.witness_http.submit_checkpoint`, which follows a 409 to the
size the witness names), checks the returned line with the witness's key and stores it in
``checkpoint_cosignatures`` beside the checkpoint (the first cosignature of a checkpoint by a
witness is kept). An already cosigned latest checkpoint is submitted again at the start of a
pass, so a log cut back below what a witness holds is refused even while idle.

* A witness that cannot be reached is reported (``SealReport.witnesses_unreachable``) and left
  for the next pass: the log never waits for a witness. The next pass submits the then latest
  checkpoint, whose proof from the witness's size covers every checkpoint in between; those
  stay without that witness's cosignature (a verifier requires them on the latest checkpoint).
* A witness that refuses (409: an older, rolled-back or forked tree than the one it cosigned;
  422: the proof does not verify) means the log the database shows is not the one the witness
  saw. That is :class:`~effectledger.errors.AuditVerificationFailed` with reason
  ``witness_refused``: the pass stops, and every later pass stops at the same refusal before it
  signs anything, until an operator investigates.
"""

from __future__ import annotations

import http.client
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import partial

from effectledger.audit.log.log_head import stored_checkpoint
from effectledger.audit.log.merkle import MerkleTree
from effectledger.audit.witnessing.cosign import CosignatureVerifier
from effectledger.audit.witnessing.witness_http import submit_checkpoint
from effectledger.errors import AuditVerificationFailed, InvalidInput, LogKeyInvalid
from effectledger.model.operations import Row
from effectledger.store import Store, Transaction

__all__ = ["DEFAULT_WITNESS_TIMEOUT", "WitnessEndpoint", "cosign_latest", "parse_witnesses"]

DEFAULT_WITNESS_TIMEOUT = 10.0
"""Seconds a sealer waits for one witness's answer before it counts the witness unreachable."""


@dataclass(frozen=True, slots=True)
class WitnessEndpoint:
    """A witness the sealer submits to: its base URL and its cosignature verifier key."""

    url: str
    key: CosignatureVerifier
    timeout: float = DEFAULT_WITNESS_TIMEOUT

    @classmethod
    def parse(cls, text: str) -> WitnessEndpoint:
        """Parse ``URL=KEY``: the witness's ``http(s)://`` URL, ``=``, its verifier key string."""
        url, separator, key = text.strip().partition("=")
        if not separator or not url.startswith(("http://", "https://")):
            raise InvalidInput(
                "a witness is URL=KEY: its http(s):// URL, '=', its verifier key string",
                field="witness",
            )
        try:
            verifier = CosignatureVerifier.from_key_string(key)
        except LogKeyInvalid as exc:
            raise InvalidInput(
                f"the key of witness {url} is not a witness verifier key: {exc.message}",
                field="witness",
            ) from exc
        return cls(url.rstrip("/"), verifier)

    def key_string(self) -> str:
        """The witness's verifier key string (how its cosignatures are stored)."""
        return self.key.key_string()


def parse_witnesses(values: Sequence[str | WitnessEndpoint]) -> tuple[WitnessEndpoint, ...]:
    """Witness endpoints from ``URL=KEY`` strings (or endpoints); one key once only."""
    found = tuple(v if isinstance(v, WitnessEndpoint) else WitnessEndpoint.parse(v) for v in values)
    keys = [endpoint.key_string() for endpoint in found]
    if len(set(keys)) != len(keys):
        raise InvalidInput("each witness key may be configured once", field="witness")
    return found


def _tree(tx: Transaction, tenant_id: str, size: int) -> MerkleTree:
    params = {"tenant_id": tenant_id, "position": 0, "size": size, "limit": size}
    rows = tx.all("log_leaves_from", params)
    if len(rows) != size or (rows and int(rows[-1]["position"]) != size - 1):
        raise AuditVerificationFailed(
            f"{tenant_id}'s log misses leaves below its signed size {size}; run verify",
            reason="checkpoint_inconsistent",
        )
    return MerkleTree([bytes.fromhex(row["leaf_hash"]) for row in rows])


class _Stale(Exception):
    """The witness holds a later checkpoint of this very log than the one being submitted."""


def _superseded(store: Store, tenant_id: str, latest: Row) -> bool:
    """Whether the log now has a later checkpoint than ``latest`` (another sealer signed it)."""
    now = store.one("log_checkpoint_latest", {"tenant_id": tenant_id})
    return now is not None and int(now["seq"]) > int(latest["seq"])


def _proof(store: Store, url: str, tenant_id: str, old: int, latest: Row) -> list[bytes]:
    """The consistency proof from ``old`` leaves to the latest checkpoint, from stored leaves."""
    new = int(latest["size"])
    if old > new:
        now = store.one("log_checkpoint_latest", {"tenant_id": tenant_id})
        if now is not None and int(now["size"]) >= old:
            raise _Stale  # another sealer signed and submitted a larger checkpoint meanwhile
        raise AuditVerificationFailed(
            f"the witness at {url} refused the checkpoint: it cosigned {old} leaves of "
            f"{tenant_id}'s log, which now signs only {new}: the log was emptied or rolled back "
            "(after a restore from a backup on purpose: `effectledger audit restore`)",
            reason="witness_refused",
            witness=url,
            status=409,
            witness_size=old,
        )
    if old in (0, new):
        return []
    if int(latest["previous_size"]) == old:
        return list(stored_checkpoint(latest).consistency_proof)
    tree = store.read(partial(_tree, tenant_id=tenant_id, size=new))
    return tree.consistency_proof(old, new)


def _origin(note: str) -> str:
    """A checkpoint note's origin, its first line."""
    return note.partition("\n")[0]


def _insert(tx: Transaction, rows: list[dict[str, object]]) -> int:
    """Store the verified cosignature lines of one checkpoint in one transaction."""
    return sum(tx.run("checkpoint_cosignature_insert", row) for row in rows)


def cosign_latest(
    store: Store,
    tenant_id: str,
    witnesses: Sequence[WitnessEndpoint],
    now_us: int,
    *,
    skip: Collection[str] = (),
) -> tuple[int, tuple[str, ...]]:
    """Have every witness cosign the tenant's latest checkpoint; store what they return.

    Returns the number of cosignatures stored and the URLs of the witnesses that could not be
    reached (those in ``skip``, already unreachable in this pass, are not asked again). Raises
    :class:`AuditVerificationFailed` (``witness_refused``, ``cosignature_invalid``) when a
    witness refuses or answers with a line its key did not sign.
    """
    if not witnesses:
        return 0, ()
    latest = store.one("log_checkpoint_latest", {"tenant_id": tenant_id})
    if latest is None:
        return 0, ()
    origin = _origin(latest["note"])
    rows: list[dict[str, object]] = []
    unreachable: list[str] = []
    for witness in witnesses:
        if witness.url in skip:
            unreachable.append(witness.url)
            continue
        key = witness.key_string()
        # Submitted even when this witness cosigned it already: a witness that holds a larger
        # tree than the database now shows (the log was cut back) refuses, even on an idle log.
        held = store.one("checkpoint_cosigned_latest", {"tenant_id": tenant_id, "witness_key": key})
        # A witness knows each origin apart: after a restore (a new segment, a new origin) it
        # holds nothing of the segment yet, whatever it cosigned of the one before.
        old = 0 if held is None or _origin(held["note"]) != origin else int(held["size"])
        try:
            line = submit_checkpoint(
                witness.url,
                witness.key,
                latest["note"],
                old_size=old,
                proof=_proof(store, witness.url, tenant_id, old, latest),
                proof_from=partial(_proof, store, witness.url, tenant_id, latest=latest),
                timeout=witness.timeout,
            )
        except (OSError, http.client.HTTPException):
            unreachable.append(witness.url)
            continue
        except _Stale:
            continue
        except AuditVerificationFailed as exc:
            if exc.details.get("status") == 409 and _superseded(store, tenant_id, latest):
                continue  # racing sealers moved the witness on to a later checkpoint of ours
            raise
        rows.append(
            {
                "tenant_id": tenant_id,
                "seq": int(latest["seq"]),
                "witness_key": key,
                "size": int(latest["size"]),
                "root_hash": latest["root_hash"],
                "cosignature": line,
                "now_us": now_us,
            }
        )
    stored = store.write(partial(_insert, rows=rows), label="cosignature") if rows else 0
    return stored, tuple(unreachable)


def cosigned_note(tx: Transaction, row: Row) -> str:
    """A stored checkpoint's note with the cosignatures stored for it appended (C2SP: extra
    signature lines on the same note, which a log-key verifier ignores)."""
    found = tx.all("checkpoint_cosignatures_of", {"tenant_id": row["tenant_id"], "seq": row["seq"]})
    return str(row["note"]) + "".join(str(cosigned["cosignature"]) for cosigned in found)
