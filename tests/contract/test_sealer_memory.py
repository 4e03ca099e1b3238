"""A sealer that remembers: what it signed is kept outside the database, and never contradicted.

A database administrator rewrites the log tables around a genuine sealer: empties them and
re-queues the events (a re-seal), restores them from an earlier state (a rollback), or lets a
sealer without memory sign a different history from an earlier state (a fork). The sealer with
memory refuses each with its own reason and signs nothing; genuine work still seals on.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from effectledger import EffectLedger
from effectledger.audit.sealing.memory import Remembered, SealerMemory
from effectledger.audit.sealing.sealer import LogSealer
from effectledger.errors import AuditVerificationFailed
from tests.conftest import count_rows, drop_trigger, raw_sql, run_sql
from tests.races.forgery import admitted
from tests.races.world import build, close
from tests.support.evidence import SIGNER

ORIGIN = "effectledger/acme"


@pytest.fixture
def service(store_url: str, tmp_path: Path) -> Iterator[EffectLedger]:
    """A refund service over a fresh ledger and receiver."""
    made = build(store_url, tmp_path)
    yield made
    close(made)


@pytest.fixture
def memory(tmp_path: Path) -> SealerMemory:
    """The sealer's memory, a file in its own folder (beside its key)."""
    return SealerMemory(tmp_path / "sealer" / "memory.json")


def sealer(service: EffectLedger, memory: SealerMemory | None) -> LogSealer:
    """A sealer of the service's store with the test key and ``memory``."""
    return LogSealer(service.ledger.store, SIGNER, memory=memory)


def unguard_log(store_url: str) -> None:
    """Drop the log tables' append-only triggers, as the administrator can."""
    if store_url.startswith("sqlite:"):
        for table in ("log_entries", "log_checkpoints"):
            drop_trigger(store_url, table, f"{table}_no_delete")
    else:
        for table in ("log_entries", "log_checkpoints"):
            drop_trigger(store_url, table, f"{table}_append_only")


def head(store_url: str) -> tuple[object, ...]:
    """The acme log head row: size, root, frontier, checkpoint number."""
    (row,) = raw_sql(
        store_url,
        "SELECT size, root_hash, frontier, checkpoint_seq FROM log_heads WHERE tenant_id = 'acme'",
    )
    return row


def restore(store_url: str, saved: tuple[object, ...]) -> None:
    """Put the acme log back to the head ``saved`` earlier, dropping what came after it."""
    size, root, frontier, seq = saved
    run_sql(
        store_url, "DELETE FROM log_entries WHERE tenant_id = 'acme' AND position >= ?", (size,)
    )
    run_sql(store_url, "DELETE FROM log_checkpoints WHERE tenant_id = 'acme' AND seq > ?", (seq,))
    run_sql(
        store_url,
        "UPDATE log_heads SET size = ?, root_hash = ?, frontier = ?, checkpoint_seq = ? "
        "WHERE tenant_id = 'acme'",
        (size, root, frontier, seq),
    )


def test_a_log_emptied_and_re_queued_is_not_re_sealed(
    service: EffectLedger, memory: SealerMemory, store_url: str
) -> None:
    """Emptying the log tables and re-queueing every event is ``log_emptied``: no signature."""
    admitted(service)
    assert sealer(service, memory).seal("acme").sealed == 3
    unguard_log(store_url)
    raw_sql(store_url, "DELETE FROM log_entries")
    raw_sql(store_url, "DELETE FROM log_checkpoints")
    raw_sql(store_url, "DELETE FROM log_heads")
    raw_sql(
        store_url,
        "INSERT INTO log_pending (tenant_id, event_id, recorded_us) "
        "SELECT tenant_id, event_id, recorded_us FROM audit_events ORDER BY sequence",
    )
    with pytest.raises(AuditVerificationFailed, match="emptied") as refused:
        sealer(service, memory).seal("acme")
    assert refused.value.details["reason"] == "log_emptied"
    assert count_rows(store_url, "log_checkpoints") == 0
    signed, _ = memory.recall(ORIGIN)
    assert signed is not None
    assert signed.size == 3


def test_a_log_rolled_back_after_a_later_checkpoint_stops_the_sealer(
    service: EffectLedger, memory: SealerMemory, store_url: str
) -> None:
    """Restoring the log tables to an earlier checkpoint is ``log_rolled_back``, even when idle."""
    admitted(service)
    sealer(service, memory).seal("acme")
    earlier = head(store_url)
    admitted(service)
    assert sealer(service, memory).seal("acme").size == 6
    unguard_log(store_url)
    restore(store_url, earlier)
    checkpoints = count_rows(store_url, "log_checkpoints")
    with pytest.raises(AuditVerificationFailed, match="rolled back") as refused:
        sealer(service, memory).seal("acme")
    assert refused.value.details["reason"] == "log_rolled_back"
    admitted(service)  # new events waiting change nothing: still refused, still unsigned
    with pytest.raises(AuditVerificationFailed, match="rolled back"):
        sealer(service, memory).seal("acme")
    assert count_rows(store_url, "log_checkpoints") == checkpoints


def test_a_fork_signed_by_a_sealer_without_memory_is_refused(
    service: EffectLedger, memory: SealerMemory, store_url: str
) -> None:
    """A history re-signed on from an earlier state by a forgetful sealer is ``log_forked``."""
    admitted(service)
    sealer(service, memory).seal("acme")
    earlier = head(store_url)
    admitted(service)
    sealer(service, memory).seal("acme")  # the remembered tree: size 6
    unguard_log(store_url)
    restore(store_url, earlier)  # the second operation's events drop out of the log for good
    admitted(service)
    assert sealer(service, None).seal("acme").size == 6  # same key, no memory: it signs
    with pytest.raises(AuditVerificationFailed, match="another root") as same_size:
        sealer(service, memory).seal("acme")
    assert same_size.value.details["reason"] == "log_forked"
    admitted(service)
    assert sealer(service, None).seal("acme").size == 9  # same key, no memory: it signs
    with pytest.raises(AuditVerificationFailed, match="fork") as refused:
        sealer(service, memory).seal("acme")
    assert refused.value.details["reason"] == "log_forked"


def test_genuine_sealing_goes_on_across_restarts_and_a_lost_commit(
    service: EffectLedger, memory: SealerMemory, store_url: str
) -> None:
    """A new sealer on the same memory seals on; a signature whose COMMIT was lost is explained."""
    admitted(service)
    assert sealer(service, memory).seal("acme").size == 3
    admitted(service)
    assert sealer(service, memory).seal("acme").size == 6
    signed, pending = memory.recall(ORIGIN)
    assert signed is not None
    assert signed.size == 6
    assert pending is None
    memory.begin(ORIGIN, signed, Remembered(7, "ab" * 32))  # signed, then the COMMIT was lost
    admitted(service)
    assert sealer(service, memory).seal("acme").size == 9
    assert memory.recall(ORIGIN) == (Remembered(9, str(head(store_url)[1])), None)


def test_another_sealer_without_memory_signing_on_consistently_is_accepted(
    service: EffectLedger, memory: SealerMemory
) -> None:
    """A log grown by another sealer holding the key is accepted once its leaves extend the tree."""
    admitted(service)
    sealer(service, memory).seal("acme")
    admitted(service)
    assert sealer(service, None).seal("acme").size == 6
    admitted(service)
    assert sealer(service, memory).seal("acme").size == 9
