"""A repeated perform's answer: the recorded result, checked against the head of its trail.

The rows are a cache of the chain (docs/design.md, invariant 13): a repeated perform of a finished
operation reports the state and provider reference its row holds only if the event at the row's
trail position (its head) is the one the row names (the same stored hash) and leaves the
operation in that state, with that reference for an acceptance. That is one comparison on the
replay's own read (``proposal_replay`` joins the head). A head that does not say it alone (an
audit-only event, a trail from before positions were kept) has the whole trail read and checked
as a claim checks it; a row that disagrees with its trail is :class:`TamperedOperation`, never
reported as the outcome.
"""

from __future__ import annotations

from typing import Final

from effectledger.errors import ChainBreak, TamperedOperation
from effectledger.events.chain import verify_stored_chain
from effectledger.ledger.stored import result_from_row
from effectledger.ledger.trail import key
from effectledger.model.canonical import loads_stored
from effectledger.model.operations import Context, DispatchResult, OperationState, Row
from effectledger.model.states import STATE_AFTER, implied_state
from effectledger.store import Store

__all__ = ["replayed_result"]

_STATE_BY_NAME = {event.value: state for event, state in STATE_AFTER.items()}
"""The state each state-changing event leaves, by the event's stored name."""
_ACCEPTANCES = frozenset(
    name for name, state in _STATE_BY_NAME.items() if state is OperationState.SUCCEEDED
)
_NAMED: Final = "+reference"
_HEADS = {
    **{name: state for name, state in _STATE_BY_NAME.items() if name not in _ACCEPTANCES},
    **{name + _NAMED: OperationState.SUCCEEDED for name in _ACCEPTANCES},
}
"""The state a ``proposal_replay`` row's ``head`` vouches for: a state-changing event that is
the row's head, an acceptance only when its details name the row's reference."""
_NAMED_HEADS = frozenset(name + _NAMED for name in _ACCEPTANCES)


def replayed_result(row: Row | None, context: Context, store: Store) -> DispatchResult | None:
    """The recorded state in a ``proposal_replay`` row when the call replays a finished
    ``perform`` by the same actor: whichever approval it names, an admitted proposal is not
    admitted again, and the presented approval is not spent. The state is checked against the
    head of the operation's trail first (see the module)."""
    if row is None:
        return None
    state = row["state"]
    if (
        state is None  # nothing admitted yet
        or state == OperationState.READY  # a StrEnum equals its value: no ``.value`` call
        or row["requester_id"] != context.actor_id
    ):
        return None
    head = row["head"]
    # An acceptance's head names the row's reference; any other head vouches for a row without.
    if _HEADS.get(head) == state and (row["provider_reference"] is None) != (head in _NAMED_HEADS):
        return result_from_row(row)
    _check_trail(store, row)
    return result_from_row(row)


def _check_trail(store: Store, row: Row) -> None:
    """Read the operation's trail and check the row's state and reference against it, as a
    claim does; raise :class:`TamperedOperation` where they disagree."""
    operation_id = row["operation_id"]
    trail_key = key(row["tenant_id"], operation_id)
    operation, events = store.read(
        lambda tx: (tx.one("operation_get", trail_key), tx.all("events_for_operation", trail_key))
    )
    try:
        verify_stored_chain(events)
    except ChainBreak as exc:
        raise _refused(operation_id, "chain_broken", "its trail is not an unbroken chain") from exc
    sequence = len(events) if operation is None else int(operation["event_sequence"] or 0)
    if not 0 < sequence <= len(events) or (
        operation is not None and events[sequence - 1]["event_hash"] != operation["last_event_hash"]
    ):
        raise _refused(operation_id, "chain_broken", "its row does not point into its trail")
    trail = events[:sequence]
    try:
        state = implied_state(event["event_type"] for event in trail)
    except ValueError as exc:
        raise _refused(
            operation_id, "state_not_in_trail", "its trail holds an unknown event"
        ) from exc
    if state != row["state"]:
        raise _refused(operation_id, "state_not_in_trail", f"its trail leaves it {state}")
    if state is OperationState.SUCCEEDED:
        accepted = [event for event in trail if event["event_type"] in _ACCEPTANCES]
        details = loads_stored(accepted[-1]["details_json"]) if accepted else {}
        found = details.get("provider_reference") if isinstance(details, dict) else None
        if found != row["provider_reference"]:
            raise _refused(
                operation_id, "state_not_in_trail", "its provider reference is not its trail's"
            )
    elif row["provider_reference"] is not None:
        raise _refused(
            operation_id, "state_not_in_trail", "it holds a provider reference its trail lacks"
        )


def _refused(operation_id: str, reason: str, message: str) -> TamperedOperation:
    return TamperedOperation(
        f"operation {operation_id} does not agree with its trail: {message}",
        operation_id=operation_id,
        reason=reason,
    )
