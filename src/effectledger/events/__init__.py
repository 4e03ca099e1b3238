"""An operation's events as the ledger writes them: their byte format and their hash chain.

:mod:`~effectledger.events.record` defines an event's chain body and canonical bytes from one
field tuple; :mod:`~effectledger.events.chain` links each event to the one before it. The ledger
needs both on every write, so they sit beside the model, below the ledger, and import nothing but
:mod:`effectledger.model` and :mod:`effectledger.errors`. The
evidence tooling (:mod:`effectledger.audit`: sealing, Merkle logs, export, offline verification)
reads the same format and is imported only by the paths that use it.
"""
