"""Opening the one object: :func:`connect` chooses the store from a URL and builds the ledger."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from effectledger.app.config import load_config
from effectledger.app.ledger import EffectLedger
from effectledger.clock import Clock
from effectledger.destinations import Destination
from effectledger.ledger import LedgerSettings
from effectledger.store import open_store

if TYPE_CHECKING:
    from effectledger.audit.signers import Signer

__all__ = ["DEFAULT_URL", "URL_VARIABLE", "connect"]

URL_VARIABLE = "EFFECTLEDGER_DB"
DEFAULT_URL = "sqlite:///effectledger.db"


def connect(
    url: str | None = None,
    *,
    migrate: bool = True,
    clock: Clock | None = None,
    settings: LedgerSettings | None = None,
    destinations: Iterable[Destination] = (),
    signer: Signer | None = None,
    **store_options: Any,
) -> EffectLedger:
    """Open the ledger at ``url`` (else ``$EFFECTLEDGER_DB``, else ``sqlite:///effectledger.db``).

    ``migrate`` brings the schema up to date first (each migration once, even when several
    processes start together). ``destinations`` binds existing
    :class:`~effectledger.destinations.Destination` adapters; ``signer`` is the log key for
    :meth:`EffectLedger.seal` (default: ``$EFFECTLEDGER_LOG_KEY``). Use the result as a context
    manager to close the store.

    Without ``url`` or ``settings`` they come from the configuration
    (:func:`~effectledger.app.config.load_config`: ``$EFFECTLEDGER_CONFIG``'s TOML file and the
    ``EFFECTLEDGER_*`` variables), validated here.
    """
    if url is None or settings is None:  # what the configuration does not leave to the caller
        config = load_config()
        url = url or config["db"]
        settings = settings or config.ledger_settings()
    store = open_store(url, migrate=migrate, **store_options)
    try:
        return EffectLedger(
            store, clock=clock, settings=settings, destinations=destinations, signer=signer
        )
    except BaseException:
        store.close()
        raise
