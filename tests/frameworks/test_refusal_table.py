"""docs/frameworks.md's refusal table is what each adapter answers, row by row, both backends.

The table under "Refusals" is read from the page; each row names what a resume brings and the
answer every adapter gives. Each framework's own loop plays every row (a fresh pause per row)
and its answer must be the page's: a row the page adds, drops or words differently without a
play here, or an adapter answering otherwise, fails. Each row also checks that nothing was sent
unless the row says the call was performed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import timedelta
from itertools import count
from pathlib import Path
from typing import Any

import pytest

from effectledger.callers.frameworks.gate import Grant
from tests.callers.scenarios import (
    AGENT,
    MALLORY,
    OUTSIDER,
    REFUND_30,
    REVIEWER,
    World,
    fresh_world,
)
from tests.frameworks.drivers import DRIVERS, FRAMEWORKS, JSON, Driver, Paused

PAGE = Path(__file__).resolve().parents[2] / "docs" / "frameworks.md"
HEADER = "| a resume that brings | every adapter answers |"
ORDERS = count(1)


def documented() -> dict[str, str]:
    """The refusal table's rows: what a resume brings -> the answer, as the page words them."""
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    start = lines.index(HEADER) + 2
    rows: dict[str, str] = {}
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        brings, answer = (cell.strip() for cell in line.strip("|").split("|"))
        rows[brings] = answer
    return rows


def answered(result: JSON) -> str:
    """An adapter's answer in the page's words."""
    if "error" in result:
        return f"error `{result['error']['code']}`"
    if result["outcome"] == "denied":
        return f"`denied` / `{result['reason']}`"
    return f"`{result['outcome']}`"


class Row:
    """One row played through a driver: a fresh pause of a new order, approved in the ledger."""

    def __init__(self, world: World, driver: Driver) -> None:
        self.world = world
        self.driver = driver
        self.arguments = {**REFUND_30, "order_id": f"ord-{next(ORDERS)}"}
        self.world.orders.change("acme", self.arguments["order_id"])
        self.paused, self.grant = self.pause("call-1")

    def pause(self, call_id: str) -> tuple[Paused, Grant]:
        """A pause of the row's refund in a conversation of its own, approved in the ledger."""
        paused = self.driver.pause(AGENT, self.arguments, call_id)
        proposal = self.driver.propose(AGENT, paused)
        self.world.app.approve(REVIEWER, proposal)
        return paused, Grant.of(proposal)

    def resume(self, context: Any = AGENT, grant: Grant | None = None, paused: Any = None) -> JSON:
        """Resume the pause (or ``paused``) as ``context`` with ``grant`` (default: its own)."""
        return self.driver.resume(paused or self.paused, context, grant or self.grant)


def _add(field: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(arguments: dict[str, Any]) -> None:
        arguments[field] = value

    return change


def _again(row: Row) -> JSON:
    row.resume()
    return row.resume()


def _denied(row: Row) -> JSON:
    # a pause of its own: the row's first one is approved already
    paused = row.driver.pause(AGENT, row.arguments, "call-2")
    proposal = row.driver.propose(AGENT, paused)
    row.world.app.deny(REVIEWER, proposal, reason="not this order")
    return row.resume(paused=paused, grant=Grant.of(proposal))


def _other_conversation(row: Row) -> JSON:
    paused, _ = row.pause("call-1")  # the same call id and arguments, in another conversation
    return row.resume(paused=paused)


def _expired(row: Row) -> JSON:
    row.world.clock.advance(timedelta(minutes=16))
    return row.resume()


def _stale(row: Row) -> JSON:
    row.world.orders.change("acme", row.arguments["order_id"])
    return row.resume()


PLAYS: dict[str, Callable[[Row], JSON]] = {
    "the approved call, as its proposer": lambda row: row.resume(),
    "the same approved pause again": _again,
    "no identity of the host": lambda row: row.resume(context=None),
    "a field the action does not take (`approved_by`)": lambda row: row.resume(
        paused=row.driver.edit(row.paused, _add("approved_by", "admin"))
    ),
    "a value of the wrong type": lambda row: row.resume(
        paused=row.driver.edit(row.paused, _add("amount_minor", "30"))
    ),
    "no grant": lambda row: row.driver.resume(row.paused, AGENT, None),
    "valid arguments other than the approved ones": lambda row: row.resume(
        paused=row.driver.edited(row.paused, 3000)
    ),
    "another conversation's grant for the same call id and arguments": _other_conversation,
    "a grant of a proposal that does not exist": lambda row: row.resume(
        grant=Grant(proposal_id="prop-forged", digest=row.grant.digest)
    ),
    "another actor of the tenant": lambda row: row.resume(context=MALLORY),
    "another tenant's identity, with the grant (it names its tenant)": lambda row: row.resume(
        context=OUTSIDER
    ),
    "another tenant's identity, with a grant naming no tenant": lambda row: row.resume(
        context=OUTSIDER,
        grant=Grant(proposal_id=row.grant.proposal_id, digest=row.grant.digest),
    ),
    "a proposal the reviewer denied": _denied,
    "a proposal past its expiry": _expired,
    "an order changed since the proposal": _stale,
}


@pytest.fixture
def world(store_url: str, tmp_path: Path) -> Iterator[World]:
    """A fresh ledger and receiver with the refund action."""
    with fresh_world(store_url, tmp_path / "world") as made:
        yield made


def test_the_page_has_a_play_for_every_row() -> None:
    """Every row of the page's refusal table is played here, and every play is a row."""
    assert sorted(documented()) == sorted(PLAYS)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_each_adapter_answers_what_the_page_says(world: World, framework: str) -> None:
    """Each row, played through the framework's own loop, gets the page's answer; only the
    rows that perform send anything."""
    driver = DRIVERS[framework](world.app)
    rows = documented()
    got = {}
    for brings, play in PLAYS.items():
        effects = world.receiver.counts().effects
        got[brings] = answered(play(Row(world, driver)))
        performed = re.search(r"`(performed|replayed)`", rows[brings]) is not None
        sent = world.receiver.counts().effects - effects
        assert sent == (1 if performed else 0), brings
    assert got == rows
