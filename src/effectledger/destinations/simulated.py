"""A simulated receiver with its own SQLite file: the destination the tests and the demo count on.

It is idempotent by key: a submit under a key it already performed returns the same receipt and
performs nothing; a submit under that key with another command is rejected. It counts every
submission and every lookup, and records one effect per key, in its own database, so a test can
ask the destination itself how many effects happened.

Fault modes make the hard cases reproducible: the effect commits and the reply is lost; the
request is lost before the effect; permanent and retryable rejections; a lookup that fails or
that cannot tell; a slow reply.
"""

from __future__ import annotations

import enum
import hashlib
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from effectledger._failpoints import crash_point
from effectledger.destinations import BoundDestination
from effectledger.destinations import concurrent_sends as checked_sends
from effectledger.errors import (
    DeliveryUncertain,
    DestinationUnavailable,
    InvalidInput,
    NotFound,
)
from effectledger.model.canonical import fingerprinted
from effectledger.model.operations import Command, DestinationRef, Observation, Outcome
from effectledger.sql import SYNCHRONOUS_LEVELS, fill, load_statements, read_sql

__all__ = [
    "DestinationUnavailable",
    "LookupMode",
    "ReceivedEffect",
    "ReceiverCounts",
    "SimulatedReceiver",
    "SubmitMode",
]

_SQL = load_statements("simulated", "queries.sql")


class SubmitMode(enum.StrEnum):
    """How the receiver answers a submission."""

    ACCEPT = "accept"
    ACCEPT_THEN_LOSE_REPLY = "accept-then-lose-reply"
    LOSE_REQUEST = "lose-request"
    PERMANENT_REJECT = "permanent-reject"
    RETRYABLE_REJECT = "retryable-reject"


class LookupMode(enum.StrEnum):
    """How the receiver answers a lookup."""

    ANSWER = "answer"
    FAIL = "fail"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class ReceiverCounts:
    """A receiver's own record: requests it saw and effects it performed.

    ``replays`` counts submissions answered with an effect performed earlier under the same key
    (nothing was performed again); ``conflicts`` those refused for another command under it.
    """

    submissions: int
    lookups: int
    effects: int
    conflicts: int
    replays: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ReceivedEffect:
    """One effect as the receiver keeps it under its idempotency key.

    ``command_json`` is the command's canonical text: its action, contract version and
    arguments, the bytes its fingerprint hashes. ``digest`` and the ids are those of the
    approved action the command carried, so the receiver itself can show which approval it
    acted on; ``amount`` and ``unit`` are read from the arguments ``amount_minor``/``amount``
    and ``currency``/``unit`` when present.
    """

    idempotency_key: str
    provider_reference: str
    command_json: str
    operation_id: str | None
    proposal_id: str | None
    approval_id: str | None
    digest: str | None
    amount: int | None
    unit: str | None


def _amount_and_unit(command: Command) -> tuple[int | None, str | None]:
    # Looked up and checked in place, the common types first: every effect comes through here.
    arguments = command.arguments
    amount = arguments["amount_minor"] if "amount_minor" in arguments else arguments.get("amount")
    unit = arguments["currency"] if "currency" in arguments else arguments.get("unit")
    return (
        amount
        if type(amount) is int or (isinstance(amount, int) and not isinstance(amount, bool))
        else None,
        unit if type(unit) is str or isinstance(unit, str) else None,
    )


class SimulatedReceiver(BoundDestination):
    """A destination backed by its own SQLite file (see the module docstring)."""

    def __init__(
        self,
        path: str | Path,
        *,
        account_id: str = "acct-demo",
        endpoint: str = "https://receiver.invalid/v1/effects",
        submit_mode: SubmitMode = SubmitMode.ACCEPT,
        lookup_mode: LookupMode = LookupMode.ANSWER,
        reply_delay_s: float = 0.0,
        synchronous: str = "FULL",
        create: bool = True,
        concurrent_sends: int = 4,
    ) -> None:
        """Open the receiver's file at ``path``, creating it unless ``create`` is false.

        ``concurrent_sends``: how many submissions a batch worker sends it at once (each thread
        has its own connection to the file, whose writes SQLite serializes).

        With ``create=False`` only an existing receiver file is opened: a missing path raises
        :class:`~effectledger.errors.NotFound`, a directory or a file that is not a receiver's
        database raises :class:`~effectledger.errors.InvalidInput`, and nothing is written.
        """
        # Refuses a malformed account or endpoint (a control character, a lone surrogate) with
        # invalid_input here, not with an encoding error at the first submission.
        DestinationRef(account_id=account_id, endpoint=endpoint)
        self.concurrent_sends = concurrent_sends
        checked_sends(self)
        self.path = Path(path)
        self._account_id = account_id
        self._endpoint = endpoint
        self.submit_mode = submit_mode
        self.lookup_mode = lookup_mode
        self.reply_delay_s = reply_delay_s
        if synchronous.upper() not in SYNCHRONOUS_LEVELS:
            raise InvalidInput(
                f"synchronous must be one of {', '.join(SYNCHRONOUS_LEVELS)}", field="synchronous"
            )
        self._synchronous = synchronous.upper()
        self._local = threading.local()
        self._writing = threading.Lock()
        self._create = create
        if create:
            self._connect().executescript(read_sql("simulated", "schema.sql"))
        else:
            self._check_existing()

    def _connect(self) -> sqlite3.Connection:
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._open()
            connection.execute(_SQL["journal_mode_wal"])
            connection.execute(fill(_SQL["synchronous"], level=self._synchronous))
            self._local.connection = connection
        return connection

    def _open(self) -> sqlite3.Connection:
        if self._create:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            return sqlite3.connect(self.path, isolation_level=None, timeout=10)
        # "mode=rw" opens an existing file and never creates one.
        uri = self.path.absolute().as_uri() + "?mode=rw"
        return sqlite3.connect(uri, uri=True, isolation_level=None, timeout=10)

    def _check_existing(self) -> None:
        if not self.path.exists():
            raise NotFound(f"no receiver file at {self.path}", reason="no_receiver")
        if not self.path.is_file():
            raise InvalidInput(f"{self.path} is not a file", reason="not_a_receiver")
        try:
            connection = self._open()
            try:
                connection.execute(_SQL["check_tables"]).fetchone()
            finally:
                connection.close()
        except sqlite3.DatabaseError as exc:
            raise InvalidInput(
                f"{self.path} is not a simulated receiver's database", reason="not_a_receiver"
            ) from exc

    @staticmethod
    def receipt(key: str) -> str:
        """The stable receipt this receiver gives the effect performed under ``key``."""
        return "rcpt-" + hashlib.sha256(key.encode()).hexdigest()[:20]

    def _count(self, connection: sqlite3.Connection, name: str) -> None:
        connection.execute(_SQL["counter_add"], {"name": name})

    def submit(self, command: Command, key: str) -> Observation:
        """Perform ``command`` once under ``key`` (see the fault modes)."""
        mode = self.submit_mode
        connection = self._connect()
        # Encoded once: what its fingerprint hashes is what the receiver keeps.
        command_bytes, print_ = fingerprinted(command)
        # This process's threads take the file's one write lock in turn, never SQLite's busy
        # handler, which sleeps whole milliseconds between tries.
        with self._writing:
            connection.execute(_SQL["begin_write"])
            try:
                self._count(connection, "submissions")
                if mode is SubmitMode.LOSE_REQUEST:
                    connection.execute(_SQL["commit"])
                    raise DeliveryUncertain("the request was lost on the way")
                if mode is SubmitMode.PERMANENT_REJECT:
                    connection.execute(_SQL["commit"])
                    return Observation(
                        outcome=Outcome.PERMANENT_REJECTION,
                        evidence_reference=f"receiver-reject/{key}",
                    )
                if mode is SubmitMode.RETRYABLE_REJECT:
                    connection.execute(_SQL["commit"])
                    return Observation(
                        outcome=Outcome.RETRYABLE_REJECTION,
                        evidence_reference=f"receiver-throttle/{key}",
                    )
                existing = connection.execute(_SQL["effect_by_key"], {"key": key}).fetchone()
                other = existing is not None and (
                    existing[0] != print_ or existing[2] != command.digest
                )
                if other:
                    self._count(connection, "conflicts")
                    connection.execute(_SQL["commit"])
                    return Observation(
                        outcome=Outcome.PERMANENT_REJECTION,
                        evidence_reference=f"receiver-conflict/{key}",
                    )
                if existing is None:
                    reference = self.receipt(key)
                    amount, unit = _amount_and_unit(command)
                    connection.execute(
                        _SQL["effect_insert"],
                        {
                            "key": key,
                            "fingerprint": print_,
                            "command_json": command_bytes.decode(),
                            "provider_reference": reference,
                            "created_ns": time.time_ns(),
                            "operation_id": command.operation_id,
                            "proposal_id": command.proposal_id,
                            "approval_id": command.approval_id,
                            "digest": command.digest,
                            "amount": amount,
                            "unit": unit,
                        },
                    )
                else:
                    reference = existing[1]
                    self._count(connection, "replays")
                connection.execute(_SQL["commit"])
            except BaseException:
                if connection.in_transaction:
                    connection.execute(_SQL["rollback"])
                raise
        crash_point("destination_committed")
        if self.reply_delay_s:
            time.sleep(self.reply_delay_s)
        if mode is SubmitMode.ACCEPT_THEN_LOSE_REPLY:
            raise DeliveryUncertain("the effect was performed but the reply was lost")
        return Observation(
            outcome=Outcome.ACCEPTED,
            provider_reference=reference,
            evidence_reference=f"receiver-reply/{reference}",
        )

    def lookup(self, key: str) -> Observation:
        """Say what was done under ``key``: Accepted with a receipt, or Unknown."""
        connection = self._connect()
        with self._writing:
            self._count(connection, "lookups")
        if self.lookup_mode is LookupMode.FAIL:
            raise DestinationUnavailable("the receiver did not answer the lookup")
        if self.lookup_mode is LookupMode.UNKNOWN:
            return Observation.unknown()
        row = connection.execute(_SQL["effect_reference"], {"key": key}).fetchone()
        if row is None:
            return Observation.unknown()
        return Observation(
            outcome=Outcome.ACCEPTED,
            provider_reference=row[0],
            evidence_reference=f"provider-lookup/{row[0]}",
            observation_id=f"lookup-{row[0]}",
        )

    def counts(self) -> ReceiverCounts:
        """The receiver's counters and its number of effects."""
        connection = self._connect()
        values = dict(connection.execute(_SQL["counters_all"]).fetchall())
        effects = connection.execute(_SQL["effects_count"]).fetchone()[0]
        return ReceiverCounts(
            submissions=int(values["submissions"]),
            lookups=int(values["lookups"]),
            effects=int(effects),
            conflicts=int(values["conflicts"]),
            replays=int(values.get("replays", 0)),
        )

    def effect(self, key: str) -> ReceivedEffect | None:
        """What the receiver keeps under ``key``: the command, what authorized it, the amount."""
        row = self._connect().execute(_SQL["effect_record"], {"key": key}).fetchone()
        if row is None:
            return None
        return ReceivedEffect(
            idempotency_key=key,
            provider_reference=row[0],
            command_json=row[1],
            operation_id=row[2],
            proposal_id=row[3],
            approval_id=row[4],
            digest=row[5],
            amount=row[6],
            unit=row[7],
        )

    def effects_for(self, key: str) -> int:
        """How many effects were performed under ``key`` (0 or 1)."""
        row = self._connect().execute(_SQL["effects_for_key"], {"key": key}).fetchone()
        return int(row[0])

    def close(self) -> None:
        """Close this thread's connection."""
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is not None:
            connection.close()
            self._local.connection = None
