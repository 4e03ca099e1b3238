"""Explanations: deterministic, every sentence cited, uncertainty stated as unresolved."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from effectledger.audit.explain import Sentence, explain, render
from effectledger.errors import InvalidInput
from effectledger.events.chain import GENESIS_HASH
from effectledger.model.operations import AuditEvent, from_micros

START = 1_767_225_600_000_000


def _events(*specs: tuple[str, Mapping[str, Any]]) -> list[AuditEvent]:
    events = []
    for sequence, (event_type, details) in enumerate(specs, start=1):
        events.append(
            AuditEvent(
                event_id=f"event-{sequence}",
                tenant_id="acme",
                operation_id="op-1",
                attempt_id=None if sequence == 1 else "attempt-1",
                sequence=sequence,
                actor="alice" if sequence == 1 else "dispatch-worker",
                event_type=event_type,
                recorded_at=from_micros(START + sequence * 1_500_000),
                evidence_reference="approval/1" if sequence == 1 else None,
                details=details,
                observation_id=None,
                prev_hash=GENESIS_HASH,
                event_hash=f"{sequence:064x}",
            )
        )
    return events


ADMITTED: tuple[str, Mapping[str, Any]] = (
    "OperationAdmitted",
    {"revision": "rev-1", "fingerprint": "ab" * 32},
)
CLAIMED: tuple[str, Mapping[str, Any]] = ("AttemptPrepared", {})


def test_every_sentence_cites_one_event_and_the_text_is_deterministic() -> None:
    """Each event gets a cited sentence, then a cited standing; equal input gives equal text."""
    events = _events(
        ADMITTED,
        CLAIMED,
        ("ProviderAcceptanceConfirmed", {"outcome": "Accepted", "provider_reference": "rcpt-9"}),
    )
    sentences = explain(events)
    assert [(s.sequence, s.event_id) for s in sentences] == [
        (1, "event-1"),
        (2, "event-2"),
        (3, "event-3"),
        (3, "event-3"),
    ]
    assert sentences[0].text.startswith("At 2026-01-01 00:00:01.5 UTC, alice admitted operation")
    assert "on the authority of approval/1" in sentences[0].text
    assert "SUCCEEDED" in sentences[-1].text
    assert "rcpt-9" in sentences[-1].text
    assert render(explain(list(reversed(events)))) == render(sentences)
    assert render(sentences).splitlines()[1].endswith("[event 2, event-2]")


@pytest.mark.parametrize(
    ("specs", "state"),
    [
        ((ADMITTED, CLAIMED), "IN_PROGRESS"),
        (
            (ADMITTED, CLAIMED, ("SubmissionOutcomeUnknown", {"outcome": "Unknown"})),
            "OUTCOME_UNKNOWN",
        ),
        (
            (
                ADMITTED,
                CLAIMED,
                ("SubmissionOutcomeUnknown", {"outcome": "Unknown"}),
                ("ManualReviewAssigned", {"owner": "ops", "reason": "lookups exhausted"}),
                ("SubmissionOutcomeUnknown", {"outcome": "Unknown"}),
            ),
            "MANUAL_REVIEW",
        ),
    ],
)
def test_an_uncertain_outcome_is_stated_as_unresolved(
    specs: tuple[tuple[str, Mapping[str, Any]], ...], state: str
) -> None:
    """IN_PROGRESS, OUTCOME_UNKNOWN and MANUAL_REVIEW end with an unresolved standing."""
    standing = explain(_events(*specs))[-1].text
    assert standing.startswith("The outcome is unresolved")
    assert state in standing
    assert "may or may not" in standing


def test_resolved_outcomes_are_stated_as_resolved() -> None:
    """A rejection ends the account as resolved with no effect."""
    events = _events(ADMITTED, CLAIMED, ("PermanentRejection", {"outcome": "PermanentRejection"}))
    assert explain(events)[-1].text.startswith(
        "The outcome is resolved: the operation was REJECTED"
    )


def test_unknown_event_types_are_described_generically_and_cited() -> None:
    """An event type the explainer does not know still gets a cited sentence with its fields."""
    events = _events(ADMITTED, ("PolicyVoted", {"votes": 3, "quorum": "met"}))
    sentence = explain(events)[1]
    assert sentence == Sentence(
        text="At 2026-01-01 00:00:03 UTC, dispatch-worker recorded an event of type "
        "PolicyVoted for attempt attempt-1 with quorum met, votes 3.",
        sequence=2,
        event_id="event-2",
    )


def test_a_correction_names_the_event_it_corrects() -> None:
    """An AuditCorrection sentence cites itself and names the corrected event by sequence."""
    events = _events(ADMITTED, ("AuditCorrection", {"corrects": "event-1", "reason": "typo"}))
    text = explain(events)[1].text
    assert "a correction of event 1 (event-1): typo" in text
    assert explain(events)[-1].text.startswith("The operation is READY")


def test_nothing_or_several_operations_cannot_be_explained() -> None:
    """An empty list, or events of two operations, is refused."""
    with pytest.raises(InvalidInput):
        explain([])
    one, two = _events(ADMITTED, CLAIMED)
    other = AuditEvent(**{**{f: getattr(two, f) for f in two.__slots__}, "operation_id": "op-2"})
    with pytest.raises(InvalidInput):
        explain([one, other])


def test_observation_ids_are_shown_so_replays_are_recognisable() -> None:
    """An observation's stable id appears in its sentence beside its evidence."""
    accepted = _events(
        ADMITTED,
        CLAIMED,
        ("ProviderAcceptanceConfirmed", {"outcome": "Accepted", "provider_reference": "rcpt-9"}),
    )[2]
    replayed = AuditEvent(
        **{
            **{name: getattr(accepted, name) for name in accepted.__slots__},
            "evidence_reference": "reply/9",
            "observation_id": "obs-42",
        }
    )
    text = explain([*_events(ADMITTED, CLAIMED), replayed])[2].text
    assert "(evidence reply/9, observation id obs-42)" in text
