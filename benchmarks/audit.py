"""Benchmark the evidence layer: verification speed, proof sizes and times, sealing's cost.

    python benchmarks/audit.py                       # 1,000,000 events (about two minutes)
    python benchmarks/audit.py --events 100000 --ops 3000

Prints:

1. verification throughput over precomputed canonical event bytes (chain link + event hash +
   leaf hash + Merkle fold, hashlib only), beside the bare two-SHA-256-per-event floor;
2. offline verification of a real bundle file (parse, hash, chains, roots, signatures);
3. proof sizes and times at the full size: tree build, inclusion and consistency proofs;
4. append throughput of the SQLite ledger (admit + claim + record: three events per operation)
   with no sealer, with a sealer process running every 50 ms, and with the evidence trigger
   dropped (the hot path before this layer), plus the sealing delay observed.
"""

from __future__ import annotations

import argparse
import hashlib
import multiprocessing
import multiprocessing.synchronize
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

from effectledger import Command, Context, DestinationRef, Observation, Outcome
from effectledger.audit.bundles.export import export_log
from effectledger.audit.bundles.format import (
    checkpoint_line,
    consistency_line,
    event_line,
    header_line,
)
from effectledger.audit.bundles.verify import verify_bundle
from effectledger.audit.keys.signers import Signer
from effectledger.audit.log.frontier import Frontier
from effectledger.audit.log.merkle import MerkleTree
from effectledger.audit.log.proofs import verify_consistency, verify_inclusion
from effectledger.audit.log.tlog import Checkpoint, sign_checkpoint
from effectledger.audit.sealing.sealer import LogSealer
from effectledger.events.chain import GENESIS_HASH
from effectledger.events.record import EVENT_DOMAINS, entry_bytes, hash_of_entry
from effectledger.ledger import Ledger
from effectledger.store import open_store

EVENT_DOMAIN = EVENT_DOMAINS[2]
SIGNER = Signer("bench.example/log", bytes(range(32)))
TYPES = (
    "OperationAdmitted",
    "AttemptPrepared",
    "SubmissionOutcomeUnknown",
    "ProviderAcceptanceReconciled",
)


def synthesize(count: int) -> list[bytes]:
    """``count`` canonical event entries: operations of four chained events each."""
    entries: list[bytes] = []
    heads: dict[int, str] = {}
    for index in range(count):
        op, step = divmod(index, 4)
        body = {
            "actor": "dispatch-worker",
            "attempt_id": None if step == 0 else f"attempt-{op:08d}",
            "details": {"outcome": "Accepted", "provider_reference": f"rcpt-{op:012d}"}
            if step == 3
            else {},
            "event_id": f"{index:032x}",
            "event_type": TYPES[step],
            "evidence_reference": None if step < 2 else f"reply/{op}/{step}",
            "observation_id": None,
            "operation_id": f"op-{op:08d}",
            "prev_hash": heads.get(op, GENESIS_HASH),
            "recorded_us": 1_767_225_600_000_000 + index,
            "sequence": step + 1,
            "tenant_id": "acme",
        }
        entry = entry_bytes(body)
        heads[op] = hash_of_entry(entry)
        if step == 3:
            del heads[op]
        entries.append(entry)
    return entries


def verify_core(entries: list[bytes]) -> tuple[float, bytes]:
    """Chain + leaf hashing + Merkle fold over precomputed bytes; returns seconds and root."""
    sha = hashlib.sha256
    domain, zero = EVENT_DOMAIN, b"\x00"
    started = time.perf_counter()
    frontier = Frontier()
    append = frontier.append
    heads: dict[bytes, str] = {}
    for entry in entries:
        # The operation id and prev_hash sit at fixed places at the end of a canonical body.
        tail = entry.rfind(b',"operation_id":"')
        op_end = entry.index(b'"', tail + 17)
        operation = entry[tail + 17 : op_end]
        prev = entry[op_end + 15 : entry.index(b'"', op_end + 15)].decode()
        if prev != heads.get(operation, GENESIS_HASH):
            raise AssertionError("broken chain")
        heads[operation] = "v2:" + sha(domain + entry).hexdigest()
        append(sha(zero + entry).digest())
    root = frontier.root()
    return time.perf_counter() - started, root


def hash_floor(entries: list[bytes]) -> float:
    sha = hashlib.sha256
    started = time.perf_counter()
    for entry in entries:
        sha(EVENT_DOMAIN + entry).hexdigest()
        sha(b"\x00" + entry).digest()
    return time.perf_counter() - started


def write_bundle(path: Path, entries: list[bytes], every: int) -> MerkleTree:
    sha = hashlib.sha256
    tree = MerkleTree()
    previous = 0
    seq = 0
    with path.open("wb") as out:
        out.write(header_line("acme"))
        for position, entry in enumerate(entries):
            leaf = sha(b"\x00" + entry).digest()
            tree.append(leaf)
            out.write(event_line(entry, hash_of_entry(entry), leaf, position))
            if tree.size % every == 0 or tree.size == len(entries):
                seq += 1
                if previous:
                    out.write(
                        consistency_line(
                            previous, tree.size, tree.consistency_proof(previous, tree.size)
                        )
                    )
                note = sign_checkpoint(
                    Checkpoint("effectledger/acme", tree.size, tree.root()), [SIGNER]
                )
                out.write(checkpoint_line(seq, note))
                previous = tree.size
    return tree


def _micros(samples: list[float]) -> str:
    return f"median {statistics.median(samples) * 1e6:.1f} µs"


def proofs(tree: MerkleTree) -> None:
    size = tree.size
    started = time.perf_counter()
    rebuilt = MerkleTree(tree.leaf(i) for i in range(size))
    build = time.perf_counter() - started
    root = rebuilt.root()
    rng = random.Random(7)
    make, check, lengths = [], [], []
    for _ in range(2000):
        index = rng.randrange(size)
        t0 = time.perf_counter()
        path = rebuilt.inclusion_proof(index)
        t1 = time.perf_counter()
        verify_inclusion(rebuilt.leaf(index), index, size, path, root)
        t2 = time.perf_counter()
        make.append(t1 - t0)
        check.append(t2 - t1)
        lengths.append(len(path))
    print(f"  tree of {size:,} leaves built from leaf hashes in {build:.2f} s")
    print(
        f"  inclusion proof: {min(lengths)}-{max(lengths)} hashes "
        f"({max(lengths) * 32} bytes, {max(lengths) * 67 + 120} bytes as a bundle line); "
        f"make {_micros(make)}, verify {_micros(check)}"
    )
    make, check, lengths = [], [], []
    for _ in range(500):
        old = rng.randrange(1, size)
        t0 = time.perf_counter()
        path = rebuilt.consistency_proof(old, size)
        t1 = time.perf_counter()
        verify_consistency(old, size, rebuilt.root_at(old), root, path)
        t2 = time.perf_counter()
        make.append(t1 - t0)
        check.append(t2 - t1)
        lengths.append(len(path))
    print(
        f"  consistency proof to {size:,}: {min(lengths)}-{max(lengths)} hashes "
        f"(≤ {max(lengths) * 32} bytes); make {_micros(make)}, verify {_micros(check)}"
    )


def _seal_forever(
    url: str, stop: multiprocessing.synchronize.Event, delays: multiprocessing.Queue[list[float]]
) -> None:
    store = open_store(url)
    sealer = LogSealer(store, SIGNER, batch_size=20_000)
    seen: list[float] = []
    while not stop.is_set():
        started = time.perf_counter()
        report = sealer.seal("acme")
        if report.max_delay is not None:
            seen.append(report.max_delay.total_seconds())
        time.sleep(max(0.0, 0.05 - (time.perf_counter() - started)))
    sealer.seal("acme")
    delays.put(seen)
    store.close()


def append(url: str, operations: int) -> float:
    store = open_store(url)
    ledger = Ledger(store)
    context = Context(tenant_id="acme", actor_id="bench")
    destination = DestinationRef(account_id="acct", endpoint="https://receiver.invalid/v1")
    command = Command(action="send", contract_version="v1", arguments={"body": "hello"})
    started = time.perf_counter()
    for index in range(operations):
        operation_id = f"op-{index}"
        ledger.admit(
            context,
            operation_id=operation_id,
            revision="r1",
            command=command,
            destination=destination,
            admission_reference="approval/1",
        )
        prepared = ledger.claim(context, operation_id, attempt_id=f"a-{index}")
        assert prepared is not None
        ledger.record(
            prepared,
            Observation(
                outcome=Outcome.ACCEPTED,
                provider_reference=f"rcpt-{index}",
                evidence_reference=f"reply/{index}",
            ),
        )
    elapsed = time.perf_counter() - started
    store.close()
    return elapsed


def export_and_verify(url: str, bundle: Path, events: int) -> None:
    store = open_store(url)
    started = time.perf_counter()
    report = export_log(store, "acme", bundle, batch_size=5000)
    exported = time.perf_counter() - started
    store.close()
    started = time.perf_counter()
    verified = verify_bundle(bundle, [SIGNER.verifier()])
    checked = time.perf_counter() - started
    assert report.events == events
    assert verified.ok, verified.findings[:3]
    print(
        f"  export of those {events:,} events: {events / exported:,.0f} events/s; "
        f"verify: {events / checked:,.0f} events/s ({report.checkpoints} checkpoints)"
    )


def append_throughput(operations: int, synchronous: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        for label in ("evidence trigger dropped", "sealing off", "sealing on (every 50 ms)"):
            path = Path(folder) / f"{label.split()[0]}-{label.split()[1]}.db"
            url = f"sqlite:///{path}?synchronous={synchronous}"
            open_store(url).close()
            if label.startswith("evidence"):
                connection = sqlite3.connect(path)
                connection.execute("DROP TRIGGER audit_events_log_pending")
                connection.close()
            waits: list[float] = []
            if label.startswith("sealing on"):
                context = multiprocessing.get_context("spawn")
                stop = context.Event()
                delays: multiprocessing.Queue[list[float]] = context.Queue()
                sealer = context.Process(target=_seal_forever, args=(url, stop, delays))
                sealer.start()
                time.sleep(1.0)  # let the sealer import and open the store
            elapsed = append(url, operations)
            if label.startswith("sealing on"):
                stop.set()
                waits = delays.get(timeout=120)
                sealer.join()
            events = 3 * operations
            store = open_store(url)
            sealed = store.one("log_head_get", {"tenant_id": "acme"})
            store.close()
            extra = ""
            if waits:
                waits.sort()
                extra = (
                    f"; {len(waits)} seal passes, longest wait per pass: median "
                    f"{statistics.median(waits) * 1000:.0f} ms, p99 "
                    f"{waits[int(len(waits) * 0.99)] * 1000:.0f} ms, "
                    f"max {waits[-1] * 1000:.0f} ms; "
                    f"sealed {sealed['size'] if sealed else 0:,}"
                )
            print(
                f"  {label:26s} {operations / elapsed:8,.0f} ops/s  "
                f"{events / elapsed:8,.0f} events/s{extra}"
            )
            if waits:
                export_and_verify(url, Path(folder) / "export.jsonl", events)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="log size to verify")
    parser.add_argument("--ops", type=int, default=10_000, help="operations in the append test")
    parser.add_argument(
        "--synchronous", default="NORMAL", help="SQLite synchronous mode for the append test"
    )
    parser.add_argument(
        "--checkpoint-every", type=int, default=10_000, help="events per checkpoint in the bundle"
    )
    args = parser.parse_args(argv)
    print(
        f"effectledger evidence benchmark (Python {sys.version.split()[0]}, {os.cpu_count()} CPUs)"
    )

    print(f"\n1. Verification over precomputed canonical bytes, {args.events:,} events")
    entries = synthesize(args.events)
    floor = hash_floor(entries)
    elapsed, root = verify_core(entries)
    print(f"  two SHA-256 per event (floor): {args.events / floor:10,.0f} events/s")
    print(f"  chain + leaf + Merkle fold:    {args.events / elapsed:10,.0f} events/s")

    with tempfile.TemporaryDirectory() as folder:
        bundle = Path(folder) / "bundle.jsonl"
        tree = write_bundle(bundle, entries, args.checkpoint_every)
        assert tree.root() == root
        del entries
        size = bundle.stat().st_size
        print(
            f"\n2. Offline verify of a bundle file: {size / 1e6:,.0f} MB, "
            f"{args.events // args.checkpoint_every} checkpoints"
        )
        started = time.perf_counter()
        report = verify_bundle(bundle, [SIGNER.verifier()])
        elapsed = time.perf_counter() - started
        assert report.ok, report.findings[:3]
        print(
            f"  verify_bundle: {elapsed:.2f} s, {args.events / elapsed:,.0f} events/s "
            f"({size / elapsed / 1e6:,.0f} MB/s)"
        )

    print(f"\n3. Proofs at {tree.size:,} events")
    proofs(tree)

    print(f"\n4. Append throughput, SQLite synchronous={args.synchronous}, {args.ops:,} operations")
    append_throughput(args.ops, args.synchronous)
    return 0


if __name__ == "__main__":
    sys.exit(main())
