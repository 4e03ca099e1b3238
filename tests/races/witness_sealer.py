"""One sealer process submitting to witnesses, for the race tests.

``python -m tests.races.witness_sealer URL BATCH URL=KEY...`` seals acme's pending events in
batches of ``BATCH`` with the test log key and the given witnesses, and prints ``ok`` or the
refusal's reason.
"""

from __future__ import annotations

import sys

from effectledger.audit.sealing.sealer import LogSealer
from effectledger.errors import AuditVerificationFailed
from effectledger.store import open_store
from tests.support.evidence import SIGNER


def seal(url: str, batch: int, witnesses: list[str]) -> str:
    """Seal once with ``witnesses``; ``ok``, or the reason the sealer stopped."""
    store = open_store(url)
    try:
        LogSealer(store, SIGNER, batch_size=batch, witnesses=witnesses).seal("acme")
        return "ok"
    except AuditVerificationFailed as exc:
        return str(exc.details.get("reason"))
    finally:
        store.close()


if __name__ == "__main__":
    print(seal(sys.argv[1], int(sys.argv[2]), sys.argv[3:]))
