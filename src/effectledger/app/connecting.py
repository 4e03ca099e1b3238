"""Opening the one object: :func:`connect` chooses the store from a URL and builds the ledger."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal

from effectledger.app.config import Config, load_config
from effectledger.app.ledger import EffectLedger
from effectledger.app.protection import (
    LedgerKeys,
    find_keys,
    sealer_memory_for,
    warn_unprotected,
)
from effectledger.clock import Clock
from effectledger.destinations import Destination
from effectledger.events.authentication import TRAIL_KEY_ENV
from effectledger.keyfiles import key_directory_for
from effectledger.ledger import LedgerSettings
from effectledger.store import check_store_url, open_store

if TYPE_CHECKING:
    from effectledger.audit.keys.signers import Signer

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
    keys: Literal["find"] | None = "find",
    key_dir: str | os.PathLike[str] | None = None,
    **store_options: Any,
) -> EffectLedger:
    """Open the ledger at ``url`` (else ``$EFFECTLEDGER_DB``, else ``sqlite:///effectledger.db``).

    ``migrate`` brings the schema up to date first (each migration once, even when several
    processes start together). ``destinations`` binds existing
    :class:`~effectledger.destinations.Destination` adapters; ``signer`` is the log key for
    :meth:`EffectLedger.seal` (default: ``$EFFECTLEDGER_LOG_KEY``). Use the result as a context
    manager to close the store.

    The ledger's keys (:mod:`effectledger.app.protection`) are found by default: the trail key
    of ``settings.trail_keys`` and ``signer`` if given, else ``$EFFECTLEDGER_TRAIL_KEY`` and
    ``$EFFECTLEDGER_LOG_KEY``, else the files of the key directory (``key_dir``, else the
    ``key_dir`` setting, else beside an SQLite file: ``ledger.db.keys``). With ``migrate``, a
    ledger that has never written an event and has no key directory gets one with a new key of
    each kind. ``keys=None`` opens the ledger with only the keys passed here. A ledger left
    without a key logs one warning on the ``effectledger`` logger saying what is unprotected.
    A PostgreSQL ledger needs a ``key_dir`` (or ``keys=None``): without one this raises
    :class:`~effectledger.errors.InvalidInput` (field ``key_dir``) and opens nothing.

    Without ``url`` or ``settings`` they come from the configuration
    (:func:`~effectledger.app.config.load_config`: ``$EFFECTLEDGER_CONFIG``'s TOML file and the
    ``EFFECTLEDGER_*`` variables), validated here.
    """
    config: Config | None = None
    if url is None or settings is None:  # what the configuration does not leave to the caller
        config = load_config()
        url = url or config["db"]
        settings = settings or config.ledger_settings()
    check_store_url(url)  # a scheme no backend serves: refused before keys are looked for
    if keys == "find":
        if key_dir is None:
            key_dir = (config or load_config())["key_dir"]
        if settings.trail_keys is None and not os.environ.get(TRAIL_KEY_ENV, "").strip():
            key_directory_for(url, key_dir)  # no directory to look in: refused before opening
    store = open_store(url, migrate=migrate, **store_options)
    try:
        if keys == "find":
            found = find_keys(
                store,
                url,
                key_dir=key_dir,
                trail_keys=settings.trail_keys,
                signer=signer,
                create=migrate,
            )
        else:
            found = LedgerKeys(settings.trail_keys, signer)
        warn_unprotected(url, found)
        return EffectLedger(
            store,
            clock=clock,
            settings=dataclasses.replace(settings, trail_keys=found.trail_keys),
            destinations=destinations,
            signer=found.signer,
            log_key_file=found.log_key_file,
            sealer_memory=sealer_memory_for(url, key_dir) if keys == "find" else None,
        )
    except BaseException:
        store.close()
        raise
