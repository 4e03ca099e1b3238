"""The ledger's OpenTelemetry gauges, read by the SDK's in-memory reader on every backend."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from effectledger import Context, ManualClock, OperationState
from effectledger.ledger.summary import register_ledger_gauges
from effectledger.telemetry import GAUGES
from tests.acceptance.test_authority_matrix import AGENT, REFUND_30, REVIEWER
from tests.conftest import admit, count_rows
from tests.support.evidence import SIGNER
from tests.worker.support import refunds

OTHER = Context(tenant_id="globex", actor_id="ops")


def _gauges(reader: InMemoryMetricReader) -> dict[str, dict[tuple[Any, ...], float]]:
    found: dict[str, dict[tuple[Any, ...], float]] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                points = found.setdefault(metric.name, {})
                for point in metric.data.data_points:
                    points[tuple(sorted((point.attributes or {}).items()))] = float(point.value)
    return found


def _tenant(tenant: str, **more: str) -> tuple[Any, ...]:
    attributes = {"effectledger.tenant_id": tenant}
    attributes.update({f"effectledger.{key}": value for key, value in more.items()})
    return tuple(sorted(attributes.items()))


def test_the_gauges_report_every_tenants_states_uncertainty_and_seal_lag_from_one_read(
    store_url: str, tmp_path: Path
) -> None:
    """On collection the gauges show each tenant's operations by state, its uncertain ones and
    the oldest's age, and its unsealed events and their lag, from one store read."""
    clock = ManualClock()
    world = refunds(store_url, tmp_path, clock=clock, signer=SIGNER)
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    ticks = [0.0]
    gauges = register_ledger_gauges(
        world.app.store, clock, meter_provider=provider, monotonic=lambda: ticks[0]
    )
    assert gauges is not None
    try:
        proposal = world.app.propose(AGENT, "refund_order", REFUND_30)
        world.app.approve(REVIEWER, proposal)
        assert world.app.perform(AGENT, proposal).state is OperationState.SUCCEEDED
        world.uncertain(1)
        world.ready(1)
        admit(world.app.ledger, OTHER, world.receiver, "op-globex")
        clock.advance(timedelta(seconds=90))

        seen = _gauges(reader)
        assert gauges.reads == 1  # five gauges, one reading of the store
        assert set(seen) == {f"effectledger.{name}" for name in GAUGES}
        operations = seen["effectledger.operations"]
        assert operations[_tenant("acme", state="SUCCEEDED")] == 1
        assert operations[_tenant("acme", state="OUTCOME_UNKNOWN")] == 1
        assert operations[_tenant("acme", state="READY")] == 1
        assert operations[_tenant("acme", state="MANUAL_REVIEW")] == 0
        assert operations[_tenant("globex", state="READY")] == 1
        assert seen["effectledger.uncertain_operations"] == {
            _tenant("acme"): 1,
            _tenant("globex"): 0,
        }
        assert seen["effectledger.uncertain_oldest_age"] == {
            _tenant("acme"): 90.0,
            _tenant("globex"): 0.0,
        }
        pending = count_rows(store_url, "log_pending", "tenant_id = 'acme'")
        assert pending > 0
        assert seen["effectledger.seal_pending_events"][_tenant("acme")] == pending
        assert seen["effectledger.seal_lag"][_tenant("acme")] == 90.0
        summary = world.app.summary(REVIEWER)
        assert summary.uncertain == 1
        assert summary.seal_pending == pending

        world.app.seal(REVIEWER)
        ticks[0] = 5.0  # the next collection reads the store again
        seen = _gauges(reader)
        assert gauges.reads == 2
        assert seen["effectledger.seal_pending_events"][_tenant("acme")] == 0
        assert seen["effectledger.seal_lag"][_tenant("acme")] == 0.0

        gauges.close()
        ticks[0] = 10.0
        seen = _gauges(reader)
        assert gauges.reads == 2  # closed: nothing is read, nothing reported
        assert all(not points for points in seen.values())
    finally:
        gauges.close()
        provider.shutdown()
        world.close()
