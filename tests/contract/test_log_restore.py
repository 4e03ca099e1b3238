"""A restore from a backup: the log goes on as a new segment, which witnesses and reviewers see.

Each test takes a real backup of the store and restores it (SQLite: the file copied with
SQLite's backup API and copied back; PostgreSQL: ``pg_dump`` of the store's schema, the schema
dropped and ``pg_restore``), with the sealer's memory in its own folder and a witness on
loopback. After the restore the sealer and the witness refuse the rolled-back log; ``restore``
signs the restored head as the first checkpoint of a new segment, stating what it continues,
what it lost and why; the witness cosigns the new origin; refunds go on (the receiver's own
count); the export verifies with the witness key and the report names the restore; a reviewer
who kept a checkpoint of the lost part is told so; a database that shows the old segment again
is refused; and nobody without the log key can start a segment.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest

from effectledger import OperationState
from effectledger.audit.bundles.export import export_log, prove_events
from effectledger.audit.bundles.verify import verify_bundle
from effectledger.audit.keys.signers import generate_signer
from effectledger.audit.log.origins import Restore, origin_for, restore_lines
from effectledger.audit.log.tlog import Checkpoint, sign_checkpoint
from effectledger.audit.sealing.memory import SealerMemory
from effectledger.audit.sealing.sealer import LogSealer
from effectledger.audit.witnessing.reading import latest_checkpoint
from effectledger.errors import AuditVerificationFailed, InvalidInput, LogKeyInvalid
from tests.conftest import count_rows, raw_sql, run_sql
from tests.contract.test_sealer_witnesses import W1, Served
from tests.races.forgery import receiver
from tests.races.world import AGENT, REFUND_30, approver, build, close
from tests.support.evidence import SIGNER, VERIFIER_KEY

ORIGIN = origin_for("acme")
SEGMENT_2 = "effectledger/acme#2"
REASON = "disk lost on db-1; restored last night's backup"


class World:
    """The service, its store URL and folder, the sealer's memory and one witness."""

    def __init__(self, store_url: str, folder: Path) -> None:
        self.store_url = store_url
        self.folder = folder
        self.memory = SealerMemory(folder / "sealer" / "memory.json")
        (folder / "witnesses").mkdir()
        self.witness = Served(folder / "witnesses", W1)
        self.service = build(store_url, folder)

    def sealer(self, *, memory: bool = True, witness: bool = True) -> LogSealer:
        """The genuine sealer: the log key, the memory and the witness (unless not)."""
        return LogSealer(
            self.service.ledger.store,
            SIGNER,
            memory=self.memory if memory else None,
            witnesses=[self.witness.endpoint] if witness else [],
        )

    def refund(self) -> str:
        """Perform one refund of 30; its operation id."""
        service = self.service
        proposal = service.propose(AGENT, "refund_order", REFUND_30)
        approval = service.approve(approver(0), proposal.proposal_id, digest=proposal.digest)
        done = service.perform(AGENT, proposal.proposal_id, approval=approval.approval_id)
        assert done.state is OperationState.SUCCEEDED
        assert done.operation_id is not None
        return done.operation_id

    def effects(self) -> int:
        """The receiver's own count of refunds it performed."""
        return receiver(self.service).counts().effects

    def backup(self, name: str = "backup") -> Path:
        """A backup of the whole store, as an operator takes one."""
        target = self.folder / name
        if self.store_url.startswith("sqlite:"):
            source = sqlite3.connect(_sqlite_path(self.store_url))
            copy = sqlite3.connect(target)
            with copy:
                source.backup(copy)
            copy.close()
            source.close()
            return target
        base, schema = _postgres(self.store_url)
        subprocess.run(
            ["pg_dump", "--format=custom", f"--schema={schema}", f"--file={target}", base],
            check=True,
            capture_output=True,
        )
        return target

    def restore_backup(self, backup: Path) -> None:
        """Stop the service, put the backup back in place of the store, start it again."""
        close(self.service)
        if self.store_url.startswith("sqlite:"):
            path = Path(_sqlite_path(self.store_url))
            for leftover in (
                path.with_name(path.name + "-wal"),
                path.with_name(path.name + "-shm"),
            ):
                leftover.unlink(missing_ok=True)
            shutil.copyfile(backup, path)
        else:
            base, schema = _postgres(self.store_url)
            subprocess.run(
                ["psql", "-q", "-c", f'DROP SCHEMA "{schema}" CASCADE', base],
                check=True,
                capture_output=True,
            )
            subprocess.run(
                ["pg_restore", "--exit-on-error", f"--dbname={base}", str(backup)],
                check=True,
                capture_output=True,
            )
        self.service = build(self.store_url, self.folder)

    def export(self, name: str) -> Path:
        """A fresh export of acme's log."""
        path = self.folder / name
        export_log(self.service.ledger.store, "acme", path)
        return path

    def close(self) -> None:
        """Close the service and stop the witness."""
        close(self.service)
        self.witness.stop()


def _sqlite_path(store_url: str) -> str:
    return urlsplit(store_url).path[1:]


def _postgres(store_url: str) -> tuple[str, str]:
    """The libpq URL of the store's database and the store's schema."""
    parts = urlsplit(store_url)
    query = dict(parse_qsl(parts.query))
    schema = query.pop("schema")
    for option in ("group_commit", "pooler"):
        query.pop(option, None)
    return urlunsplit(parts._replace(query=urlencode(query))), schema


@pytest.fixture
def world(store_url: str, tmp_path: Path) -> Iterator[World]:
    """A refund service, the sealer's memory and a witness, on a fresh store."""
    made = World(store_url, tmp_path)
    yield made
    made.close()


def restored(world: World) -> tuple[int, int, str]:
    """One refund sealed, a backup, one more refund sealed, the backup restored.

    Returns the log size of the backup, the size the old segment reached, and the old segment's
    last checkpoint note (the one a reviewer may have kept).
    """
    world.refund()
    backed_up = world.sealer().seal("acme").size
    backup = world.backup()
    world.refund()
    reached = world.sealer().seal("acme").size
    kept = latest_checkpoint(world.service.ledger.store, "acme")
    assert kept is not None
    assert world.witness.held() == reached > backed_up
    assert world.effects() == 2
    world.restore_backup(backup)
    return backed_up, reached, kept.note


def test_a_restored_log_is_refused_until_restored_then_goes_on_as_a_cosigned_segment(
    world: World,
) -> None:
    """Refused, restored with a statement, cosigned; refunds go on; the export verifies."""
    backed_up, reached, kept_note = restored(world)
    store_url = world.store_url
    checkpoints = count_rows(store_url, "log_checkpoints")
    with pytest.raises(AuditVerificationFailed) as remembered:
        world.sealer(witness=False).seal("acme")
    assert remembered.value.details["reason"] == "log_rolled_back"
    with pytest.raises(AuditVerificationFailed) as witnessed:
        world.sealer(memory=False).seal("acme")
    assert witnessed.value.details["reason"] == "witness_refused"
    assert count_rows(store_url, "log_checkpoints") == checkpoints

    stated = world.sealer().restore("acme", REASON)
    assert stated == Restore(
        origin=SEGMENT_2,
        previous_origin=ORIGIN,
        previous_size=reached,
        previous_root=stated.previous_root,
        size=backed_up,
        root_hash=stated.root_hash,
        reason=REASON,
    )
    assert stated.lost == reached - backed_up
    # the statement names the tree the old segment last signed: the one a reviewer may keep
    assert (
        stated.previous_root == Checkpoint.parse(kept_note[: kept_note.rfind("\n\n") + 1]).root_hash
    )
    (note,) = run_sql(
        store_url, "SELECT note FROM log_checkpoints WHERE seq = ?", (checkpoints + 1,)
    )[0]
    assert str(note).startswith(f"{SEGMENT_2}\n{backed_up}\n")
    assert f"effectledger-restore-reason {REASON}\n" in str(note)
    assert world.witness.witness is not None
    assert world.witness.witness.latest(SEGMENT_2) is not None
    assert world.witness.witness.latest(SEGMENT_2)[0] == backed_up  # type: ignore[index]
    assert world.witness.held() == reached  # the old origin stays as the witness saw it

    world.refund()  # refunds go on; the lost one is not sent again
    assert world.effects() == 3
    report = world.sealer().seal("acme")
    assert (report.sealed, report.cosigned) == (report.size - backed_up, 1)
    assert world.witness.witness.latest(SEGMENT_2)[0] == report.size  # type: ignore[index]

    bundle = world.export("restored.jsonl")
    verified = verify_bundle(bundle, [VERIFIER_KEY], witness_keys=[world.witness.key])
    assert verified.findings == ()
    assert verified.restores == (stated,)
    assert verified.size == report.size
    with_kept = verify_bundle(
        bundle, [VERIFIER_KEY], witness_keys=[world.witness.key], trusted_checkpoints=[kept_note]
    )
    assert [finding.code for finding in with_kept.findings] == ["log_restored"]
    (event_id,) = run_sql(
        store_url, "SELECT event_id FROM log_entries WHERE position = ?", (report.size - 1,)
    )[0]
    receipt = world.folder / "receipt.jsonl"
    prove_events(world.service.ledger.store, "acme", [str(event_id)], receipt)
    proven = verify_bundle(receipt, [VERIFIER_KEY], witness_keys=[world.witness.key])
    assert proven.findings == ()
    assert proven.restores == (stated,)


def test_the_same_backup_restored_twice_is_refused_then_goes_on_as_a_third_segment(
    world: World,
) -> None:
    """Restored, sealed on, then the old backup restored again: ``log_superseded``, unsigned;
    a second restore starts segment 3, continuing the lost segment 2, and verifies."""
    backed_up, _, _ = restored(world)
    world.sealer().restore("acme", REASON)
    world.refund()
    reached = world.sealer().seal("acme").size
    kept = latest_checkpoint(world.service.ledger.store, "acme")
    assert kept is not None
    assert kept.note.startswith(SEGMENT_2 + "\n")
    world.restore_backup(world.folder / "backup")  # the database shows segment 1 again
    checkpoints = count_rows(world.store_url, "log_checkpoints")
    with pytest.raises(AuditVerificationFailed) as refused:
        world.sealer(witness=False).seal("acme")
    assert refused.value.details["reason"] == "log_superseded"
    assert count_rows(world.store_url, "log_checkpoints") == checkpoints

    again = world.sealer().restore("acme", "restored the same backup once more")
    assert (again.origin, again.previous_origin) == ("effectledger/acme#3", SEGMENT_2)
    assert (again.size, again.previous_size, again.lost) == (
        backed_up,
        reached,
        reached - backed_up,
    )
    world.refund()
    assert world.effects() == 4  # two lost from the ledger, none sent twice
    assert world.sealer().seal("acme").cosigned == 1
    bundle = world.export("twice.jsonl")
    report = verify_bundle(bundle, [VERIFIER_KEY], witness_keys=[world.witness.key])
    assert report.findings == ()
    assert report.restores == (again,)
    with_kept = verify_bundle(bundle, [VERIFIER_KEY], trusted_checkpoints=[kept.note])
    assert [finding.code for finding in with_kept.findings] == ["log_restored"]


def test_nobody_without_the_log_key_starts_a_segment(world: World) -> None:
    """A segment checkpoint signed by another key, or one without a statement: nothing signed."""
    backed_up, _, _ = restored(world)
    store_url = world.store_url
    (seq, root) = raw_sql(
        store_url, "SELECT seq, root_hash FROM log_checkpoints ORDER BY seq DESC LIMIT 1"
    )[0]
    digest = bytes.fromhex(root) if isinstance(root, str) else bytes(root)
    for signers, lines in (
        ([generate_signer("effectledger")], restore_lines(ORIGIN, backed_up, digest, REASON)),
        ([SIGNER], ()),  # the key's own signature, but no statement: no segment starts
    ):
        forged = signers != [SIGNER]
        note = sign_checkpoint(Checkpoint(SEGMENT_2, backed_up, digest, lines), signers)
        seq += 1
        run_sql(
            store_url,
            "INSERT INTO log_checkpoints (tenant_id, seq, size, root_hash, previous_size, "
            "consistency_proof, note, signed_us) VALUES ('acme', ?, ?, ?, ?, '[]', ?, 0)",
            (seq, backed_up, root, backed_up, note),
        )
        run_sql(
            store_url, "UPDATE log_heads SET checkpoint_seq = ? WHERE tenant_id = 'acme'", (seq,)
        )
        checkpoints = count_rows(store_url, "log_checkpoints")
        if forged:  # the sealer signs on from no checkpoint its key did not sign
            with pytest.raises(LogKeyInvalid):
                world.sealer(memory=False, witness=False).seal("acme")
            with pytest.raises(LogKeyInvalid):
                world.sealer(memory=False, witness=False).restore("acme", REASON)
            assert count_rows(store_url, "log_checkpoints") == checkpoints
        report = verify_bundle(world.export(f"forged-{seq}.jsonl"), [VERIFIER_KEY])
        codes = {finding.code for finding in report.findings}
        assert codes & {"unknown_key", "checkpoint_origin_mismatch"}, codes
        assert report.restores == ()
    world.refund()
    assert world.effects() == 3  # the effect path does not depend on the log


def test_a_restore_needs_a_reason_and_a_checkpoint(world: World) -> None:
    """No reason, a reason of several lines, or a log never sealed: refused, nothing written."""
    with pytest.raises(InvalidInput, match="nothing to continue"):
        world.sealer().restore("acme", REASON)
    world.refund()
    world.sealer().seal("acme")
    checkpoints = count_rows(world.store_url, "log_checkpoints")
    for reason in ("", "   ", "x" * 501, "bell\x07"):
        with pytest.raises(InvalidInput, match="reason"):
            world.sealer().restore("acme", reason)
    assert count_rows(world.store_url, "log_checkpoints") == checkpoints
    signed, _ = world.memory.recall(ORIGIN)
    assert signed is not None  # the old segment is not closed by a refused restore
    assert world.memory.recall(SEGMENT_2) == (None, None)
