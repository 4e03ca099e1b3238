"""OpenTelemetry spans and metrics of what the ledger does (extra ``otel``: opentelemetry-api).

Telemetry is not the ledger: the audit trail is the record, and these signals only tell the
tools operators already run what is happening. The library depends on ``opentelemetry-api``
alone, imported on first use; without it, or until the application sets a tracer provider,
no span is started (it would record nothing), and until it sets a meter provider no counter is
added to. Whether a provider is set is decided once per provider, not per call: at first use
the API's own lookup runs once (so a provider named by ``OTEL_PYTHON_TRACER_PROVIDER`` or
``OTEL_PYTHON_METER_PROVIDER`` is loaded then), and from then on each call reads the global
that ``set_tracer_provider`` / ``set_meter_provider`` fill, without a function call, until one
is set (a provider, once set, is final). No exporter is set up
here: spans and metrics go where the application's own OpenTelemetry SDK sends them, and
nowhere without one.

Spans, each named ``effectledger.<step>``: ``propose``, ``approve``, ``perform``, ``submit``,
``lookup``, ``escalate``, ``resolve``, ``seal``. Their attributes are identifiers only, never
arguments, evidence or credentials: ``effectledger.tenant_id``, ``effectledger.proposal_id``,
``effectledger.operation_id``, ``effectledger.attempt_id``, ``effectledger.action``, the
outcome and state, and where the caller supplied them the model's ``gen_ai.tool.call.id`` and
the agent's trace id (``effectledger.correlation.trace_id``).

Traces connect: an admission keeps the W3C trace context of the span it ran in
(:func:`traceparent`, stored beside the operation), and the later spans of the operation that
run in another trace (the worker's ``submit``, recovery's ``lookup``, ``escalate``, ``resolve``,
the ``seal`` of its events) carry a span link to it (``linked=``, :meth:`Span.link`), with the
attribute ``effectledger.link`` = ``admitted``. A trace view opened at the perform shows them all.

Metrics (counters): ``effectledger.performs`` by ``outcome``, ``effectledger.denials`` by
``reason``, ``effectledger.submissions`` and ``effectledger.lookups`` by ``outcome``,
``effectledger.escalations``, ``effectledger.sealed_events``. Observable gauges (read on
collection, :func:`register_gauges`, registered by ``worker`` and ``serve``), each by
``effectledger.tenant_id``: ``effectledger.operations`` (also by ``effectledger.state``),
``effectledger.uncertain_operations``, ``effectledger.uncertain_oldest_age`` (s),
``effectledger.seal_pending_events`` and ``effectledger.seal_lag`` (s).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

__all__ = [
    "COUNTERS",
    "GAUGES",
    "SCOPE",
    "Gauges",
    "Reading",
    "Span",
    "correlation_attributes",
    "count",
    "outcome_of",
    "quiet",
    "register_gauges",
    "span",
    "traceparent",
]

_log = logging.getLogger("effectledger.telemetry")

SCOPE = "effectledger"
"""The instrumentation scope name of every span and metric."""

Attribute = str | int | bool


class Span:
    """The span in progress (or nothing, without OpenTelemetry): add attributes as learned."""

    __slots__ = ("_span",)

    def __init__(self, span: Any) -> None:
        self._span = span

    def set(self, **attributes: Attribute | None) -> None:
        """Set ``effectledger.<name>`` attributes; ``None`` values are left out."""
        if self._span is not None:
            for name, value in attributes.items():
                if value is not None:
                    self._span.set_attribute(_key(name), value)

    @property
    def recording(self) -> bool:
        """Whether the span records (else setting or linking anything does nothing)."""
        return self._span is not None

    def link(self, parents: Iterable[str]) -> None:
        """Link the span to each W3C ``traceparent`` in ``parents`` outside its own trace."""
        if self._span is not None:
            for link in _links(parents, self._span.get_span_context().trace_id):
                self._span.add_link(link.context, link.attributes)

    def set_raw(self, name: str, value: Attribute | None) -> None:
        """Set one attribute under its full name (a semantic-convention name)."""
        if self._span is not None and value is not None:
            self._span.set_attribute(name, value)


@functools.cache
def _api() -> Any:
    try:
        import opentelemetry.metrics
        import opentelemetry.trace
    except ImportError:
        return None
    return opentelemetry


@functools.cache
def _tracer() -> Any:
    # A tracer got before the application sets its provider forwards to it once it is set.
    return _api().trace.get_tracer(SCOPE)


class _Providers:
    """What the first use found for each side, tracing and metrics: ``True`` (a provider is
    set: record), ``False`` (never records: no API, or a no-op tracer provider was set), or the
    API module whose global (``_TRACER_PROVIDER``, ``_METER_PROVIDER``) stays ``None`` until the
    application sets one: read on each call, without a function call, until it is set."""

    __slots__ = ("metrics", "trace")

    def __init__(self, trace: Any, metrics: Any) -> None:
        self.trace = trace
        self.metrics = metrics


_PROVIDERS: _Providers | None = None
"""Filled at first use by :func:`_providers`."""


def _providers() -> _Providers:
    """The first use: import the API, run its provider lookups once, keep what they found."""
    global _PROVIDERS
    api = _api()
    if api is None:
        _PROVIDERS = _Providers(False, False)
        return _PROVIDERS
    # An API that keeps its providers elsewhere (``True`` below) gets the recorded path on
    # every call, and decides itself.
    trace: Any = True
    if _silent(api):  # loads a provider the environment names, once
        held = getattr(api.trace, "_TRACER_PROVIDER", True)
        trace = api.trace if held is None else held is True  # else a no-op provider was set
    api.metrics.get_meter_provider()  # the same for metrics
    internal = getattr(api.metrics, "_internal", None)
    metrics: Any = internal if getattr(internal, "_METER_PROVIDER", True) is None else True
    _PROVIDERS = _Providers(trace, metrics)
    return _PROVIDERS


def _silent(api: Any) -> bool:
    """Whether the API's own lookup finds no tracer provider set: a span would record nothing."""
    trace = api.trace
    return isinstance(
        trace.get_tracer_provider(), (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
    )


def _tracing_silent() -> bool:
    found = _PROVIDERS or _providers()
    trace = found.trace
    if trace is True or trace is False:
        return not trace
    if trace._TRACER_PROVIDER is None:
        return True
    found.trace = not _silent(_api())  # set now, and final: look no more
    return not found.trace


def _metrics_silent() -> bool:
    found = _PROVIDERS or _providers()
    metrics = found.metrics
    if metrics is True or metrics is False:
        return not metrics
    if metrics._METER_PROVIDER is None:
        return True
    found.metrics = True
    return False


def quiet() -> bool:
    """Whether nothing :func:`span` or :func:`count` does would record now: no API, or neither
    a tracer nor a meter provider set. A hot path skips its telemetry altogether then (a replay
    pays this one call); the answer changes as soon as the application sets a provider."""
    found = _PROVIDERS or _providers()
    trace, metrics = found.trace, found.metrics
    return (trace is False or (trace is not True and trace._TRACER_PROVIDER is None)) and (
        metrics is False or (metrics is not True and metrics._METER_PROVIDER is None)
    )


def _key(name: str) -> str:
    return name if "." in name else f"{SCOPE}.{name}"


class _NoSpan:
    """The block of a span that would record nothing: no generator, no attributes kept."""

    __slots__ = ()

    def __enter__(self) -> Span:
        return _NO_SPAN

    def __exit__(self, *exc: object) -> None:
        return None


_NO_SPAN = Span(None)
_SILENT_BLOCK = _NoSpan()


def span(
    step: str,
    *,
    linked: Callable[[], Iterable[str]] | None = None,
    **attributes: Attribute | None,
) -> AbstractContextManager[Span]:
    """A span ``effectledger.<step>`` around the block, with ``attributes`` (``None`` left out).

    ``linked`` gives the W3C traceparents the span links to (the operation's admission); it is
    called only when the span records, and a parent in the span's own trace is left out (it is
    already in view). An exception leaving the block is recorded on the span and sets its
    status to error. Without a tracer provider the block costs one read of the API's global
    (see the module docstring).
    """
    if _tracing_silent():
        return _SILENT_BLOCK
    return _recorded(step, attributes, linked)


@contextmanager
def _recorded(
    step: str,
    attributes: Mapping[str, Attribute | None],
    linked: Callable[[], Iterable[str]] | None,
) -> Iterator[Span]:
    tracer = _tracer()
    initial = {_key(k): v for k, v in attributes.items() if v is not None}
    links: list[Any] = []
    if linked is not None:
        current = _api().trace.get_current_span().get_span_context()
        links = _links(linked(), current.trace_id if current.is_valid else None)
    with tracer.start_as_current_span(
        f"{SCOPE}.{step}", attributes=initial, links=links
    ) as started:
        yield Span(started)


MAX_LINKS = 128
"""The most links one span is given (the SDK's default limit)."""

_LINKED = {f"{SCOPE}.link": "admitted"}


def traceparent() -> str | None:
    """The W3C traceparent of the span in progress, when tracing records and one is (else
    ``None``): what an admission keeps for the operation's later spans to link to."""
    if _tracing_silent():
        return None
    context = _api().trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def _links(parents: Iterable[str], own_trace: int | None) -> list[Any]:
    """Links to the valid traceparents of ``parents`` outside trace ``own_trace``, at most
    :data:`MAX_LINKS`, each once."""
    trace = _api().trace
    links: list[Any] = []
    seen: set[tuple[int, int]] = set()
    for parent in parents:
        parsed = _parse(parent)
        if parsed is None or parsed[0] == own_trace or parsed[:2] in seen:
            continue
        seen.add(parsed[:2])
        context = trace.SpanContext(
            parsed[0], parsed[1], is_remote=True, trace_flags=trace.TraceFlags(parsed[2])
        )
        links.append(trace.Link(context, _LINKED))
        if len(links) == MAX_LINKS:
            break
    return links


def _parse(parent: str) -> tuple[int, int, int] | None:
    """(trace id, span id, flags) of a version 00 traceparent, or ``None`` if it is not one."""
    parts = parent.split("-")
    if len(parts) != 4 or parts[0] != "00" or [len(p) for p in parts[1:]] != [32, 16, 2]:
        return None
    try:
        trace_id, span_id, flags = (int(p, 16) for p in parts[1:])
    except ValueError:
        return None
    return (trace_id, span_id, flags) if trace_id and span_id else None


def correlation_attributes(target: Span, correlation: Mapping[str, str] | None) -> None:
    """Put the caller's tool-call and trace ids of a proposal's correlation on ``target``."""
    if correlation:
        target.set_raw("gen_ai.tool.call.id", correlation.get("tool_call_id"))
        target.set_raw(f"{SCOPE}.correlation.trace_id", correlation.get("trace_id"))


def outcome_of(answer: object) -> str:
    """The outcome an answer names (``Accepted``, ``Unknown``...), or ``unrecognized`` for an
    answer that is not an observation (the ledger records that as Unknown itself)."""
    value = getattr(getattr(answer, "outcome", None), "value", None)
    return value if isinstance(value, str) else "unrecognized"


COUNTERS: dict[str, tuple[str, str]] = {
    "performs": ("{call}", "Perform calls, by outcome."),
    "denials": ("{call}", "Perform calls denied, by reason."),
    "submissions": ("{submission}", "Sends to a destination, by outcome."),
    "lookups": ("{lookup}", "Lookups at a destination, by outcome."),
    "escalations": ("{operation}", "Operations escalated to manual review."),
    "sealed_events": ("{event}", "Audit events sealed into the signed log."),
}
"""The counters, ``effectledger.<name>``: unit and description. Units follow the OpenTelemetry
semantic conventions (UCUM; a count of things is an annotation in braces, its name plural)."""


@functools.cache
def _counter(name: str) -> Any:
    unit, description = COUNTERS[name]
    return (
        _api()
        .metrics.get_meter(SCOPE)
        .create_counter(f"{SCOPE}.{name}", unit=unit, description=description)
    )


def count(name: str, amount: int = 1, **attributes: Attribute) -> None:
    """Add ``amount`` to the counter ``effectledger.<name>`` with ``attributes``.

    Nothing is done until a meter provider is set: the API's counters made before then add
    nothing either (they forward only what is added after the provider is set).
    """
    if amount and not _metrics_silent():
        _counter(name).add(amount, {_key(k): v for k, v in attributes.items()})


GAUGES: dict[str, tuple[str, str]] = {
    "operations": ("{operation}", "Operations by tenant and state."),
    "uncertain_operations": (
        "{operation}",
        "Operations whose effect may or may not have happened.",
    ),
    "uncertain_oldest_age": ("s", "How long the oldest uncertain operation has gone unchanged."),
    "seal_pending_events": ("{event}", "Audit events not yet sealed into the signed log."),
    "seal_lag": ("s", "Age of the oldest audit event not yet sealed."),
}
"""The observable gauges, ``effectledger.<name>``: unit and description."""

Reading = Mapping[str, Sequence[tuple[float, Mapping[str, Attribute]]]]
"""One reading of every gauge: per gauge name, its values with their attributes."""


class Gauges:
    """The gauges' shared reading: taken by the first gauge collected, reused by the others.

    Collection asks each gauge in turn; a reading younger than ``refresh_s`` seconds serves
    them all, so one collection costs one read of the store. :meth:`close` stops the readings
    (the gauges then report nothing).
    """

    def __init__(
        self,
        read: Callable[[], Reading],
        *,
        refresh_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read: Callable[[], Reading] | None = read
        self._refresh_s = refresh_s
        self._clock = clock
        self._lock = threading.Lock()
        self._reading: Reading = {}
        self._taken: float | None = None
        self.reads = 0

    def values(self, name: str) -> Sequence[tuple[float, Mapping[str, Attribute]]]:
        """The current values of gauge ``name``, reading the figures again if they are stale."""
        with self._lock:
            if self._read is None:
                return ()
            now = self._clock()
            if self._taken is None or now - self._taken >= self._refresh_s:
                self._taken = now
                self.reads += 1
                try:
                    self._reading = self._read()
                except Exception as exc:  # a collection must never fail because the store did
                    _log.warning("the gauges could not read the ledger: %s", exc)
                    self._reading = {}
            return self._reading.get(name, ())

    def close(self) -> None:
        """Stop reading: every gauge reports nothing from now on."""
        with self._lock:
            self._read = None
            self._reading = {}


def register_gauges(
    read: Callable[[], Reading],
    *,
    meter_provider: Any = None,
    refresh_s: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
) -> Gauges | None:
    """Register the observable gauges of :data:`GAUGES`, fed by ``read`` on collection.

    With ``meter_provider`` (an SDK ``MeterProvider``) they go to it, otherwise to the global
    one. Returns ``None`` without opentelemetry-api (nothing is registered).
    """
    api = _api()
    if api is None:
        return None
    gauges = Gauges(read, refresh_s=refresh_s, clock=clock)
    meter = api.metrics.get_meter(SCOPE, meter_provider=meter_provider)
    for name, (unit, description) in GAUGES.items():
        meter.create_observable_gauge(
            f"{SCOPE}.{name}",
            callbacks=[_callback(api, gauges, name)],
            unit=unit,
            description=description,
        )
    return gauges


def _callback(api: Any, gauges: Gauges, name: str) -> Callable[[Any], Iterator[Any]]:
    def observe(options: Any) -> Iterator[Any]:
        for value, attributes in gauges.values(name):
            yield api.metrics.Observation(value, {_key(k): v for k, v in attributes.items()})

    return observe
