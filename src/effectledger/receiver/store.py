"""The reference receiver's own SQLite store: one effect per ``(collection, key)``, and counters.

Its SQL lives in ``sql/receiver/`` (schema and named statements), as the ledger's does. A submission
decides in one ``BEGIN IMMEDIATE`` transaction whether it performs a new effect, replays an
earlier one, or conflicts, so the effect count is exact however requests interleave.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from effectledger.destinations.simulated import ReceiverCounts
from effectledger.sql import load_statements, read_sql

__all__ = ["ReceiverCounts", "ReceiverStore", "Submission"]


@dataclass(frozen=True, slots=True)
class Submission:
    """What one submission decided, and the effect row it is about."""

    verdict: Literal["performed", "replayed", "conflict", "in_flight"]
    reference: str
    state: str
    created_ns: int


class ReceiverStore:
    """The effects table and counters of one receiver (thread-safe: one lock, one connection)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._connection = sqlite3.connect(
            self.path, isolation_level=None, timeout=10, check_same_thread=False
        )
        self._connection.row_factory = sqlite3.Row
        self._queries = load_statements("receiver", "queries.sql")
        self._run("journal_mode_wal")
        self._run("synchronous_normal")
        self._connection.executescript(read_sql("receiver", "schema.sql"))

    def _run(self, query: str, /, **params: Any) -> sqlite3.Cursor:
        return self._connection.execute(self._queries[query], params)

    @staticmethod
    def reference(collection: str, key: str) -> str:
        """The stable reference the receiver gives the effect under ``(collection, key)``."""
        return "rcpt-" + hashlib.sha256(f"{collection}\0{key}".encode()).hexdigest()[:20]

    def submit(
        self, collection: str, key: str, body_sha256: str, body_json: str, *, hold: bool
    ) -> Submission:
        """Perform the effect once per key; ``hold`` leaves it ``processing`` until completed."""
        with self._lock:
            self._run("begin_write")
            try:
                self._run("counter_add", name="submissions")
                row = self._run("effect_get", collection=collection, key=key).fetchone()
                if row is None:
                    reference = self.reference(collection, key)
                    now_ns = time.time_ns()
                    state = "processing" if hold else "performed"
                    self._run(
                        "effect_insert",
                        collection=collection,
                        key=key,
                        body_sha256=body_sha256,
                        body_json=body_json,
                        provider_reference=reference,
                        state=state,
                        now_ns=now_ns,
                    )
                    found = Submission("performed", reference, state, now_ns)
                else:
                    verdict: Literal["replayed", "conflict", "in_flight"] = "replayed"
                    if row["body_sha256"] != body_sha256:
                        verdict = "conflict"
                    elif row["state"] == "processing":
                        verdict = "in_flight"
                    counter = {"conflict": "conflicts", "replayed": "replays"}.get(verdict)
                    if counter is not None:
                        self._run("counter_add", name=counter)
                    found = Submission(
                        verdict, row["provider_reference"], row["state"], row["created_ns"]
                    )
                self._run("commit")
            except BaseException:
                if self._connection.in_transaction:
                    self._run("rollback")
                raise
        return found

    def complete(self, collection: str, key: str) -> None:
        """Mark a held effect performed."""
        with self._lock:
            self._run("effect_performed", collection=collection, key=key)

    def find(self, collection: str, key: str) -> sqlite3.Row | None:
        """The effect under ``(collection, key)``, counting the lookup."""
        with self._lock:
            self._run("counter_add", name="lookups")
            row: sqlite3.Row | None = self._run(
                "effect_get", collection=collection, key=key
            ).fetchone()
            return row

    def counts(self) -> ReceiverCounts:
        """The counters and the number of effects."""
        with self._lock:
            values = {row["name"]: int(row["value"]) for row in self._run("counters_all")}
            effects = int(self._run("effects_count").fetchone()["effects"])
        return ReceiverCounts(
            submissions=values["submissions"],
            lookups=values["lookups"],
            effects=effects,
            conflicts=values["conflicts"],
            replays=values["replays"],
        )

    def effects_for(self, key: str) -> int:
        """How many effects were performed under ``key`` in any collection."""
        with self._lock:
            return int(self._run("effects_for_key", key=key).fetchone()["effects"])

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._connection.close()
