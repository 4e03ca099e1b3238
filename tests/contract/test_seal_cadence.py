"""The sealer's cadence: a checkpoint per minimum batch, or for fewer after a maximum wait."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from effectledger import EffectLedger, ManualClock
from effectledger.audit.sealing.sealer import LogSealer
from effectledger.errors import InvalidInput
from tests.conftest import count_rows
from tests.races.forgery import admitted
from tests.races.world import build, close
from tests.support.evidence import SIGNER


@pytest.fixture
def service(store_url: str, tmp_path: Path) -> Iterator[EffectLedger]:
    """A refund service over a fresh ledger and receiver, on a manual clock."""
    made = build(store_url, tmp_path)
    yield made
    close(made)


def test_a_small_batch_waits_until_it_is_full_or_old_enough(
    service: EffectLedger, store_url: str
) -> None:
    """Three events under a minimum batch of five wait; five seal; a late three seal alone."""
    clock = service.ledger.clock
    assert isinstance(clock, ManualClock)
    sealer = LogSealer(
        service.ledger.store, SIGNER, clock=clock, min_batch=5, max_wait=timedelta(seconds=10)
    )
    admitted(service)
    waiting = sealer.seal("acme")
    assert (waiting.sealed, waiting.checkpoints, waiting.pending) == (0, 0, 3)
    assert count_rows(store_url, "log_checkpoints") == 0
    admitted(service)
    full = sealer.seal("acme")
    assert (full.sealed, full.checkpoints, full.pending) == (6, 1, 0)
    admitted(service)
    assert sealer.seal("acme").sealed == 0
    clock.advance(timedelta(seconds=10))
    late = sealer.seal("acme")
    assert (late.sealed, late.checkpoints, late.pending) == (3, 1, 0)
    assert count_rows(store_url, "log_checkpoints") == 2


def test_without_a_maximum_wait_a_small_batch_waits_for_more(service: EffectLedger) -> None:
    """With no maximum wait, fewer events than the minimum batch are never sealed alone."""
    clock = service.ledger.clock
    assert isinstance(clock, ManualClock)
    sealer = LogSealer(service.ledger.store, SIGNER, clock=clock, min_batch=4)
    admitted(service)
    clock.advance(timedelta(days=1))
    assert sealer.seal("acme").pending == 3


def test_a_minimum_batch_above_the_batch_size_is_refused(service: EffectLedger) -> None:
    """A minimum batch larger than a batch could ever hold is a clear input error."""
    with pytest.raises(InvalidInput, match="min_batch"):
        LogSealer(service.ledger.store, SIGNER, batch_size=10, min_batch=11)
