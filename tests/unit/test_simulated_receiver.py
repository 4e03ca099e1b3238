"""The simulated receiver's own record: one effect per key, replays and conflicts counted."""

from __future__ import annotations

from pathlib import Path

from effectledger import Command, Outcome, SimulatedReceiver


def _command(body: str) -> Command:
    return Command(action="send", contract_version="v1", arguments={"body": body})


def test_a_repeated_key_is_a_replay_and_performs_nothing(tmp_path: Path) -> None:
    """The same command under a key already performed answers the same receipt, counted once."""
    receiver = SimulatedReceiver(tmp_path / "receiver.db")
    first = receiver.submit(_command("hello"), "key-1")
    again = receiver.submit(_command("hello"), "key-1")
    other = receiver.submit(_command("changed"), "key-1")
    counts = receiver.counts()
    receiver.close()
    assert first.outcome is Outcome.ACCEPTED
    assert again.provider_reference == first.provider_reference
    assert other.outcome is Outcome.PERMANENT_REJECTION
    assert (counts.submissions, counts.effects, counts.replays, counts.conflicts) == (3, 1, 1, 1)


def test_a_receiver_file_reopened_keeps_its_counts(tmp_path: Path) -> None:
    """Counts live in the receiver's own file: a new object on it reads the same figures."""
    receiver = SimulatedReceiver(tmp_path / "receiver.db")
    receiver.submit(_command("hello"), "key-1")
    receiver.submit(_command("hello"), "key-1")
    receiver.close()
    reopened = SimulatedReceiver(tmp_path / "receiver.db", create=False)
    counts = reopened.counts()
    reopened.close()
    assert (counts.effects, counts.replays) == (1, 1)
