"""Fixtures for the HTTP destination tests: a reference receiver served on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from effectledger.receiver.server import RunningReceiver, serve

TOKEN = "s3cr3t-token-never-stored"


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RunningReceiver]:
    """A reference receiver on a free 127.0.0.1 port that requires ``Bearer TOKEN``."""
    monkeypatch.setenv("RECEIVER_TOKEN", TOKEN)
    with serve(tmp_path / "receiver.db", token=TOKEN) as running:
        yield running
