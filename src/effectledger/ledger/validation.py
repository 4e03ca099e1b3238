"""Checks on what callers and destinations hand the ledger, made before anything is written."""

from __future__ import annotations

from dataclasses import replace

from effectledger.display import unprintable
from effectledger.errors import InvalidInput
from effectledger.model.operations import Context, Observation, Outcome, is_identifier

__all__ = [
    "MAX_REFERENCE_LENGTH",
    "checked_context",
    "recordable",
    "reference",
    "reference_problem",
    "unrecordable",
]

MAX_REFERENCE_LENGTH = 512


def checked_context(context: object) -> Context:
    """``context`` if it is a :class:`Context`, else ``invalid_input`` (never an AttributeError)."""
    if not isinstance(context, Context):
        raise InvalidInput("context must be a Context from the trusted host", field="context")
    return context


def reference(value: str | None, what: str) -> str | None:
    """``value`` if it can be stored as a reference (or is absent), else ``invalid_input``."""
    problem = reference_problem(value)
    if problem is not None:
        raise InvalidInput(
            f"{what} must be 1-{MAX_REFERENCE_LENGTH} printable characters ({problem})",
            field=what,
            problem=problem,
        )
    return value


def reference_problem(value: object) -> str | None:
    """Why ``value`` cannot be stored as a reference (``None``: it can, or it is absent)."""
    if value is None:
        return None
    if type(value) is not str and not isinstance(value, str):  # a plain str: no call
        return "not_text"
    if len(value) > MAX_REFERENCE_LENGTH:
        return "too_long"
    # The common case decided here, in C; unprintable says what else is wrong.
    return None if value and value.isprintable() else unprintable(value)


def unrecordable(observation: object) -> str | None:
    """Why a destination's reply cannot be recorded as it stands, or ``None``.

    The effect may have happened whatever the reply looks like, so a reply the ledger cannot
    store is never an input error: :meth:`Ledger.record` records it as Unknown with this reason.
    """
    # ``type() is`` first: every reply a destination gives comes through here, and the common
    # case, the exact types, costs no call.
    if type(observation) is not Observation and not isinstance(observation, Observation):
        return "reply:not_an_observation"
    outcome = observation.outcome
    if type(outcome) is not Outcome and not isinstance(outcome, Outcome):
        return "reply:not_an_observation"
    for what, value in (
        ("provider_reference", observation.provider_reference),
        ("evidence_reference", observation.evidence_reference),
    ):
        problem = reference_problem(value)
        if problem is not None:
            return f"{what}:{problem}"
    if observation.observation_id is not None and not is_identifier(observation.observation_id):
        return "observation_id:malformed"
    if observation.outcome is Outcome.ACCEPTED:
        if observation.provider_reference is None:
            return "provider_reference:missing"
        if observation.evidence_reference is None:
            return "evidence_reference:missing"
    return None


def recordable(observation: Observation) -> tuple[Observation, str | None, object]:
    """A destination's reply as the ledger records it: ``(observation, problem, reported)``.

    A reply that carries its evidence gets that evidence's reference. A reply that cannot be
    recorded as it stands (:func:`unrecordable`) becomes Unknown, with the ``problem`` and the
    outcome it ``reported``; otherwise both are ``None``.
    """
    # Not an Observation: unrecordable (below), and it may have no evidence attribute.
    evidence = (
        observation.evidence
        if type(observation) is Observation
        else getattr(observation, "evidence", None)
    )
    if evidence is not None:  # the answer itself: kept with the event
        observation = replace(observation, evidence_reference=evidence.reference)
    problem = unrecordable(observation)
    if problem is None:
        return observation, None, None
    return Observation.unknown(), problem, getattr(observation, "outcome", None)
