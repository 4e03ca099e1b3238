-- effectledger PostgreSQL schema, migration 17: the trace each operation was admitted in.
--
-- With OpenTelemetry tracing on, an admission keeps the W3C trace context (traceparent) of the
-- span it ran in, and every later span for the operation (the worker's submit, recovery's
-- lookups, escalation and resolution, the seal of its events) links to it, so one trace view
-- shows an operation's whole life. Telemetry is not the ledger: a row here is written only while
-- a tracer provider records, is never part of the evidence, and holds identifiers only.
CREATE TABLE operation_traces (
    tenant_id    TEXT NOT NULL,
    operation_id TEXT NOT NULL,
    traceparent  TEXT NOT NULL CHECK (length(traceparent) = 55),
    PRIMARY KEY (tenant_id, operation_id)
);
