"""The scripts in examples/ run as written and tell the truth about what they did."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.examples import run_example


def _run(script: str, folder: Path) -> str:
    return run_example(script, folder, timeout=60)


@pytest.mark.slow
def test_simulated_refund_example(tmp_path: Path) -> None:
    """The simulated refund performs once, replays, reconciles and denies the unapproved."""
    out = _run("refund_simulated.py", tmp_path)
    assert "perform: performed OUTCOME_UNKNOWN uncertain" in out
    assert "perform again: replayed OUTCOME_UNKNOWN" in out
    assert "recovery resolved: ['SUCCEEDED']" in out
    assert "receiver effects: 1" in out
    assert "unapproved: denied approval_missing" in out


@pytest.mark.slow
def test_custom_destination_example(tmp_path: Path) -> None:
    """The user-written destination refunds once and a proposal on a changed order is refused."""
    out = _run("refund_custom_destination.py", tmp_path)
    assert "perform: performed SUCCEEDED re_ord-1001_30" in out
    assert "after the order changed: denied stale_resource_version" in out
    assert "provider refunds: 1" in out
