"""HttpDestination against hostile servers on 127.0.0.1, the durable facts counted.

Each test checks the operation row in the ledger (both backends), the requests the hostile
server logged itself, and, where a real receiver stands behind it, the receiver's own count of
effects.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest

from effectledger import Context, ManualClock, OperationState
from effectledger.destinations.http import HttpAction, HttpDestination, HttpLookup
from effectledger.errors import InvalidInput
from effectledger.ledger import Ledger
from effectledger.model import Command, DestinationRef, Outcome
from effectledger.receiver.server import RunningReceiver
from effectledger.workers import Executor, RecoveryWorker
from tests.conftest import raw_sql, reply_command
from tests.http_destination.conftest import TOKEN
from tests.http_destination.hostile import answer, drip_headers, echo_credentials, forward, hostile
from tests.http_destination.support import (
    LEDGER_TABLES,
    admit_http,
    destination_at,
    last_evidence,
    window,
)


@pytest.fixture(autouse=True)
def _token(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every destination here reads its bearer token from ``RECEIVER_TOKEN``."""
    monkeypatch.setenv("RECEIVER_TOKEN", TOKEN)


def perform(ledger: Ledger, context: Context, target: HttpDestination, path: str) -> object:
    """Execute op-1 through the sync or the async executor path."""
    executor = Executor(ledger, target)
    if path == "sync":
        return executor.execute(context, "op-1")

    async def run() -> object:
        try:
            return await executor.execute_async(context, "op-1")
        finally:
            await target.aclose()

    return asyncio.run(run())


@pytest.mark.parametrize("path", ["sync", "async"])
@pytest.mark.parametrize("refusal", [400, 422, 401, 429])
def test_refused_resend_after_a_possible_effect_stays_unknown_until_a_lookup(
    ledger: Ledger,
    context: Context,
    served: RunningReceiver,
    clock: ManualClock,
    refusal: int,
    path: str,
) -> None:
    """A first POST that reached the receiver and was answered 503, then a resend refused with
    ``refusal``: OUTCOME_UNKNOWN with the refusal kept as evidence; the lookup settles it as
    SUCCEEDED, with two POSTs logged and one effect at the receiver."""
    with hostile(forward(served.url, status=503), answer(refusal), forward(served.url)) as server:
        target = destination_at(server.url, contract=window(30))
        admit_http(ledger, context, target)
        perform(ledger, context, target, path)
        assert ledger.get(context, "op-1").state is OperationState.OUTCOME_UNKNOWN
        document = last_evidence(ledger, context).document()
        assert document["status"] == refusal
        assert document["reason"].startswith("resend_refused:")
        assert document["answers"][0] == "unknown:503"
        assert (server.posts(), served.store.counts().effects) == (2, 1)
        clock.advance(ledger.settings.recover_after)
        RecoveryWorker(ledger, target).run_once()
        assert ledger.get(context, "op-1").state is OperationState.SUCCEEDED
        assert (server.posts(), served.store.counts().effects) == (2, 1)
        target.close()


_MAYBE_ACTED = [503, 408, 409, 500]
_REFUSALS = [400, 404, 422, 401, 429, 0]
"""Statuses of a definite refusal; 0 stands for a connection refused before any byte."""


@pytest.mark.parametrize("first", _MAYBE_ACTED)
@pytest.mark.parametrize("second", _REFUSALS)
@pytest.mark.parametrize("path", ["sync", "async"])
def test_every_definite_refusal_after_an_unknown_send_is_unknown(
    first: int, second: int, path: str
) -> None:
    """For every pair (a send that may have acted, then a definite refusal of the resend) the
    exchange is Unknown, and exactly two requests were sent."""
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        if len(sent) == 1:
            return httpx.Response(first, json={"error": "key_in_flight"})
        if second == 0:
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(second, json={"error": "refused"})

    async def async_handler(request: httpx.Request) -> httpx.Response:
        return handler(request)

    target = HttpDestination(
        account_id="acct",
        endpoint="http://127.0.0.1:1",
        actions={"a": HttpAction(path="/x", contract=window(30))},
        lookup=HttpLookup(path="/x/{key}"),
        transport=httpx.MockTransport(handler),
        async_transport=httpx.MockTransport(async_handler),
    )
    command = Command(action="a", contract_version="v1")
    if path == "sync":
        observation = target.submit(command, "k")
    else:
        observation = asyncio.run(target.submit_async(command, "k"))
    assert observation.outcome is Outcome.UNKNOWN
    assert len(sent) == 2
    assert observation.evidence is not None
    assert observation.evidence.document()["reason"].startswith("resend_refused:")


def test_accepted_resend_after_an_unknown_send_settles_the_exchange(
    served: RunningReceiver,
) -> None:
    """A resend the deduplicating receiver answers with its replay is an acceptance: one
    effect, two POSTs logged."""
    with hostile(forward(served.url, status=503), forward(served.url)) as server:
        target = destination_at(server.url, contract=window(30))
        observation = target.submit(reply_command(), "key-replayed")
        assert observation.outcome is Outcome.ACCEPTED
        assert observation.provider_reference == served.store.reference("effects", "key-replayed")
        assert (server.posts(), served.store.counts().effects) == (2, 1)
        target.close()


@pytest.mark.parametrize(
    "endpoint",
    ["http://user:password@127.0.0.1:8080/v1", "https://token@api.example.com", "http://:p@h"],
)
def test_endpoint_with_credentials_is_refused_at_construction(endpoint: str) -> None:
    """An endpoint carrying userinfo is refused with invalid_input naming the endpoint field, for
    the HTTP destination and for any destination reference."""
    with pytest.raises(InvalidInput) as raised:
        HttpDestination(
            account_id="acct",
            endpoint=endpoint,
            actions={"a": HttpAction(path="/x")},
            lookup=HttpLookup(path="/x/{key}"),
        )
    assert (raised.value.code, raised.value.details["field"]) == ("invalid_input", "endpoint")
    with pytest.raises(InvalidInput) as raised:
        DestinationRef(account_id="acct", endpoint=endpoint)
    assert raised.value.details["field"] == "destination.endpoint"


def test_path_template_cannot_smuggle_userinfo_into_the_url() -> None:
    """A URL template whose expansion puts userinfo in the authority is not sent."""
    sent: list[httpx.Request] = []
    target = HttpDestination(
        account_id="acct",
        endpoint="http://127.0.0.1:1",
        actions={"a": HttpAction(path="{who}@evil.example/x")},
        lookup=HttpLookup(path="/x/{key}"),
        transport=httpx.MockTransport(lambda request: sent.append(request) or httpx.Response(201)),
    )
    observation = target.submit(Command(action="a", contract_version="v1",
                                        arguments={"who": ":8"}), "k")  # fmt: skip
    assert observation.outcome is Outcome.RETRYABLE_REJECTION
    assert sent == []


def test_echoed_credentials_never_reach_a_stored_row_or_blob(
    ledger: Ledger, context: Context, store_url: str
) -> None:
    """A destination that copies the Authorization value into its body and its headers: the
    operation succeeds, and the token is in no ledger table or blob."""
    with hostile(echo_credentials()) as server:
        target = destination_at(server.url)
        admit_http(ledger, context, target)
        assert Executor(ledger, target).execute(context, "op-1").state is OperationState.SUCCEEDED
        assert server.log[0].headers["Authorization"] == f"Bearer {TOKEN}"
        document = last_evidence(ledger, context).document()
        assert document["body"]["authorization"] == "[redacted]"
        assert TOKEN not in repr(document)
        for table in LEDGER_TABLES:
            for row in raw_sql(store_url, f"SELECT * FROM {table}"):
                assert TOKEN not in repr(row), table
        target.close()


def test_a_reference_that_echoes_the_secret_is_not_stored() -> None:
    """A provider reference holding the sent secret is replaced by the key's reference."""
    target = HttpDestination(
        account_id="acct",
        endpoint="http://127.0.0.1:1",
        actions={"a": HttpAction(path="/x")},
        lookup=HttpLookup(path="/x/{key}"),
        headers={"X-Api-Key": "k3y-value-9"},
        transport=httpx.MockTransport(lambda r: httpx.Response(201, json={"id": "k3y-value-9"})),
    )
    observation = target.submit(Command(action="a", contract_version="v1"), "k")
    assert observation.provider_reference == "idempotency-key/k"
    assert observation.evidence is not None
    assert b"k3y-value-9" not in observation.evidence.content


@pytest.mark.parametrize("path", ["sync", "async"])
def test_headers_sent_one_line_at_a_time_cannot_outlast_the_deadline(
    ledger: Ledger, context: Context, path: str
) -> None:
    """A server that drips its header lines every 0.1 s for a minute: the exchange ends at its
    1 s deadline as OUTCOME_UNKNOWN (deadline_passed), never SUCCEEDED, while the server is
    still dripping (checked by order, not by a duration)."""
    with hostile(drip_headers(0.1, 600)) as server:
        target = destination_at(server.url, deadline_s=1.0)
        admit_http(ledger, context, target)
        perform(ledger, context, target, path)
        assert server.answered() == 0  # the server never finished its answer
        assert ledger.get(context, "op-1").state is OperationState.OUTCOME_UNKNOWN
        assert last_evidence(ledger, context).document()["reason"] == "deadline_passed"
        assert server.posts() == 1
        target.close()


def test_resends_share_the_one_deadline_of_the_exchange() -> None:
    """With resends allowed, a server that drips its headers is sent to until the deadline, not
    for a fresh deadline per resend: the first send uses up the exchange's 1 s, so no resend
    follows it (a deadline per send would resend at once), and the server never answered."""
    with hostile(drip_headers(0.1, 600)) as server:
        target = destination_at(server.url, contract=window(60), deadline_s=1.0)
        observation = target.submit(reply_command(), "key-drip")
        assert observation.outcome is Outcome.UNKNOWN
        assert server.posts() == 1
        assert server.answered() == 0
        target.close()


def test_lookup_record_of_another_key_is_not_proof(
    ledger: Ledger, context: Context, served: RunningReceiver, clock: ManualClock
) -> None:
    """A lookup answered with a performed record that names another idempotency key leaves the
    operation OUTCOME_UNKNOWN with the reason key_mismatch, and no reference is recorded."""
    record = {"id": "ref-other", "idempotency_key": "someone-else", "state": "performed"}
    with hostile(answer(503), answer(200, record)) as server:
        target = destination_at(server.url)
        admit_http(ledger, context, target)
        Executor(ledger, target).execute(context, "op-1")
        clock.advance(ledger.settings.recover_after)
        RecoveryWorker(ledger, target).run_once()
        operation = ledger.get(context, "op-1")
        assert operation.state is OperationState.OUTCOME_UNKNOWN
        assert operation.provider_reference is None
        assert last_evidence(ledger, context).document()["reason"] == "lookup:200:key_mismatch"
        target.close()


def test_a_reference_already_held_by_another_operation_is_flagged_not_shared(
    ledger: Ledger, context: Context, store_url: str
) -> None:
    """A destination that answers two operations with the same reference: the first is
    SUCCEEDED with it, the second is OUTCOME_UNKNOWN with the holder named and no reference."""
    shared = {"id": "ref-shared"}
    with hostile(answer(201, shared)) as server:
        target = destination_at(server.url)
        admit_http(ledger, context, target, operation_id="op-1")
        admit_http(ledger, context, target, operation_id="op-2", extra="second")
        executor = Executor(ledger, target)
        assert executor.execute(context, "op-1").state is OperationState.SUCCEEDED
        assert executor.execute(context, "op-2").state is OperationState.OUTCOME_UNKNOWN
        second = ledger.get(context, "op-2")
        assert second.provider_reference is None
        event = ledger.events(context, "op-2")[-1]
        assert event.details["unrecordable"] == "provider_reference_held_by:op-1"
        held = raw_sql(store_url, "SELECT count(*) FROM operations WHERE provider_reference = "
                       "'ref-shared'")  # fmt: skip
        assert held == [(1,)]
        target.close()
