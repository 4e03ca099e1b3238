"""Freshness: an old, genuinely cosigned copy of a log is rejected by a reviewer who asks for it.

The attack: an administrator hands a reviewer an older bundle, a prefix of the log that the
witnesses genuinely cosigned back then. Every signature in it is real, so without a freshness
rule it verifies today. ``verify_bundle(..., max_age=...)`` (``audit verify --max-age``) requires
the required witnesses' cosignatures of its latest checkpoint to be at most that old, by their
C2SP timestamps: the stale copy is ``cosignature_stale``, the current one verifies.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from effectledger import EffectLedger
from effectledger.audit.bundles.verify import verify_bundle
from effectledger.errors import InvalidInput
from tests.acceptance.test_cli import run_cli
from tests.contract.test_sealer_witnesses import Served, bundle, sealer
from tests.races.forgery import admitted
from tests.races.world import build, close
from tests.support.evidence import VERIFIER_KEY


@pytest.fixture
def service(store_url: str, tmp_path: Path) -> Iterator[EffectLedger]:
    """A refund service over a fresh ledger and receiver."""
    made = build(store_url, tmp_path)
    yield made
    close(made)


class Clock:
    """The witnesses' clock, in POSIX seconds, moved by the test."""

    def __init__(self) -> None:
        self.now = datetime(2026, 12, 1, 9, 0, tzinfo=UTC).timestamp()

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    """The witnesses' shared clock."""
    return Clock()


@pytest.fixture
def witnesses(tmp_path: Path, clock: Clock) -> Iterator[list[Served]]:
    """Two witnesses on loopback whose cosignatures carry ``clock``'s time."""
    from tests.contract.test_sealer_witnesses import W1, W2

    folder = tmp_path / "witnesses"
    folder.mkdir()
    served = [Served(folder, W1), Served(folder, W2)]
    for one in served:
        assert one.witness is not None
        one.witness.clock = clock
    yield served
    for one in served:
        one.stop()


def _codes(
    path: Path, keys: list[str], at: float, max_age: timedelta, n: int | None = None
) -> list[str]:
    report = verify_bundle(
        path,
        [VERIFIER_KEY],
        witness_keys=keys,
        witnesses=n,
        max_age=max_age,
        now=datetime.fromtimestamp(at, UTC),
    )
    return [finding.code for finding in report.findings]


def test_an_old_cosigned_copy_is_stale_and_the_current_log_is_fresh(
    service: EffectLedger, witnesses: list[Served], clock: Clock, tmp_path: Path
) -> None:
    """The prefix cosigned at 09:00 verifies without a freshness rule and is stale at 15:00 with
    --max-age 1h; the log sealed on at 15:00 is fresh; at 09:30 the old copy was fresh too."""
    keys = [w.key for w in witnesses]
    admitted(service)
    assert sealer(service, witnesses).seal("acme").cosigned == 2
    old = bundle(service, tmp_path / "old.jsonl")
    started = clock.now
    clock.now += 6 * 3600
    admitted(service)
    assert sealer(service, witnesses).seal("acme").cosigned == 2
    current = bundle(service, tmp_path / "current.jsonl")
    hour = timedelta(hours=1)

    assert verify_bundle(old, [VERIFIER_KEY], witness_keys=keys).ok  # every signature is real
    assert _codes(old, keys, clock.now, hour) == ["cosignature_stale"]
    assert _codes(current, keys, clock.now + 60, hour) == []
    assert _codes(old, keys, started + 1800, hour) == []
    assert _codes(old, keys[:1], clock.now, timedelta(hours=7), n=1) == []


def test_one_stale_witness_of_two_required_is_stale(
    service: EffectLedger, witnesses: list[Served], clock: Clock, tmp_path: Path
) -> None:
    """With two required, the older of the two newest cosignatures must be fresh."""
    admitted(service)
    witnesses[1].stop()
    sealer(service, witnesses).seal("acme")  # w1 cosigns at 09:00, w2 is down
    clock.now += 3 * 3600
    witnesses[1].start()
    assert witnesses[1].witness is not None
    witnesses[1].witness.clock = clock
    sealer(service, witnesses).seal("acme")  # w2 is asked again at 12:00
    path = bundle(service, tmp_path / "log.jsonl")
    keys = [w.key for w in witnesses]
    assert _codes(path, keys, clock.now, timedelta(hours=1)) == ["cosignature_stale"]
    assert _codes(path, keys[1:], clock.now, timedelta(hours=1), n=1) == []
    assert _codes(path, keys, clock.now, timedelta(hours=4)) == []


def test_a_freshness_rule_needs_witness_keys_and_a_positive_duration(tmp_path: Path) -> None:
    """Refused before the bundle is read: there is nothing to date a log by without a witness."""
    missing = tmp_path / "none.jsonl"
    with pytest.raises(InvalidInput) as refused:
        verify_bundle(missing, [VERIFIER_KEY], max_age=timedelta(hours=1))
    assert refused.value.details["field"] == "max_age"
    result = run_cli(
        "audit",
        "verify",
        f"--bundle={missing}",
        f"--key={VERIFIER_KEY}",
        "--max-age=1h",
        cwd=tmp_path,
    )
    assert result.returncode == 1
    assert "--max-age needs --witness-key" in result.stderr
    bad = run_cli(
        "audit",
        "verify",
        f"--bundle={missing}",
        f"--key={VERIFIER_KEY}",
        "--max-age=soon",
        cwd=tmp_path,
    )
    assert bad.returncode == 2
    assert "not a duration" in bad.stderr
