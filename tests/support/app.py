"""One EffectLedger over a test's own Ledger, its actions registered with their adapters."""

from __future__ import annotations

from collections.abc import Iterable

from effectledger import Destination, EffectLedger
from effectledger.actions import Action, ActionRegistry
from effectledger.ledger import Ledger


def ledger_over(
    ledger: Ledger,
    actions: ActionRegistry | Iterable[Action],
    destinations: Iterable[Destination],
) -> EffectLedger:
    """The one object over ``ledger``: each action registered with the adapter of its endpoint."""
    app = EffectLedger(ledger, destinations=destinations)
    by_ref = app.destinations
    for action in actions:
        app.register(action, by_ref.get(action.destination))
    return app
