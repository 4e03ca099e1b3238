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


def _tree(finished: list[ReadableSpan]) -> str:
    """The spans as an operator's trace view shows them: each trace a tree, links beside."""
    by_trace: dict[int, list[ReadableSpan]] = {}
    for span in sorted(finished, key=lambda s: s.start_time or 0):
        by_trace.setdefault(span.context.trace_id, []).append(span)
    lines: list[str] = []
    for trace_id, spans in by_trace.items():
        lines.append(f"trace {trace_id:032x}")
        depth: dict[int, int] = {}
        for span in spans:
            level = depth.get(span.parent.span_id, -1) + 1 if span.parent else 0
            depth[span.context.span_id] = level
            linked = "".join(
                f"  -> linked to {link.context.trace_id:032x}/{link.context.span_id:016x}"
                for link in span.links
            )
            lines.append(f"{'  ' * (level + 1)}{span.name}{linked}")
    return "\n".join(lines)


def test_a_refunds_later_spans_link_to_the_trace_that_admitted_it(
    world: Refunds,
    exported: tuple[InMemorySpanExporter, InMemoryMetricReader],
    store_url: str,
) -> None:
    """A refund whose reply is lost is performed in the agent's trace; the row beside the
    operation keeps that perform's traceparent; recovery's lookup, an escalation, its
    resolution and the seal run in traces of their own and each links to the perform (the
    submit inside the perform's own trace does not), read back from the store."""
    from effectledger import Context, LookupMode, Observation
    from effectledger.ledger import traces
    from tests.conftest import run_sql

    spans, _ = exported
    spans.clear()
    tracer = trace.get_tracer("agent")
    world.receiver.submit_mode = SubmitMode.ACCEPT_THEN_LOSE_REPLY
    performed = []
    for _ in range(2):
        with tracer.start_as_current_span("agent turn"):
            proposal = world.app.propose(AGENT, "refund_order", REFUND_30)
            world.app.approve(REVIEWER, proposal)
            performed.append(world.app.perform(AGENT, proposal))
    world.receiver.submit_mode = SubmitMode.ACCEPT
    first, second = performed
    assert {r.state for r in performed} == {OperationState.OUTCOME_UNKNOWN}
    finished = list(spans.get_finished_spans())
    perform_spans = [s for s in finished if s.name == "effectledger.perform"]
    kept = {
        str(op): str(parent)
        for op, parent in run_sql(
            store_url, "SELECT operation_id, traceparent FROM operation_traces"
        )
    }
    for result, span in zip(performed, perform_spans, strict=True):
        context = span.context
        assert kept[result.operation_id] == (
            f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"
        )

    traces._RECENT.clear()  # as in a worker process: the links come from the stored rows
    world.receiver.lookup_mode = LookupMode.UNKNOWN
    world.app.ledger.clock.advance(LOOKUP_WINDOW)  # type: ignore[attr-defined]
    with tracer.start_as_current_span("worker pass"):
        world.app.recover()
    ops = Context(tenant_id="acme", actor_id="oscar", roles=frozenset({"payments-ops"}))
    with tracer.start_as_current_span("review"):
        world.app.escalate(ops, second.operation_id, reason="customer called", owner="payments-ops")
        key = world.app.operation(ops, second.operation_id).idempotency_key
        receipt = world.receiver.receipt(key)
        resolved = world.app.resolve(
            ops, second.operation_id, Observation.accepted(receipt, "ops/ticket-1")
        )
    assert resolved.state is OperationState.SUCCEEDED
    with tracer.start_as_current_span("sealing"):
        world.app.seal(AGENT)

    finished = list(spans.get_finished_spans())
    print(_tree(finished))
    first_perform, second_perform = perform_spans

    def links(span: ReadableSpan) -> set[tuple[int, int]]:
        assert all(dict(link.attributes or {}) == {"effectledger.link": "admitted"}
                   for link in span.links)  # fmt: skip
        return {(link.context.trace_id, link.context.span_id) for link in span.links}

    def of(perform: ReadableSpan) -> tuple[int, int]:
        return (perform.context.trace_id, perform.context.span_id)

    lookups = {
        dict(s.attributes or {})["effectledger.operation_id"]: s
        for s in finished
        if s.name == "effectledger.lookup"
    }
    assert links(lookups[first.operation_id]) == {of(first_perform)}
    assert links(lookups[second.operation_id]) == {of(second_perform)}
    (escalate,) = [s for s in finished if s.name == "effectledger.escalate"]
    (resolve,) = [s for s in finished if s.name == "effectledger.resolve"]
    assert links(escalate) == links(resolve) == {of(second_perform)}
    (seal,) = [s for s in finished if s.name == "effectledger.seal"]
    assert links(seal) == {of(first_perform), of(second_perform)}
    for submit in (s for s in finished if s.name == "effectledger.submit"):
        assert submit.links == ()  # in the perform's own trace: nothing to link
    assert len({s.context.trace_id for s in (first_perform, escalate, seal)}) == 3


def test_a_span_whose_link_cannot_be_read_goes_on_without_it(
    world: Refunds,
    exported: tuple[InMemorySpanExporter, InMemoryMetricReader],
    store_url: str,
) -> None:
    """A link is telemetry: when the admission's trace cannot be read back (here its table is
    gone; in production, a connection lost under the read), recovery's lookup still runs, its
    span has no link, and the refund is settled once, by the receiver's own count."""
    from effectledger import LookupMode
    from effectledger.ledger import traces
    from tests.conftest import run_sql

    spans, _ = exported
    world.receiver.submit_mode = SubmitMode.ACCEPT_THEN_LOSE_REPLY
    with trace.get_tracer("agent").start_as_current_span("agent turn"):
        proposal = world.app.propose(AGENT, "refund_order", REFUND_30)
        world.app.approve(REVIEWER, proposal)
        lost = world.app.perform(AGENT, proposal)
    assert lost.state is OperationState.OUTCOME_UNKNOWN
    traces._RECENT.clear()  # as in a worker process: the link would come from the stored row
    run_sql(store_url, "DROP TABLE operation_traces")
    spans.clear()
    world.receiver.lookup_mode = LookupMode.ANSWER
    world.app.ledger.clock.advance(LOOKUP_WINDOW)  # type: ignore[attr-defined]
    world.app.recover()
    assert world.app.operation(AGENT, lost.operation_id).state is OperationState.SUCCEEDED
    lookups = [s for s in spans.get_finished_spans() if s.name == "effectledger.lookup"]
    assert lookups
    assert all(not span.links for span in lookups)
    counts = world.receiver.counts()
    assert (counts.submissions, counts.effects) == (1, 1)
