"""Telemetry costs nothing until the application sets a tracer provider, then records spans."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_no_span_is_started_until_a_tracer_provider_is_set() -> None:
    """Without a provider a span is a no-op; once one is set, spans are recorded."""
    script = (
        "from opentelemetry import trace\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from opentelemetry.sdk.trace.export import SimpleSpanProcessor\n"
        "from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter\n"
        "from effectledger import telemetry\n"
        "with telemetry.span('perform', tenant_id='acme') as span:\n"
        "    assert span._span is None\n"
        "exporter = InMemorySpanExporter()\n"
        "provider = TracerProvider()\n"
        "provider.add_span_processor(SimpleSpanProcessor(exporter))\n"
        "trace.set_tracer_provider(provider)\n"
        "with telemetry.span('perform', tenant_id='acme') as span:\n"
        "    assert span._span is not None\n"
        "print([s.name for s in exporter.get_finished_spans()])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['effectledger.perform']"


def test_a_replay_records_nothing_until_providers_are_set_then_its_span_and_count(
    tmp_path: Path,
) -> None:
    """A replay before any provider is set opens no span and adds to no counter (``quiet``);
    once the application sets a tracer and a meter provider, in the same process, the next
    replay records its ``perform`` span and is counted ``replayed``."""
    script = f"""
from pathlib import Path
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from effectledger import Context, SimulatedReceiver, connect, telemetry
from effectledger.examples.refunds import RefundArguments

folder = Path({str(tmp_path)!r})
agent = Context(tenant_id="acme", actor_id="agent-7")
rita = Context(tenant_id="acme", actor_id="rita", roles=frozenset({{"approver"}}))
receiver = SimulatedReceiver(folder / "receiver.db")
app = connect(f"sqlite:///{{folder / 'ledger.db'}}")
refund = app.action(
    name="refund", contract="refund-v1", arguments=RefundArguments, destination=receiver
)
proposal = app.propose(agent, refund, order_id="ord-1", amount_minor=30, currency="EUR")
app.approve(rita, proposal)
assert app.perform(agent, proposal).outcome == "performed"
assert telemetry.quiet()
assert app.perform(agent, proposal).outcome == "replayed"
spans = InMemorySpanExporter()
tracing = TracerProvider()
tracing.add_span_processor(SimpleSpanProcessor(spans))
trace.set_tracer_provider(tracing)
reader = InMemoryMetricReader()
metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
assert not telemetry.quiet()
assert app.perform(agent, proposal).outcome == "replayed"
counted = [
    (dict(point.attributes), point.value)
    for resource in reader.get_metrics_data().resource_metrics
    for scope in resource.scope_metrics
    for metric in scope.metrics
    if metric.name == "effectledger.performs"
    for point in metric.data.data_points
]
print([s.name for s in spans.get_finished_spans()], counted)
app.close()
receiver.close()
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "['effectledger.perform'] [({'effectledger.outcome': 'replayed'}, 1)]"
    )
