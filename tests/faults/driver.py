"""A child process for the fault tests: runs ledger steps that a crash point may cut short.

Run by path, ``python driver.py --store URL --receiver FILE --start ISO --operation OP STEP...``.
The steps run in order against a real store and a real simulated receiver:

* ``admit`` admits the operation for :data:`COMMAND`, bound to the receiver;
* ``execute`` dispatches it through the :class:`~effectledger.workers.executor.Executor`;
* ``advance:<seconds>`` moves the child's :class:`~effectledger.clock.ManualClock`;
* ``recover`` runs one :class:`~effectledger.workers.recovery.RecoveryWorker` pass.

The clock starts at ``--start``, so parent and child agree on every window without sleeping.
``EFFECTLEDGER_CRASH_AT`` (read when :mod:`effectledger` is imported) makes the child SIGKILL
itself at that crash point. Before and after each step the child prints ``start <step>`` and
``done <step>`` and flushes, so the parent can tell which step a crash cut short.

:func:`contend` and :func:`admit_many` are the bodies of the contention tests' spawned
processes; they only import :mod:`effectledger`, so the child needs nothing from the tests.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from effectledger import (
    AdmissionConflict,
    Command,
    Context,
    DestinationRef,
    EffectLedgerError,
    LedgerSettings,
    ManualClock,
    Operation,
    SimulatedReceiver,
    SubmitMode,
)
from effectledger.ledger import Ledger
from effectledger.store import open_store
from effectledger.workers import Executor, RecoveryWorker

TENANT = "acme"
ACTOR = "alice"
COMMAND = Command(
    action="send_support_reply",
    contract_version="reply-v1",
    arguments={"recipient": "customer@example.com", "body": "Your refund is on its way."},
)
# The receiver's writes only have to survive a killed process, not a power cut.
RECEIVER_SYNCHRONOUS = "NORMAL"


def context() -> Context:
    """The trusted caller every child acts as."""
    return Context(tenant_id=TENANT, actor_id=ACTOR)


def admit(
    ledger: Ledger, receiver: SimulatedReceiver, operation_id: str, *, body: str = ""
) -> Operation:
    """Admit ``operation_id`` for :data:`COMMAND` (or a conflicting body), bound to ``receiver``."""
    command = COMMAND
    if body:
        command = Command(
            action=COMMAND.action,
            contract_version=COMMAND.contract_version,
            arguments={**COMMAND.arguments, "body": body},
        )
    return ledger.admit(
        context(),
        operation_id=operation_id,
        revision="rev-1",
        command=command,
        destination=DestinationRef(account_id=receiver.account_id, endpoint=receiver.endpoint),
        admission_reference=f"approval/{operation_id}",
    )


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def run_steps(
    *,
    store_url: str,
    receiver_path: str,
    start: datetime,
    operation_id: str,
    steps: Sequence[str],
    submit_mode: SubmitMode,
) -> None:
    """Run ``steps`` in order (see the module docstring), announcing each one."""
    clock = ManualClock(start)
    store = open_store(store_url)
    ledger = Ledger(store, clock=clock, settings=LedgerSettings())
    receiver = SimulatedReceiver(
        receiver_path, submit_mode=submit_mode, synchronous=RECEIVER_SYNCHRONOUS
    )
    try:
        for step in steps:
            _say(f"start {step}")
            if step == "admit":
                admit(ledger, receiver, operation_id)
            elif step == "execute":
                result = Executor(ledger, receiver).execute(context(), operation_id)
                _say(f"state {result.state.value}")
            elif step.startswith("advance:"):
                clock.advance(timedelta(seconds=float(step.partition(":")[2])))
            elif step == "recover":
                report = RecoveryWorker(ledger, receiver).run_once()
                _say(f"resolved {len(report.resolved)} failed {len(report.failed)}")
            else:
                raise SystemExit(f"unknown step {step!r}")
            _say(f"done {step}")
    finally:
        store.close()
        receiver.close()


def contend(
    store_url: str,
    receiver_path: str,
    operation_ids: Sequence[str],
    start: datetime,
    open_lock: Any,
    barrier: Any,
    results: Any,
    worker: int,
) -> None:
    """Admit and execute every operation, racing the other workers; report what was raised.

    Every exception is caught and reported as ``(module.qualname, code, attempts)`` so the parent
    can check that contention only ever surfaces as the project's own ``StorageBusy``. Stores
    are opened one at a time (``open_lock``): opening migrates, and the race under test is the
    one over operations, not over the schema.
    """
    with open_lock:
        store = open_store(store_url)
    ledger = Ledger(store, clock=ManualClock(start))
    receiver = SimulatedReceiver(receiver_path, synchronous=RECEIVER_SYNCHRONOUS)
    executor = Executor(ledger, receiver, executor_id=f"worker-{worker}")
    errors: list[tuple[str, str | None, int | None]] = []
    states: dict[str, str] = {}
    barrier.wait()
    try:
        for operation_id in operation_ids:
            try:
                admit(ledger, receiver, operation_id)
                states[operation_id] = executor.execute(context(), operation_id).state.value
            except Exception as exc:
                details = exc.details if isinstance(exc, EffectLedgerError) else {}
                errors.append(
                    (
                        f"{type(exc).__module__}.{type(exc).__qualname__}",
                        getattr(exc, "code", None),
                        details.get("attempts"),
                    )
                )
    finally:
        store.close()
        receiver.close()
    results.put({"worker": worker, "errors": errors, "states": states})


def admit_many(
    store_url: str,
    receiver_path: str,
    operation_ids: Sequence[str],
    body: str,
    start: datetime,
    barrier: Any,
    results: Any,
    worker: int,
) -> None:
    """Admit every operation (with ``body`` if given), racing the others; report each answer.

    The answer per operation is ``("admitted", idempotency_key)`` or ``("conflict", code)``.
    """
    store = open_store(store_url)
    ledger = Ledger(store, clock=ManualClock(start))
    receiver = SimulatedReceiver(receiver_path, synchronous=RECEIVER_SYNCHRONOUS)
    answers: dict[str, tuple[str, str]] = {}
    barrier.wait()
    try:
        for operation_id in operation_ids:
            try:
                operation = admit(ledger, receiver, operation_id, body=body)
                answers[operation_id] = ("admitted", operation.idempotency_key)
            except AdmissionConflict as exc:
                answers[operation_id] = ("conflict", exc.code)
    finally:
        store.close()
        receiver.close()
    results.put({"worker": worker, "answers": answers})


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line and run the steps."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True, help="ledger store URL")
    parser.add_argument("--receiver", required=True, help="the simulated receiver's file")
    parser.add_argument("--start", required=True, help="the ManualClock's start (ISO 8601, UTC)")
    parser.add_argument("--operation", required=True, help="the operation id")
    parser.add_argument(
        "--submit-mode",
        default=SubmitMode.ACCEPT.value,
        choices=[mode.value for mode in SubmitMode],
        help="how the receiver answers submissions",
    )
    parser.add_argument("steps", nargs="+", help="admit, execute, advance:<seconds>, recover")
    args = parser.parse_args(argv)
    run_steps(
        store_url=args.store,
        receiver_path=args.receiver,
        start=datetime.fromisoformat(args.start),
        operation_id=args.operation,
        steps=args.steps,
        submit_mode=SubmitMode(args.submit_mode),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
