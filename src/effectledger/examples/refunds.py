"""A refund action, as an application would register it.

The arguments model is strict: an integer number of minor units (floats are refused), a real
ISO 4217 currency code, an order id of a fixed shape, and a free-text reason normalized to NFC.
Unknown fields are refused, so an ``approved_by`` or ``tenant_id`` slipped in by a model never
reaches the ledger. :class:`OrderBook` stands for the application's own order records: it is
what the resource-version callback reads.
"""

from __future__ import annotations

import threading
import unicodedata
from datetime import timedelta
from typing import TYPE_CHECKING, Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from effectledger.actions.policy import Policy, RulePolicy
from effectledger.actions.registry import Action
from effectledger.model.operations import Context, DestinationRef

if TYPE_CHECKING:
    from effectledger.app import EffectLedger

__all__ = ["ISO_4217", "OrderBook", "RefundArguments", "refund_action"]

_ISO_4217_CODES = """
    AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BRL BSD BTN
    BWP BYN BZD CAD CDF CHF CLP CNY COP CRC CUP CVE CZK DJF DKK DOP DZD EGP ERN ETB EUR FJD
    FKP GBP GEL GHS GIP GMD GNF GTQ GYD HKD HNL HTG HUF IDR ILS INR IQD IRR ISK JMD JOD JPY
    KES KGS KHR KMF KPW KRW KWD KYD KZT LAK LBP LKR LRD LSL LYD MAD MDL MGA MKD MMK MNT MOP
    MRU MUR MVR MWK MXN MYR MZN NAD NGN NIO NOK NPR NZD OMR PAB PEN PGK PHP PKR PLN PYG QAR
    RON RSD RUB RWF SAR SBD SCR SDG SEK SGD SHP SLE SOS SRD SSP STN SVC SYP SZL THB TJS TMT
    TND TOP TRY TTD TWD TZS UAH UGX USD UYU UZS VES VND VUV WST XAF XCD XOF XPF YER ZAR ZMW
    ZWG
"""
ISO_4217 = frozenset(_ISO_4217_CODES.split())


def _currency(code: str) -> str:
    if code not in ISO_4217:
        raise ValueError(f"{code!r} is not an ISO 4217 currency code")
    return code


def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


class RefundArguments(BaseModel):
    """What a model may propose for a refund: nothing about who, only what."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    order_id: Annotated[
        str,
        StringConstraints(pattern=r"^ord-[0-9]{1,12}$"),
        Field(description="The order to refund, such as ord-1001."),
    ]
    amount_minor: Annotated[
        int,
        Field(gt=0, le=10_000_000, description="The amount in minor units (cents), an integer."),
    ]
    currency: Annotated[
        str,
        AfterValidator(_currency),
        Field(
            description="The ISO 4217 code of the order's currency, such as EUR.",
            json_schema_extra={"enum": sorted(ISO_4217)},  # what _currency accepts, published
        ),
    ]
    reason: Annotated[
        str,
        StringConstraints(max_length=500),
        AfterValidator(_nfc),
        Field(description="Why the refund is due, for the reviewer."),
    ] = ""


class OrderBook:
    """The application's orders and their versions (what ``resource_version`` reads)."""

    def __init__(self) -> None:
        self._versions: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    def version(self, context: Context, order_id: str) -> str:
        """The order's current version for the context's tenant."""
        with self._lock:
            return f"v{self._versions.setdefault((context.tenant_id, order_id), 1)}"

    def change(self, tenant_id: str, order_id: str) -> str:
        """Record that the order changed (a partial shipment, an edit...)."""
        with self._lock:
            key = (tenant_id, order_id)
            self._versions[key] = self._versions.get(key, 1) + 1
            return f"v{self._versions[key]}"


def refund_action(
    *,
    orders: OrderBook,
    destination: DestinationRef,
    policy: Policy | None = None,
    proposal_ttl: timedelta = timedelta(minutes=15),
) -> Action:
    """The ``refund_order`` action (contract ``refund-v1``), drawing on the ``refunds`` pool."""
    return Action(
        name="refund_order",
        contract_version="refund-v1",
        arguments=RefundArguments,
        policy=policy or RulePolicy(version="refund-policy-1"),
        destination=destination,
        pool="refunds",
        units=lambda arguments: arguments.amount_minor,
        target=lambda arguments: arguments.order_id,
        resource_version=orders.version,
        description="Refund part or all of an order, in minor units of its currency.",
        proposal_ttl=proposal_ttl,
    )


def desk_app(store_url: str) -> EffectLedger:
    """The refund action over ``store_url``, bound to the receiver in ``$EFFECTLEDGER_RECEIVER``.

    What ``effectledger serve --app effectledger.examples.refunds:desk_app`` serves, for
    looking at a demo's ledger on the desk. The receiver file must exist.
    """
    import os
    from pathlib import Path

    from effectledger.app import connect
    from effectledger.destinations.simulated import SimulatedReceiver
    from effectledger.errors import InvalidInput

    path = os.environ.get("EFFECTLEDGER_RECEIVER", "")
    if not path or not Path(path).is_file():
        raise InvalidInput("set EFFECTLEDGER_RECEIVER to the demo's receiver.db", field="app")
    receiver = SimulatedReceiver(path)
    ledger = connect(store_url, migrate=False)
    destination = DestinationRef(account_id=receiver.account_id, endpoint=receiver.endpoint)
    ledger.register(refund_action(orders=OrderBook(), destination=destination), receiver)
    return ledger
