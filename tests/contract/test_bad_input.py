"""Bad input to the ledger, the store and destinations: ``invalid_input`` with the field, alike on
both backends, nothing written, and never a database password in a message, a log or a repr."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from effectledger import (
    Command,
    Context,
    DestinationRef,
    InvalidInput,
    SimulatedReceiver,
    StorageError,
)
from effectledger.errors import EffectLedgerError
from effectledger.ledger import Ledger, draft_operation
from effectledger.store import Store, open_store
from effectledger.workers import Executor, RecoveryWorker
from tests.acceptance.test_authority_matrix import AGENT, REVIEWER, World
from tests.conftest import admit, count_rows, reply_command

SECRET = "s3cret-pw"


def _refused(call: Any, field: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        call()
    assert refused.value.details.get("field") == field, refused.value.to_dict()


@pytest.mark.parametrize(
    ("read", "field"),
    [
        (lambda ledger, ctx: ledger.status(ctx, None), "operation_id"),
        (lambda ledger, ctx: ledger.status(ctx, "op\x00"), "operation_id"),
        (lambda ledger, ctx: ledger.get(ctx, None), "operation_id"),
        (lambda ledger, ctx: ledger.events(ctx, 5), "operation_id"),
        (lambda ledger, ctx: ledger.attempts(ctx, ""), "operation_id"),
        (lambda ledger, ctx: ledger.list_operations(ctx, limit="x"), "limit"),
        (lambda ledger, ctx: ledger.list_operations(ctx, limit=-1), "limit"),
        (lambda ledger, ctx: ledger.list_operations(ctx, limit=0), "limit"),
        (lambda ledger, ctx: ledger.list_operations(ctx, limit=True), "limit"),
        (lambda ledger, ctx: ledger.list_operations(ctx, limit=10**9), "limit"),
        (lambda ledger, ctx: ledger.list_operations(None), "context"),
        (lambda ledger, ctx: ledger.status({"tenant_id": "acme"}, "op-1"), "context"),
    ],
)
def test_reads_refuse_malformed_arguments_naming_the_field(
    ledger: Ledger, context: Context, receiver: SimulatedReceiver, read: Any, field: str
) -> None:
    """Every read answers invalid_input with the field, never not_found or a raw exception."""
    admit(ledger, context, receiver)
    _refused(lambda: read(ledger, context), field)


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (
            lambda ledger, receiver, ctx: Executor(ledger, receiver).execute(ctx, None),
            "operation_id",
        ),
        (lambda ledger, receiver, ctx: Executor(ledger, receiver).execute(None, "op-1"), "context"),
        (lambda ledger, receiver, ctx: Executor(ledger, receiver).run_ready(limit="x"), "limit"),
        (lambda ledger, receiver, ctx: Executor(ledger, receiver).run_ready(limit=-1), "limit"),
        (lambda ledger, receiver, ctx: RecoveryWorker(ledger, receiver).run_once(limit=0), "limit"),
        (
            lambda ledger, receiver, ctx: RecoveryWorker(ledger, receiver).run_once(limit="5"),
            "limit",
        ),
    ],
)
def test_workers_refuse_malformed_arguments_and_send_nothing(
    ledger: Ledger,
    store_url: str,
    context: Context,
    receiver: SimulatedReceiver,
    call: Any,
    field: str,
) -> None:
    """The executor and recovery worker answer invalid_input; no claim, no contact."""
    admit(ledger, context, receiver)
    _refused(lambda: call(ledger, receiver, context), field)
    assert count_rows(store_url, "attempts") == 0
    counts = receiver.counts()
    assert (counts.submissions, counts.lookups) == (0, 0)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"command": None}, "command"),
        (
            {"command": Command(action="a", contract_version="v1", arguments=[1])},
            "command.arguments",
        ),  # type: ignore[arg-type]
        ({"destination": ("acct", "https://x.invalid")}, "destination"),
        ({"revision": ""}, "revision"),
        ({"operation_id": "op 1"}, "operation_id"),
        ({"admission_reference": "approval/\x1b[0m"}, "admission_reference"),
        ({"admission_reference": "approval/\x00"}, "admission_reference"),
        ({"admission_reference": "x" * 513}, "admission_reference"),
    ],
)
def test_admission_refuses_malformed_arguments_and_writes_nothing(
    ledger: Ledger,
    store_url: str,
    context: Context,
    receiver: SimulatedReceiver,
    change: dict[str, Any],
    field: str,
) -> None:
    """Ledger.admit validates every argument before it writes: invalid_input, no rows."""
    arguments: dict[str, Any] = {
        "operation_id": "op-1",
        "revision": "rev-1",
        "command": reply_command(),
        "destination": DestinationRef(account_id=receiver.account_id, endpoint=receiver.endpoint),
        "admission_reference": "approval/op-1",
        **change,
    }
    _refused(lambda: ledger.admit(context, **arguments), field)
    assert count_rows(store_url, "operations") == 0
    assert count_rows(store_url, "audit_events") == 0


def test_units_beyond_what_the_database_holds_are_refused(
    ledger: Ledger, store_url: str, context: Context, receiver: SimulatedReceiver
) -> None:
    """An operation drafted with 2**70 units is refused before it reaches the database."""
    _refused(
        lambda: draft_operation(
            context,
            operation_id="op-1",
            revision="rev-1",
            command=reply_command(),
            destination=DestinationRef(account_id=receiver.account_id, endpoint=receiver.endpoint),
            admission_reference="approval/op-1",
            units=2**70,
        ),
        "units",
    )


@pytest.mark.parametrize(
    ("account_id", "endpoint", "field"),
    [
        ("acct", "https://x.invalid/\ud800", "destination.endpoint"),
        ("acct", "https://x.invalid/\x1b[2J", "destination.endpoint"),
        ("acct", "https://x.invalid/\x00", "destination.endpoint"),
        ("acct", "", "destination.endpoint"),
        ("acct", "h" * 513, "destination.endpoint"),
        ("acct", 5, "destination.endpoint"),
        ("acct\ud800", "https://x.invalid", "destination.account_id"),
        ("", "https://x.invalid", "destination.account_id"),
    ],
)
def test_a_malformed_destination_is_refused_wherever_it_is_named(
    tmp_path: Path, account_id: Any, endpoint: Any, field: str
) -> None:
    """A lone surrogate or control character in a destination is invalid_input, not a crash."""
    _refused(lambda: DestinationRef(account_id=account_id, endpoint=endpoint), field)
    _refused(
        lambda: SimulatedReceiver(tmp_path / "r.db", account_id=account_id, endpoint=endpoint),
        field,
    )
    assert not (tmp_path / "r.db").exists()


def test_context_roles_must_be_a_set_of_role_names() -> None:
    """A context's roles are a set of identifiers; a bare string is not read as characters."""
    _refused(lambda: Context(tenant_id="acme", actor_id="a", roles="agent"), "roles")  # type: ignore[arg-type]
    _refused(lambda: Context(tenant_id="acme", actor_id="a", roles={"ok", 5}), "roles")  # type: ignore[arg-type]
    assert Context(tenant_id="acme", actor_id="a", roles={"agent"}).roles == frozenset({"agent"})  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["reason\x00", "reason\ud800"])
def test_text_that_cannot_be_stored_is_refused_alike_on_both_backends(
    store: Store, store_url: str, bad: str
) -> None:
    """NUL and lone surrogates are invalid_input naming the field, before the driver sees them."""
    params = {"tenant_id": "acme", "pool": "refunds", "limit_units": 5, "now_us": 1}

    _refused(
        lambda: store.write(lambda tx: tx.run("capacity_limit_set", {**params, "pool": bad})),
        "pool",
    )
    _refused(
        lambda: store.one("operation_get", {"tenant_id": bad, "operation_id": "x"}), "tenant_id"
    )
    assert count_rows(store_url, "capacity_limits") == 0


def test_a_denial_reason_with_nul_is_invalid_input_not_a_storage_error(world: World) -> None:
    """A NUL in a decision's text is refused as input on both backends, and nothing is stored."""
    proposal = world.proposal()
    with pytest.raises(InvalidInput):
        world.service.deny(REVIEWER, proposal.proposal_id, digest=proposal.digest, reason="no\x00")
    assert count_rows(world.store_url, "approvals") == 0
    assert world.service.perform(AGENT, proposal.proposal_id).outcome == "denied"


@pytest.mark.parametrize("bad", ["", "a b", "../etc", "x" * 129, "op\x00", 7, None])
def test_a_perform_of_a_malformed_proposal_id_is_invalid_input_replay_or_not(
    world: World, bad: Any
) -> None:
    """A perform naming a malformed proposal id is ``invalid_input`` (field ``proposal_id``),
    never ``not_found``, whether or not the tenant has a finished operation to replay; a
    malformed approval id is refused even on the replay of a finished perform; and nothing is
    written or sent either way."""
    proposal, approval = world.approved()
    done = world.service.perform(AGENT, proposal.proposal_id, approval=approval.approval_id)
    assert done.outcome == "performed"
    events, sent = count_rows(world.store_url, "audit_events"), world.receiver.counts()
    _refused(
        lambda: world.service.perform(AGENT, bad, approval=approval.approval_id), "proposal_id"
    )
    _refused(lambda: world.service.perform(AGENT, bad), "proposal_id")
    if bad is not None:
        _refused(
            lambda: world.service.perform(AGENT, proposal.proposal_id, approval=bad),
            "approval_id",
        )
    again = world.service.perform(AGENT, proposal.proposal_id, approval=approval.approval_id)
    assert again.outcome == "replayed"
    assert count_rows(world.store_url, "audit_events") == events
    assert world.receiver.counts() == sent
    assert (sent.effects, sent.submissions) == (1, 1)


@pytest.fixture
def world(store_url: str, tmp_path: Path, clock: Any) -> Any:
    """The acceptance world (refund action, receiver, service) over a fresh store."""
    from tests.acceptance.test_authority_matrix import build_world

    made = build_world(store_url, tmp_path, clock)
    yield made
    made.ledger.store.close()
    made.receiver.close()


def with_password(postgres_url: str, *, port: int | None = None) -> str:
    """``postgres_url`` with :data:`SECRET` as its password (and ``port`` if given)."""
    parts = urlsplit(postgres_url)
    user = parts.username or "postgres"
    host = parts.hostname or "127.0.0.1"
    netloc = f"{user}:{SECRET}@{host}:{port or parts.port or 5432}"
    return urlunsplit(parts._replace(netloc=netloc))


def _assert_no_secret(*texts: str) -> None:
    for text in texts:
        assert SECRET not in text, text


@pytest.mark.postgres
def test_a_store_url_password_never_shows_in_url_repr_or_messages(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The password of a PostgreSQL URL is in no message, log line, repr or store.url."""
    caplog.set_level(logging.DEBUG)
    store = open_store(with_password(postgres_url))  # trust auth: any password is accepted
    try:
        _assert_no_secret(store.url, repr(store), str(vars(store).get("url")))
        with pytest.raises(EffectLedgerError) as refused:
            store.write(lambda tx: tx.run("capacity_limit_set", {"tenant_id": "acme"}))
        _assert_no_secret(str(refused.value), repr(refused.value.to_dict()))
    finally:
        store.close()

    with pytest.raises(StorageError) as unreachable:
        open_store(with_password(postgres_url, port=1) + "&connect_timeout=2")
    _assert_no_secret(str(unreachable.value), repr(unreachable.value.to_dict()))
    for malformed in (
        with_password(postgres_url).replace("postgresql://", "postgresq://"),
        with_password(postgres_url) + "&bogus_option=1",
        with_password(postgres_url) + "&pool_max_size=many",
    ):
        with pytest.raises(InvalidInput) as bad:
            open_store(malformed)
        _assert_no_secret(str(bad.value), repr(bad.value.to_dict()))
    _assert_no_secret(*(record.getMessage() for record in caplog.records))
