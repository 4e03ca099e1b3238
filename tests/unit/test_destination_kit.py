"""The destination conformance kit: a good adapter passes it, a broken one is caught by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from effectledger import Observation, SimulatedReceiver, SubmitMode
from effectledger.destinations import BoundDestination
from effectledger.destinations.testing import ConformanceFailure, DestinationCheck
from effectledger.model import Command
from tests.conftest import reply_command


def test_the_simulated_receiver_passes_every_check(tmp_path: Path) -> None:
    """The reference receiver keeps one effect per key and answers a lookup after a lost reply."""
    receiver = SimulatedReceiver(tmp_path / "receiver.db")

    def lose_next_reply() -> None:
        receiver.submit_mode = SubmitMode.ACCEPT_THEN_LOSE_REPLY

    try:
        DestinationCheck(
            destination=receiver,
            command=reply_command(),
            effects=receiver.effects_for,
            lose_next_reply=lose_next_reply,
        ).run()
        assert receiver.counts().effects == 2  # one per key the kit sent, nothing more
    finally:
        receiver.close()


class _Doubling(BoundDestination):
    """An adapter that ignores the key: every submission is a new effect."""

    def __init__(self) -> None:
        self._account_id, self._endpoint = "acct", "https://doubling.invalid/v1"
        self.effects: list[str] = []

    def submit(self, command: Command, key: str) -> Observation:
        self.effects.append(key)
        return Observation.accepted(f"ref-{len(self.effects)}", f"e/{len(self.effects)}")

    def lookup(self, key: str) -> Observation:
        return Observation.accepted("ref-any", "e/any")  # claims what it cannot know


def test_an_adapter_that_ignores_the_key_is_caught() -> None:
    """Two effects under one key fail the kit, naming the rule."""
    doubling = _Doubling()
    check = DestinationCheck(
        destination=doubling, command=reply_command(), effects=doubling.effects.count
    )
    with pytest.raises(ConformanceFailure, match="one effect per key: 2 effects"):
        check.run()


def test_a_lookup_that_claims_an_unsent_key_is_caught() -> None:
    """A lookup that answers Accepted for a key never sent fails the absence check."""
    doubling = _Doubling()
    check = DestinationCheck(
        destination=doubling, command=reply_command(), effects=doubling.effects.count
    )
    with pytest.raises(ConformanceFailure, match="absence"):
        check.check_absence_is_not_proof()
