"""Misconfiguration reads as what it is: an unmapped action is refused when bound, and a
dispatch the destination accepted nothing from says so and why."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from pydantic import BaseModel

from effectledger import Context, OperationState, connect
from effectledger.destinations.http import HttpAction, HttpDestination, HttpLookup
from effectledger.errors import InvalidInput
from effectledger.receiver.server import RunningReceiver
from tests.conftest import count_rows
from tests.http_destination.hostile import closed_port
from tests.http_destination.support import destination_at

AGENT = Context(tenant_id="acme", actor_id="agent-7")
RITA = Context(tenant_id="acme", actor_id="rita", roles=frozenset({"approver"}))


class Reply(BaseModel):
    """A support reply's arguments."""

    body: str


def test_an_action_without_an_http_mapping_is_refused_when_bound(store_url: str) -> None:
    """Binding an action the HTTP destination has no mapping for raises invalid_input naming
    the action, and nothing is registered or written."""
    target = HttpDestination(
        account_id="acct",
        endpoint="http://127.0.0.1:1",
        actions={"other_action": HttpAction(path="/x")},
        lookup=HttpLookup(path="/x/{key}"),
    )
    with connect(store_url) as ledger:
        with pytest.raises(InvalidInput) as raised:
            ledger.action(name="refund", contract="refund-v1", arguments=Reply,
                          destination=target)  # fmt: skip
        assert raised.value.details["action"] == "refund"
        assert "refund" in raised.value.message
        assert "refund" not in {action.name for action in ledger.registry}
    assert count_rows(store_url, "proposals") == 0


@pytest.mark.parametrize("where", ["closed_port", "refusing"])
def test_a_dispatch_nothing_was_accepted_from_is_refused_with_its_reason(
    store_url: str, tmp_path: Path, served: RunningReceiver, where: str
) -> None:
    """A closed port (nothing sent) or a 401 (refused before any processing): the perform's
    outcome is refused, not performed, its rejection names why, and no effect exists."""
    with contextlib.ExitStack() as held:
        refusing = held.enter_context(closed_port())  # nobody else can take it meanwhile
        url = f"http://127.0.0.1:{refusing}" if where == "closed_port" else served.url
        target = destination_at(url)
        if where == "refusing":
            target.headers["Authorization"] = "Bearer wrong-token"
        with connect(store_url) as ledger:
            action = ledger.action(name="send_support_reply", contract="reply-v1", arguments=Reply,
                                   destination=target)  # fmt: skip
            proposal = ledger.propose(AGENT, action, body="hello")
            ledger.approve(RITA, proposal)
            result = ledger.perform(AGENT, proposal)
            assert (result.outcome, result.state) == ("refused", OperationState.RETRY_PENDING)
            expected = "ConnectError" if where == "closed_port" else "retryable:401"
            assert result.rejection == expected
            assert result.to_dict()["rejection"] == expected
            assert ledger.operation(AGENT, result.operation_id or "").state is (
                OperationState.RETRY_PENDING
            )
            again = ledger.perform(AGENT, proposal)
            assert (again.outcome, again.rejection) == ("replayed", None)
        target.close()
    assert served.store.counts().effects == 0
