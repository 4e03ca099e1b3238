"""The one object an application holds: :class:`EffectLedger` (and its async twin).

- :mod:`~effectledger.app.connecting`: :func:`connect`, the store chosen by URL;
- :mod:`~effectledger.app.ledger`: :class:`EffectLedger`, every verb;
- :mod:`~effectledger.app.refs`: how a verb is told which proposal or operation;
- :mod:`~effectledger.app.declaring`: the actions and destination adapters it has declared;
- :mod:`~effectledger.app.performing`: how ``perform`` and ``reconcile`` run and what they trace;
- :mod:`~effectledger.app.access`: who may see what (one rule for every caller);
- :mod:`~effectledger.app.keys`: API keys for callers that authenticate people and services;
- :mod:`~effectledger.app.aio`: :class:`AsyncEffectLedger`, the exact async twin.
"""

from effectledger.app.aio import AsyncEffectLedger, connect_async
from effectledger.app.connecting import connect
from effectledger.app.ledger import EffectLedger

__all__ = ["AsyncEffectLedger", "EffectLedger", "connect", "connect_async"]
