"""``effectledger worker --app MODULE:FACTORY``: dispatch, recovery and sealing in one process.

The process runs the :class:`~effectledger.workers.Worker` loops over the application's declared
actions and destinations until SIGTERM or SIGINT, then lets each loop finish the operation in
hand and exits 0 with a summary of what it did. ``--once`` runs one pass of each loop and
exits (1 if a pass failed). Log lines go to standard error.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
from datetime import UTC, datetime
from typing import Any

from effectledger.app import EffectLedger
from effectledger.app.config import SETTINGS, load_config
from effectledger.cli.application import load_ledger
from effectledger.cli.options import Commands, add_db, add_json, on_stop_signals, restore_signals
from effectledger.cli.output import Output
from effectledger.ledger.summary import register_ledger_gauges
from effectledger.telemetry import Gauges
from effectledger.workers import Worker, WorkerSettings

__all__ = [
    "JsonLines",
    "add_worker_options",
    "ledger_gauges",
    "log_to_stderr",
    "register",
    "stop_on_signals",
    "worker_from",
]


def register(commands: Commands) -> None:
    """Add ``worker``."""
    parser = commands.add_parser(
        "worker",
        help="run dispatch, recovery and sealing for the application's destinations",
        description="Run the guarded executor over READY operations, recovery (lookups by key, "
        "never a resubmission, and escalation) over due attempts, and the log sealer, for the "
        "actions and destinations the application declares. Stops gracefully on SIGTERM or "
        "SIGINT; backs off while the store does not answer. Any number of workers may share "
        "one PostgreSQL database.",
    )
    add_db(parser)
    parser.add_argument(
        "--app",
        required=True,
        metavar="MODULE:FACTORY",
        help="the EffectLedger whose actions to run, or a callable that returns it",
    )
    parser.add_argument("--once", action="store_true", help="one pass of each loop, then exit")
    add_worker_options(parser)
    add_json(parser)
    parser.set_defaults(handler=_run)


_OPTIONS = (
    ("--dispatch-interval", float, "dispatch_interval_s", "seconds between idle dispatch passes"),
    ("--dispatch-threads", int, "dispatch_threads", "dispatch threads, 0 for none"),
    ("--recovery-interval", float, "recovery_interval_s", "seconds between idle recovery passes"),
    ("--recovery-threads", int, "recovery_threads", "recovery threads, 0 for none"),
    (
        "--seal-interval",
        float,
        "seal_interval_s",
        "seconds between sealing passes, 0 for no sealing (with the log key the application's "
        "connect() found: the key directory's, or $EFFECTLEDGER_LOG_KEY)",
    ),
    ("--batch", int, "batch", "operations one pass takes at most"),
    (
        "--claim-batch",
        int,
        "claim_batch",
        "READY operations of one destination claimed in one transaction, sent together "
        "(within the destination's concurrent_sends) and recorded in one; 1 for each on its own",
    ),
)
"""Each loop option: its flag, type, configuration key and meaning."""


def add_worker_options(parser: argparse.ArgumentParser) -> None:
    """The loops' intervals, threads and batch (``worker`` and ``serve --worker``).

    An option not given takes its value from the configuration (:mod:`effectledger.app.config`).
    """
    parser.add_argument(
        "--log-format",
        choices=("text", "json"),
        default=os.environ.get("EFFECTLEDGER_LOG_FORMAT", "text"),
        help="log lines on standard error as text or one JSON object per line "
        "(default: $EFFECTLEDGER_LOG_FORMAT or text)",
    )
    group = parser.add_argument_group("worker loops (default: the configuration)")
    defaults = {setting.key: setting for setting in SETTINGS}
    for flag, kind, key, meaning in _OPTIONS:
        setting = defaults[key]
        shown = 0 if setting.default is None else setting.default
        group.add_argument(
            flag,
            type=kind,
            dest=key,
            default=None,
            help=f"{meaning} (default {shown}; {setting.variable})",
        )
    group.add_argument(
        "--sealer-memory",
        metavar="PATH",
        dest="sealer_memory",
        default=None,
        help="file where the sealer keeps the last tree it signed per log, outside the "
        "database: a rolled-back or forked log is refused before any signature (default: "
        "sealer-memory.json in the ledger's key directory; EFFECTLEDGER_WORKER_SEALER_MEMORY)",
    )


def worker_from(ledger: EffectLedger, args: argparse.Namespace) -> Worker:
    """A worker over ``ledger`` with the loop options in ``args``, else the configuration."""
    config = load_config()

    def chosen(key: str) -> Any:
        given = getattr(args, key)
        return config[key] if given is None else given

    seal = chosen("seal_interval_s")
    settings = WorkerSettings(
        dispatch_interval=chosen("dispatch_interval_s"),
        dispatch_threads=chosen("dispatch_threads"),
        recovery_interval=chosen("recovery_interval_s"),
        recovery_threads=chosen("recovery_threads"),
        seal_interval=seal or None,
        seal_witnesses=config["seal_witnesses"],
        sealer_memory=getattr(args, "sealer_memory", None) or config["sealer_memory"],
        batch=chosen("batch"),
        claim_batch=chosen("claim_batch"),
    )
    return Worker(ledger, settings)


def ledger_gauges(ledger: EffectLedger) -> Gauges | None:
    """The ledger's OpenTelemetry gauges over every tenant, registered for this process."""
    return register_ledger_gauges(ledger.store, ledger.ledger.clock)


def _run(args: argparse.Namespace, out: Output) -> int:
    log_to_stderr(args.log_format)
    # A signal that arrives while the application loads is kept, not fatal: once the worker
    # exists it stops at once, having started nothing (exit 0, as for a signal later on).
    early: list[int] = []
    original = {} if args.once else hold_signals(early)
    gauges = None
    try:
        ledger = load_ledger(args.app, args.db)
        try:
            worker = worker_from(ledger, args)
            if args.once:
                done = worker.run_once()
                _summary(out, worker, done)
                return 0
            stop_on_signals(worker)
            if early:
                _received(early[0])
                worker.stop()
            gauges = ledger_gauges(ledger)  # a long-running worker only, once signals stop it
            worker.run()
            _summary(out, worker, None)
            return 0
        finally:
            if gauges is not None:
                gauges.close()
            ledger.close()
    finally:
        restore_signals(original)


def hold_signals(received: list[int]) -> dict[int, Any]:
    """Note SIGTERM and SIGINT in ``received`` until a worker exists; the previous handlers."""
    return on_stop_signals(received.append)


def _received(number: int) -> None:
    logging.getLogger("effectledger.workers").info(
        "%s received: finishing the operations in hand", signal.Signals(number).name
    )


def stop_on_signals(worker: Worker) -> dict[int, Any]:
    """SIGTERM and SIGINT stop the worker gracefully; the previous handlers, to restore."""

    def stop(number: int) -> None:
        _received(number)
        worker.stop()

    return on_stop_signals(stop)


class JsonLines(logging.Formatter):
    """One JSON object per log record: time, level, logger and message (for log shippers)."""

    def format(self, record: logging.LogRecord) -> str:
        return json.dumps(
            {
                "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
                "level": record.levelname,
                "logger": record.name,
                "message": record.getMessage(),
            },
            ensure_ascii=True,
        )


def log_to_stderr(log_format: str = "text") -> None:
    """Show the library's log lines (INFO and above) on standard error, unless already shown;
    ``json`` prints one JSON object per line."""
    root = logging.getLogger("effectledger")
    # The library's own NullHandler does not count: only a handler that shows something does.
    if not any(not isinstance(h, logging.NullHandler) for h in root.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(
            JsonLines()
            if log_format == "json"
            else logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
        )
        root.addHandler(handler)
        root.setLevel(logging.INFO)


def _summary(out: Output, worker: Worker, once: dict[str, int] | None) -> None:
    totals = {name: totals.as_dict() for name, totals in worker.totals.items()}
    if out.json_mode:
        out.json({"once": once, "totals": totals})
        return
    dispatch, recovery, seal = totals["dispatch"], totals["recovery"], totals["seal"]
    out.line(
        f"worker {'pass' if once is not None else 'stopped'}: dispatched {dispatch['items']}, "
        f"recovery reserved {recovery['items']} (resolved {recovery['resolved']}, escalated "
        f"{recovery['escalated']}), sealed {seal['items']}; store unavailable "
        f"{dispatch['store_down'] + recovery['store_down'] + seal['store_down']} pass(es)"
    )
