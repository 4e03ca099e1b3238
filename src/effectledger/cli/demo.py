"""``effectledger demo``: the whole story on fresh SQLite files.

An agent proposes a refund of 30; policy requires approval; a reviewer approves that digest; the
agent's edit to 35 is refused; the dispatch performs the refund and loses the reply; a repeated
call makes no new attempt; recovery asks the receiver and reconciles. Tables show the proposal,
the approval, the operation, the capacity and the audit trail, with the receiver's own count.
The ledger is protected as ``effectledger migrate`` protects a new one (a key directory beside
it with a trail key and a log key); the story ends by sealing the log, exporting its bundle and
verifying it with the printed verifier key, and prints the ``audit verify`` command to do it again.

The demo's clock starts one recovery interval before the real time and is advanced by that
interval for recovery, so its events are stamped in the recent past and ``audit seal`` run
afterwards reports waits of about a minute, as they were.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from effectledger.app.ledger import EffectLedger
from effectledger.app.protection import create_keys
from effectledger.audit.log.origins import origin_for
from effectledger.audit.sealing.sealer import SealReport
from effectledger.callers.tools.dispatch import DispatchTool
from effectledger.cli.audit import EVENT_COLUMNS, events_rows
from effectledger.cli.options import Commands, add_wide
from effectledger.cli.output import Output
from effectledger.clock import ManualClock, SystemClock
from effectledger.destinations.simulated import SimulatedReceiver, SubmitMode
from effectledger.errors import EffectLedgerError, InvalidInput
from effectledger.events.chain import verify_chain
from effectledger.examples.refunds import OrderBook, refund_action
from effectledger.extras import require_extra
from effectledger.keyfiles import SQLITE_SUFFIX
from effectledger.ledger import LedgerSettings
from effectledger.model.operations import Context, DestinationRef
from effectledger.store import open_store

__all__ = ["register", "run_demo"]

LEDGER_FILE = "ledger.db"
RECEIVER_FILE = "receiver.db"
KEY_DIRECTORY = LEDGER_FILE + SQLITE_SUFFIX
BUNDLE_FILE = "evidence.jsonl"


def register(commands: Commands) -> None:
    """Add ``demo``."""
    demo = commands.add_parser(
        "demo",
        help="tell the lost-reply story on a fresh SQLite ledger",
        description=(
            "Admit an operation, dispatch it to a receiver that performs it and loses the reply, "
            "repeat the tool call, recover by lookup, and print the audit trail. Creates "
            f"{LEDGER_FILE} and {RECEIVER_FILE} in a new folder, or in --dir if it holds neither."
        ),
    )
    demo.add_argument(
        "--dir", type=Path, help="folder for the demo's files (default: a new temporary one)"
    )
    demo.add_argument(
        "--http",
        action="store_true",
        help="dispatch over real HTTP to the reference receiver on 127.0.0.1 (extra receiver)",
    )
    add_wide(demo)
    demo.set_defaults(handler=_run)


def _run(args: argparse.Namespace, out: Output) -> int:
    if not args.http:
        return run_demo(out, args.dir)
    require_extra("receiver", "demo --http")
    from effectledger.cli.demo_http import run_http_demo

    return run_http_demo(out, _prepare(args.dir))


def _prepare(folder: Path | None) -> Path:
    """The demo's folder, created if needed; refuses a file and never overwrites a database."""
    if folder is None:
        return Path(tempfile.mkdtemp(prefix="effectledger-demo-"))
    if folder.exists() and not folder.is_dir():
        raise InvalidInput(f"--dir {folder} is not a folder", field="dir")
    for name in (LEDGER_FILE, RECEIVER_FILE, KEY_DIRECTORY, BUNDLE_FILE):
        if (folder / name).exists():
            raise InvalidInput(
                f"--dir {folder} already holds {name}; give a new or empty folder", field="dir"
            )
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidInput(f"cannot create --dir {folder}: {exc.strerror}", field="dir") from exc
    return folder


def run_demo(out: Output, folder: Path | None = None) -> int:
    """Tell the story; return the exit code (0 when every check of the story held)."""
    folder = _prepare(folder)
    ledger_path, receiver_path = folder / LEDGER_FILE, folder / RECEIVER_FILE
    keys = create_keys(folder / KEY_DIRECTORY)
    signer = keys.load_signer()
    settings = LedgerSettings(trail_keys=keys.trail_keys)
    clock = ManualClock(SystemClock().now() - settings.recover_after)
    store = open_store(f"sqlite:///{ledger_path}")
    receiver = SimulatedReceiver(receiver_path, submit_mode=SubmitMode.ACCEPT_THEN_LOSE_REPLY)
    try:
        app = EffectLedger(store, settings=settings, clock=clock, signer=signer)
        told, operation_id = _story(out, app, receiver, clock)
        verified = _evidence(out, app, folder / BUNDLE_FILE, keys.verifier_key() or "")
        _where_to_look(out, store.url, receiver, operation_id)
        return told if verified else 1
    finally:
        store.close()
        receiver.close()


def _evidence(out: Output, app: EffectLedger, bundle: Path, verifier_key: str) -> bool:
    """Seal the log, export its bundle and verify it offline with the verifier key alone."""
    from effectledger.audit.bundles.verify import verify_bundle

    v = out.value
    auditor = Context(tenant_id="acme", actor_id="auditor", roles=frozenset({"auditor"}))
    sealed = app.seal(auditor)
    app.export(auditor, bundle)
    report = verify_bundle(bundle, [verifier_key], origin=origin_for("acme"))
    verdict = "[green]verified[/green]" if report.ok else f"[red]{report.findings[0].code}[/red]"
    waited = "" if sealed.max_delay is None else f" (the longest waited {_seconds(sealed)} s)"
    out.styled(
        f"Sealed {v(sealed.sealed)} events under the log key{waited}; the exported bundle "
        f"{v(bundle)} is {verdict} with the verifier key alone."
    )
    out.line(f"The ledger's keys are in {bundle.parent / KEY_DIRECTORY} (never in the database).")
    out.line(f"Verifier key, for reviewers: {verifier_key}")
    out.line("A reviewer with nothing but the bundle and that key verifies it:")
    out.line(f"  effectledger audit verify --bundle {bundle} --key {verifier_key} --tenant acme")
    return report.ok


def _story(
    out: Output, app: EffectLedger, receiver: SimulatedReceiver, clock: ManualClock
) -> tuple[int, str]:
    """Tell the story; its exit code (0 when every check held) and the operation's id."""
    v = out.value
    orders = OrderBook()
    destination = DestinationRef(account_id=receiver.account_id, endpoint=receiver.endpoint)
    app.register(refund_action(orders=orders, destination=destination), receiver)
    ledger = app.ledger
    agent = Context(tenant_id="acme", actor_id="support-agent-7", roles=frozenset({"agent"}))
    reviewer = Context(tenant_id="acme", actor_id="rita", roles=frozenset({"approver"}))
    out.styled(
        f"[bold]effectledger demo[/bold] in tenant {v('acme')}: ledger {v(ledger.store.url)}"
    )
    out.styled(f"receiver {v(receiver.path)} (performs, then loses its reply)")

    refund = {"order_id": "ord-1001", "amount_minor": 30, "currency": "EUR", "reason": "damaged"}
    proposal = app.propose(agent, "refund_order", refund)
    out.styled(
        f"1. The agent proposes a refund of 30 EUR minor units on ord-1001: proposal "
        f"{v(out.short(proposal.proposal_id))}, digest {v(out.short(proposal.digest))}"
    )
    decision = app.registry.get("refund_order").policy.decide(agent, proposal, clock.now())
    out.styled(f"2. Policy {v(decision.policy_version)} says: {v(decision.tier)}")
    approval = app.approve(reviewer, proposal)
    out.styled(
        f"3. Reviewer rita approves exactly that digest: {v(out.short(approval.approval_id))}"
    )

    edited = app.propose(agent, "refund_order", {**refund, "amount_minor": 35})
    refused = app.perform(agent, edited, approval=approval)
    out.styled(
        f"4. The agent edits the amount to 35 and presents rita's approval: "
        f"[red]{v(refused.outcome)} ({v(refused.reason)})[/red], receiver effects: "
        f"{receiver.counts().effects}"
    )

    first = app.perform(agent, proposal, approval=approval)
    usage = app.capacity(reviewer, "refunds")
    out.styled(
        f"5. The approved refund is admitted and dispatched; the reply is lost: "
        f"[yellow]{v(first.state)}[/yellow] (uncertain: {first.uncertain}); "
        f"held {usage.held}, committed {usage.committed}"
    )
    operation_id = proposal.operation_id
    tool = DispatchTool.for_operation(app, agent, operation_id)
    again = tool.invoke()
    out.styled(
        f"6. The agent calls the dispatch tool again: [yellow]{v(again.state)}[/yellow], no new "
        f"attempt (receiver saw {receiver.counts().submissions} submission)"
    )
    try:
        tool.invoke({"amount_minor": 3000})
    except EffectLedgerError as exc:
        out.styled(f"7. A call that smuggles an amount is refused: [red]{v(exc.code)}[/red]")

    clock.advance(ledger.settings.recover_after)
    reconciled = app.reconcile(agent, operation_id)
    usage = app.capacity(reviewer, "refunds")
    out.styled(
        f"8. {int(ledger.settings.recover_after.total_seconds())} s later (demo clock) recovery "
        f"looks up the persisted key: [green]{v(reconciled.state)}[/green], provider reference "
        f"{v(reconciled.provider_reference)}; held {usage.held}, committed {usage.committed}"
    )

    operation = app.operation(agent, operation_id)
    consumed = app.authority.approval_consumed_by(agent, approval.approval_id)
    facts = {
        "Proposal": [
            ("proposal", out.short(proposal.proposal_id)),
            ("proposer", proposal.proposer_id),
            ("action", f"{proposal.action} ({proposal.contract_version})"),
            ("target", f"{proposal.target} at {proposal.resource_version}"),
            ("arguments", str(dict(proposal.arguments))),
            ("digest", out.short(proposal.digest)),
        ],
        "Approval": [
            ("approval", out.short(approval.approval_id)),
            ("approver", approval.approver_id),
            ("digest", out.short(approval.digest)),
            ("consumed by", out.short(consumed)),
        ],
        "Operation": [
            ("operation", out.short(operation.operation_id)),
            ("state", str(operation.state)),
            ("idempotency key", out.short(operation.idempotency_key)),
            ("provider reference", out.short(operation.provider_reference)),
            ("capacity", f"refunds: held {usage.held}, committed {usage.committed}"),
        ],
    }
    for title, rows in facts.items():
        out.table(title, ("field", "value"), rows, header=False, no_wrap=("field",))
    events = app.events(reviewer, operation_id)
    verify_chain(events, head=operation.last_event_hash)
    out.table(
        f"Audit trail of {out.short(operation_id)}",
        EVENT_COLUMNS,
        events_rows(out, events),
        no_wrap=("event", "actor", "attempt"),
    )
    counts = receiver.counts()
    out.styled(
        f"Hash chain verified over {len(events)} events. Receiver's own count: "
        f"{counts.submissions} submission, {counts.lookups} lookup, "
        f"[bold]{counts.effects} effect[/bold]."
    )
    ok = counts.effects == 1 and refused.reason == "digest_mismatch"
    return 0 if ok else 1, operation_id


def _seconds(sealed: SealReport) -> str:
    return "-" if sealed.max_delay is None else f"{sealed.max_delay.total_seconds():.0f}"


def _where_to_look(out: Output, url: str, receiver: SimulatedReceiver, operation_id: str) -> None:
    """The commands (and the page) to look at what the demo made, with its full ids."""
    out.line()
    out.line(f"Tenant acme, operation {operation_id}. To look at what the demo made:")
    out.line(f"  effectledger status --db {url} --tenant acme {operation_id}")
    out.line(f"  effectledger audit explain --db {url} --tenant acme {operation_id}")
    out.line(
        "On the reviewer's desk (extra server): create a key, serve, and log in with its token:"
    )
    out.line(
        f"  effectledger keys create --db {url} --tenant acme --actor rita --roles approver,auditor"
    )
    out.line(
        f"  EFFECTLEDGER_RECEIVER={receiver.path} effectledger serve --db {url} "
        "--app effectledger.examples.refunds:desk_app --plain-http-cookies"
    )
    out.line(f"  http://127.0.0.1:8000/desk/operations/{operation_id}")
