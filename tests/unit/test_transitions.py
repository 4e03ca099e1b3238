"""The state machine is one table: every event has a row, rows refuse wrong states, docs match."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from effectledger.audit.explain import explain
from effectledger.errors import InvalidTransition
from effectledger.model.operations import AuditEvent, OperationState
from effectledger.model.states import (
    COMMITTING,
    FREEING,
    HOLDING,
    TRANSITIONS,
    EventType,
    Transition,
    implied_state,
    render_markdown,
    transition,
)
from effectledger.sql import DIALECTS, load_queries

ALL_STATES: tuple[OperationState | None, ...] = (None, *OperationState)
DOCS = Path(__file__).resolve().parents[2] / "docs" / "states.md"


def test_every_event_type_has_a_row() -> None:
    """No event type exists that the table does not say where it may be written."""
    assert {row.event for row in TRANSITIONS} == set(EventType)


@pytest.mark.parametrize("row", TRANSITIONS, ids=lambda row: f"{row.event.value}-{row.step}")
def test_each_row_is_allowed_from_its_states_and_refused_from_the_others(row: Transition) -> None:
    """Each row admits exactly its from-states; any other state raises invalid_transition."""
    for state in ALL_STATES:
        if state in row.from_states:
            assert transition(row.event, state).to_state == row.to_state
        elif not any(
            other.event is row.event and state in other.from_states for other in TRANSITIONS
        ):
            with pytest.raises(InvalidTransition):
                transition(row.event, state)


def test_an_unknown_event_type_is_refused() -> None:
    """An event type the ledger never writes is not allowed anywhere."""
    for state in ALL_STATES:
        with pytest.raises(InvalidTransition):
            transition("OperationTeleported", state)


def test_capacity_states_partition_the_states() -> None:
    """Every state holds, commits or frees its units: exactly one of the three."""
    assert set(OperationState) == HOLDING | COMMITTING | FREEING
    assert len(HOLDING) + len(COMMITTING) + len(FREEING) == len(OperationState)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_capacity_query_derives_from_the_table(dialect: str) -> None:
    """The capacity recount sums exactly the table's holding, committing and freeing states."""
    query = load_queries(dialect)["capacity_recount"]
    found = {
        name: set(re.findall(r"'([A-Z_]+)'", part))
        for name, part in zip(
            ("held", "committed", "freed"),
            re.split(r"\bAS (?:held|committed)\b", query),
            strict=True,
        )
    }
    assert found["held"] == {s.value for s in HOLDING}
    assert found["committed"] == {s.value for s in COMMITTING}
    assert found["freed"] == {s.value for s in FREEING}


def test_a_trail_folds_to_the_state_it_implies() -> None:
    """The fold follows the table: an Unknown answer leaves a manual review where it is."""
    trail = ["ProposalRecorded", "ApprovalGranted", "OperationAdmitted", "AttemptPrepared"]
    assert implied_state(trail[:2]) is None
    assert implied_state(trail) is OperationState.IN_PROGRESS
    unknown = [*trail, "SubmissionOutcomeUnknown", "ReconciliationStarted"]
    assert implied_state(unknown) is OperationState.OUTCOME_UNKNOWN
    review = [*unknown, "ManualReviewAssigned", "SubmissionOutcomeUnknown"]
    assert implied_state(review) is OperationState.MANUAL_REVIEW
    assert implied_state([*review, "ProviderAcceptanceReconciled"]) is OperationState.SUCCEEDED
    with pytest.raises(ValueError, match="cannot be recorded"):
        implied_state([*trail, "ProviderAcceptanceConfirmed", "AttemptPrepared"])


def test_the_docs_page_is_generated_from_the_table() -> None:
    """docs/states.md holds exactly the rendered table between its markers."""
    text = DOCS.read_text("utf-8")
    rendered = text.split("<!-- states:begin -->\n", 1)[1].split("<!-- states:end -->", 1)[0]
    assert rendered == render_markdown()


@pytest.mark.parametrize("kind", list(EventType), ids=lambda kind: kind.value)
def test_every_event_type_has_its_own_explanation_sentence(kind: EventType) -> None:
    """explain describes each event type in words of its own, never the generic fallback."""
    event = AuditEvent(
        event_id="ev-1",
        tenant_id="acme",
        operation_id="op-1",
        attempt_id=None,
        sequence=1,
        actor="someone",
        event_type=kind.value,
        recorded_at=datetime(2026, 1, 1, tzinfo=UTC),
        evidence_reference=None,
        details={},
        observation_id=None,
        prev_hash="0" * 64,
        event_hash="1" * 64,
    )
    first = explain([event])[0].text
    assert "recorded an event of type" not in first, first
