"""Telemetry costs nothing until the application sets a tracer provider, then records spans."""

from __future__ import annotations

import subprocess
import sys


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
