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
    head = row["head_type"]
    reference = row["provider_reference"]
    if (
        row["head_matches"]
        and _STATE_BY_NAME.get(head) == state
        and (
            reference is None
            if head not in _ACCEPTANCES
            # The canonical details name the reference as this text when it needs no escape.
            else reference is not None
            and f'"provider_reference":"{reference}"' in row["head_details"]
        )
    ):
        return result_from_row(row)
    _check_trail(store, row)
    return result_from_row(row)


def _check_trail(store: Store, row: Row) -> None:
    """Read the operation's trail and check the row's state and reference against it, as a
    claim does; raise :class:`TamperedOperation` where they disagree."""
    operation_id = row["operation_id"]
    events = store.read(
        lambda tx: tx.all("events_for_operation", key(row["tenant_id"], operation_id))
    )
    try:
        verify_stored_chain(events)
    except ChainBreak as exc:
        raise _refused(operation_id, "chain_broken", "its trail is not an unbroken chain") from exc
    sequence = int(row["event_sequence"] or len(events))
    trail = events[:sequence]
    if not 0 < sequence <= len(events) or (not row["head_matches"] and row["head_type"]):
        raise _refused(operation_id, "chain_broken", "its row does not point into its trail")
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
