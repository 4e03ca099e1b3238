"""Benchmark witnessing: what a checkpoint costs the sealer with witnesses on loopback.

Run it from the repository root::

    .venv/bin/python benchmarks/witness.py [--checkpoints N] [--dir DIR]

It prints, per checkpoint, in ms, on a SQLite ledger: a seal pass signing one checkpoint of
three events without witnesses (the floor, measured in the same run), with one and with two
witnesses (each an ``effectledger.audit.witnessing.witness`` served over HTTP on 127.0.0.1 in this
process), and an idle pass with two witnesses (nothing to sign; the latest checkpoint is submitted
again). Then ``verify_bundle`` of the exported log with and without requiring both cosignatures.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from effectledger import Command, Context, DestinationRef
from effectledger.audit.bundles.export import export_log
from effectledger.audit.bundles.verify import verify_bundle
from effectledger.audit.keys.signers import Signer
from effectledger.audit.sealing.sealer import LogSealer
from effectledger.audit.witnessing.cosign import Cosigner
from effectledger.audit.witnessing.witness import Witness
from effectledger.audit.witnessing.witness_http import serve_witness
from effectledger.ledger import Ledger
from effectledger.store import Store, open_store

SIGNER = Signer("bench.example/log", bytes(range(32)))
CONTEXT = Context(tenant_id="acme", actor_id="bench")
DESTINATION = DestinationRef(account_id="acct", endpoint="https://receiver.invalid/v1")
COMMAND = Command(action="send", contract_version="v1", arguments={"body": "hello"})


def _events(ledger: Ledger, index: int) -> None:
    """One admitted and claimed operation: three events waiting to be sealed."""
    ledger.admit(
        CONTEXT,
        operation_id=f"op-{index}",
        revision="r1",
        command=COMMAND,
        destination=DESTINATION,
        admission_reference="approval/1",
    )
    ledger.claim(CONTEXT, f"op-{index}", attempt_id=f"a-{index}")


def _passes(store: Store, sealer: LogSealer, count: int, start: int) -> list[float]:
    ledger = Ledger(store)
    samples = []
    for index in range(start, start + count):
        _events(ledger, index)
        began = time.perf_counter()
        report = sealer.seal("acme")
        samples.append(time.perf_counter() - began)
        assert report.checkpoints == 1
    return samples


def _ms(samples: list[float]) -> str:
    return f"median {statistics.median(samples) * 1e3:6.2f} ms"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoints", type=int, default=100)
    parser.add_argument("--dir", type=Path)
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(dir=args.dir))
    servers = []
    try:
        store = open_store(f"sqlite:///{folder / 'ledger.db'}")
        endpoints = []
        for number in (1, 2):
            cosigner = Cosigner(f"bench.example/w{number}", bytes([number]) * 32)
            witness = Witness(folder / f"w{number}.db", cosigner, [SIGNER.verifier()])
            server = serve_witness(witness)
            servers.append(server)
            url = f"http://127.0.0.1:{server.server_address[1]}"
            endpoints.append(f"{url}={cosigner.verifier().key_string()}")
        n = args.checkpoints
        floor = _passes(store, LogSealer(store, SIGNER), n, 0)
        one = _passes(store, LogSealer(store, SIGNER, witnesses=endpoints[:1]), n, n)
        two = _passes(store, LogSealer(store, SIGNER, witnesses=endpoints), n, 2 * n)
        idle_sealer = LogSealer(store, SIGNER, witnesses=endpoints)
        idle = []
        for _ in range(n):
            began = time.perf_counter()
            idle_sealer.seal("acme")
            idle.append(time.perf_counter() - began)
        print(f"seal pass, one checkpoint of 3 events ({n} passes each, SQLite):")
        print(f"  no witness (floor)      {_ms(floor)}")
        print(f"  one witness             {_ms(one)}")
        print(f"  two witnesses           {_ms(two)}")
        print(f"  idle pass, two witnesses {_ms(idle)}")
        bundle = folder / "log.jsonl"
        export_log(store, "acme", bundle)
        keys = [entry.partition("=")[2] for entry in endpoints]
        for label, witness_keys in (("log key only", []), ("and both witness keys", keys)):
            took = []
            for _ in range(5):
                began = time.perf_counter()
                report = verify_bundle(bundle, [SIGNER.verifier()], witness_keys=witness_keys)
                took.append(time.perf_counter() - began)
                assert report.ok, report.findings
            print(f"verify_bundle, {report.checkpoints} checkpoints, {label}: {_ms(took)}")
        store.close()
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
