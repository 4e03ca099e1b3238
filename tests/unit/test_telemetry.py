"""OpenTelemetry spans and counters of a refund's life, read from the SDK's in-memory exporter."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from effectledger import OperationState, SubmitMode
from effectledger.audit.keys.signers import Signer
from effectledger.model.authority import Correlation
from tests.acceptance.test_authority_matrix import AGENT, REFUND_30, REVIEWER
from tests.worker.support import LOOKUP_WINDOW, Refunds, refunds


@pytest.fixture(scope="module")
def exported() -> tuple[InMemorySpanExporter, InMemoryMetricReader]:
    """The process's OpenTelemetry SDK, set once, exporting to memory."""
    spans = InMemorySpanExporter()
    tracing = TracerProvider()
    tracing.add_span_processor(SimpleSpanProcessor(spans))
    trace.set_tracer_provider(tracing)
    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    return spans, reader


@pytest.fixture
def world(store_url: str, tmp_path: Path) -> Iterator[Refunds]:
    """The refund application over a fresh store, on a manual clock, with a log key."""
    made = refunds(store_url, tmp_path, signer=Signer("log.example/otel", bytes(range(32))))
    yield made
    made.close()


def _counter(reader: InMemoryMetricReader, name: str) -> dict[tuple[Any, ...], int]:
    found: dict[tuple[Any, ...], int] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == name:
                    for point in metric.data.data_points:
                        found[tuple(sorted(point.attributes.items()))] = int(point.value)
    return found


def test_a_refund_leaves_spans_with_its_ids_and_counters_by_outcome(
    world: Refunds, exported: tuple[InMemorySpanExporter, InMemoryMetricReader]
) -> None:
    """Propose, approve, perform, submit, lookup and seal each make a span carrying the
    operation, proposal, tool-call and trace ids (never an argument); counters count outcomes."""
    spans, reader = exported
    spans.clear()
    before = _counter(reader, "effectledger.performs")
    correlation = Correlation(tool_call_id="call_abc123", trace_id="trace-0af7651916cd43dd")
    proposal = world.app.propose(AGENT, "refund_order", REFUND_30, correlation=correlation)
    world.app.approve(REVIEWER, proposal)
    world.receiver.submit_mode = SubmitMode.ACCEPT_THEN_LOSE_REPLY
    result = world.app.perform(AGENT, proposal)
    world.receiver.submit_mode = SubmitMode.ACCEPT
    assert result.state is OperationState.OUTCOME_UNKNOWN
    denied = world.app.perform(AGENT, world.app.propose(AGENT, "refund_order", REFUND_30))
    assert denied.reason is not None
    world.app.ledger.clock.advance(LOOKUP_WINDOW)  # type: ignore[attr-defined]
    assert world.app.recover().resolved
    world.app.seal(AGENT)

    finished: list[ReadableSpan] = list(spans.get_finished_spans())
    by_name: dict[str, list[ReadableSpan]] = {}
    for span in finished:
        by_name.setdefault(span.name, []).append(span)
    assert {f"effectledger.{step}" for step in ("propose", "approve", "perform", "submit",
            "lookup", "seal")} <= by_name.keys()  # fmt: skip
    perform = dict(by_name["effectledger.perform"][0].attributes or {})
    assert perform["effectledger.proposal_id"] == proposal.proposal_id
    assert perform["effectledger.operation_id"] == result.operation_id
    assert perform["gen_ai.tool.call.id"] == "call_abc123"
    assert perform["effectledger.correlation.trace_id"] == "trace-0af7651916cd43dd"
    assert (perform["effectledger.state"], perform["effectledger.uncertain"]) == (
        "OUTCOME_UNKNOWN",
        True,
    )
    submit = by_name["effectledger.submit"][0]
    assert submit.parent is not None
    assert submit.parent.span_id == by_name["effectledger.perform"][0].context.span_id
    assert dict(submit.attributes or {})["effectledger.outcome"] == "Unknown"
    lookup = dict(by_name["effectledger.lookup"][0].attributes or {})
    assert lookup["effectledger.operation_id"] == result.operation_id
    assert lookup["effectledger.outcome"] == "Accepted"
    assert dict(by_name["effectledger.seal"][0].attributes or {})["effectledger.sealed"] > 0
    propose = dict(by_name["effectledger.propose"][0].attributes or {})
    assert propose["gen_ai.tool.call.id"] == "call_abc123"
    for span in finished:  # identifiers only: no argument value reaches a span
        assert not {"ord-1001", "damaged"} & {str(v) for v in (span.attributes or {}).values()}

    performs = _counter(reader, "effectledger.performs")
    performed = (("effectledger.outcome", "performed"),)
    assert performs[performed] - before.get(performed, 0) == 1
    denials = _counter(reader, "effectledger.denials")
    assert denials[(("effectledger.reason", str(denied.reason.value)),)] >= 1
    assert _counter(reader, "effectledger.lookups")[(("effectledger.outcome", "Accepted"),)] >= 1
