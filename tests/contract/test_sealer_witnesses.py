"""A sealer with witnesses: every checkpoint it signs is cosigned, and a lie is refused.

Each test runs a real witness (its own SQLite file, served over HTTP on loopback) beside a
ledger on both backends. Genuine work seals, is cosigned, exports and verifies with the witness
key; a witness that is down does not stall the log and is asked again on the next pass; a log
emptied and re-sealed, cut back, or rolled back and forked by a sealer that lies is refused by
the witness, and a reviewer holding only the witness key rejects the bundle, which verifies
without it.
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from effectledger import EffectLedger
from effectledger.audit.bundles.export import export_log, prove_events
from effectledger.audit.bundles.verify import verify_bundle
from effectledger.audit.sealing.sealer import LogSealer
from effectledger.audit.witnessing.cosign import Cosigner
from effectledger.audit.witnessing.reading import latest_checkpoint
from effectledger.audit.witnessing.submit import WitnessEndpoint
from effectledger.audit.witnessing.witness import Witness
from effectledger.audit.witnessing.witness_http import serve_witness
from effectledger.errors import AuditVerificationFailed, InvalidInput
from effectledger.workers import Worker, WorkerSettings
from tests.conftest import count_rows, raw_sql, run_sql
from tests.contract.test_sealer_memory import head, restore, unguard_log
from tests.races.forgery import admitted
from tests.races.world import build, close
from tests.support.evidence import NEW_SIGNER, SIGNER, VERIFIER_KEY
from tests.unit.test_witness import spec_verifies

W1 = Cosigner("witness.example/w1", bytes(range(64, 96)))
W2 = Cosigner("witness.example/w2", bytes(range(96, 128)))
ORIGIN = "effectledger/acme"


class Served:
    """A witness served on loopback; ``stop`` and ``start`` keep its file and its port."""

    def __init__(self, folder: Path, cosigner: Cosigner) -> None:
        self.folder = folder
        self.cosigner = cosigner
        self.port = 0
        self.server: ThreadingHTTPServer | None = None
        self.witness: Witness | None = None
        self.start()

    def start(self) -> None:
        """Serve the witness (again) on its file and port."""
        self.witness = Witness(
            self.folder / f"{self.cosigner.name.replace('/', '_')}.db",
            self.cosigner,
            [SIGNER.verifier()],
        )
        self.server = serve_witness(self.witness, port=self.port)
        self.port = int(self.server.server_address[1])

    def stop(self) -> None:
        """Stop serving: the witness is down."""
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
        if self.witness is not None:
            self.witness.close()

    @property
    def endpoint(self) -> WitnessEndpoint:
        """What a sealer is configured with."""
        return WitnessEndpoint.parse(f"http://127.0.0.1:{self.port}={self.key}")

    @property
    def key(self) -> str:
        """The witness's verifier key string."""
        return self.cosigner.verifier().key_string()

    def held(self) -> int | None:
        """The size of acme's log the witness holds, from its own file."""
        assert self.witness is not None
        latest = self.witness.latest(ORIGIN)
        return None if latest is None else latest[0]


@pytest.fixture
def service(store_url: str, tmp_path: Path) -> Iterator[EffectLedger]:
    """A refund service over a fresh ledger and receiver."""
    made = build(store_url, tmp_path)
    yield made
    close(made)


@pytest.fixture
def witnesses(tmp_path: Path) -> Iterator[list[Served]]:
    """Two witnesses, each with its own file, on loopback."""
    folder = tmp_path / "witnesses"
    folder.mkdir()
    served = [Served(folder, W1), Served(folder, W2)]
    yield served
    for one in served:
        one.stop()


def sealer(service: EffectLedger, witnesses: list[Served]) -> LogSealer:
    """The genuine sealer, submitting to ``witnesses`` (no memory: the witnesses guard it)."""
    return LogSealer(service.ledger.store, SIGNER, witnesses=[w.endpoint for w in witnesses])


def liar(service: EffectLedger) -> LogSealer:
    """A sealer that lies: the genuine key, no memory, and it asks no witness."""
    return LogSealer(service.ledger.store, SIGNER)


def bundle(service: EffectLedger, path: Path) -> Path:
    """A fresh export of acme's log."""
    export_log(service.ledger.store, "acme", path)
    return path


def codes(path: Path, keys: list[str], witnesses: int | None = None) -> list[str]:
    """The finding codes of verifying ``path`` with the log key and the witness ``keys``."""
    report = verify_bundle(path, [VERIFIER_KEY], witness_keys=keys, witnesses=witnesses)
    return [finding.code for finding in report.findings]


def test_genuine_work_is_cosigned_exported_and_verified_with_the_witness_keys(
    service: EffectLedger, witnesses: list[Served], store_url: str, tmp_path: Path
) -> None:
    """Each checkpoint is cosigned by both witnesses; bundle and receipt verify with N = 2."""
    admitted(service)
    first = sealer(service, witnesses).seal("acme")
    assert (first.checkpoints, first.cosigned, first.witnesses_unreachable) == (1, 2, ())
    admitted(service)
    assert sealer(service, witnesses).seal("acme").cosigned == 2
    assert count_rows(store_url, "checkpoint_cosignatures") == 4
    assert [w.held() for w in witnesses] == [6, 6]
    path = bundle(service, tmp_path / "log.jsonl")
    assert codes(path, [w.key for w in witnesses]) == []
    assert codes(path, [witnesses[0].key], witnesses=1) == []
    stored = raw_sql(store_url, "SELECT note FROM log_checkpoints WHERE seq = 2")[0][0]
    lines = raw_sql(store_url, "SELECT cosignature FROM checkpoint_cosignatures WHERE seq = 2")
    for (line,) in lines:  # the stored line is what the C2SP text alone accepts
        assert any(
            spec_verifies(str(stored), str(line), w.name, w.verifier().public_key) is not None
            for w in (W1, W2)
        )
    (event_id,) = raw_sql(store_url, "SELECT event_id FROM log_entries WHERE position = 4")[0]
    receipt = tmp_path / "receipt.jsonl"
    prove_events(service.ledger.store, "acme", [str(event_id)], receipt)
    assert codes(receipt, [w.key for w in witnesses]) == []
    assert codes(receipt, []) == []
    kept = latest_checkpoint(service.ledger.store, "acme")  # what `audit checkpoint` prints
    assert kept is not None
    assert kept.note.startswith(str(stored))
    assert all(W.verifier().cosigned(kept.note) is not None for W in (W1, W2))


def test_a_witness_that_is_down_never_stalls_the_log_and_is_asked_again(
    service: EffectLedger, witnesses: list[Served], store_url: str, tmp_path: Path
) -> None:
    """With a witness down the checkpoint is signed anyway; the next pass gets its cosignature."""
    admitted(service)
    sealer(service, witnesses).seal("acme")
    witnesses[1].stop()
    admitted(service)
    report = sealer(service, witnesses).seal("acme")
    assert (report.checkpoints, report.size, report.cosigned) == (1, 6, 1)
    assert report.witnesses_unreachable == (witnesses[1].endpoint.url,)
    assert count_rows(store_url, "checkpoint_cosignatures", "seq = 2") == 1
    early = bundle(service, tmp_path / "early.jsonl")
    assert codes(early, [w.key for w in witnesses]) == ["cosignature_missing"]
    assert codes(early, [w.key for w in witnesses], witnesses=1) == []
    witnesses[1].start()  # a restart on the same file and port
    again = sealer(service, witnesses).seal("acme")
    assert (again.checkpoints, again.cosigned, again.witnesses_unreachable) == (0, 1, ())
    assert count_rows(store_url, "checkpoint_cosignatures", "seq = 2") == 2
    assert witnesses[1].held() == 6
    assert codes(bundle(service, tmp_path / "later.jsonl"), [w.key for w in witnesses]) == []


def test_a_log_emptied_and_re_sealed_is_refused_and_a_reviewer_with_witness_keys_sees_it(
    service: EffectLedger, witnesses: list[Served], store_url: str, tmp_path: Path
) -> None:
    """Re-sealing an emptied log as checkpoint 1 is refused; only a witness key reveals it."""
    admitted(service)
    _, second = admitted(service)
    sealer(service, witnesses).seal("acme")
    unguard_log(store_url)
    for table in ("log_entries", "log_checkpoints", "log_heads"):
        raw_sql(store_url, f"DELETE FROM {table}")
    run_sql(  # the administrator re-queues only the second operation's events
        store_url,
        "INSERT INTO log_pending (tenant_id, event_id, recorded_us) SELECT tenant_id, event_id, "
        "recorded_us FROM audit_events WHERE operation_id = ? ORDER BY sequence",
        (second,),
    )
    with pytest.raises(AuditVerificationFailed, match="refused") as refused:
        sealer(service, witnesses).seal("acme")
    assert refused.value.details["reason"] == "witness_refused"
    assert count_rows(store_url, "log_checkpoints") == 1  # signed as checkpoint 1, then refused
    assert count_rows(store_url, "checkpoint_cosignatures", "size = 3") == 0
    assert [w.held() for w in witnesses] == [6, 6]
    admitted(service)
    with pytest.raises(AuditVerificationFailed, match="refused"):
        sealer(service, witnesses).seal("acme")  # every later pass stops before signing
    assert count_rows(store_url, "log_checkpoints") == 1
    forged = bundle(service, tmp_path / "forged.jsonl")
    assert codes(forged, []) == []  # a reviewer who kept nothing and holds no witness key
    assert codes(forged, [witnesses[0].key]) == ["cosignature_missing"]


def test_a_log_cut_back_is_refused_even_idle_and_its_continuation_is_rejected(
    service: EffectLedger, witnesses: list[Served], store_url: str, tmp_path: Path
) -> None:
    """A log cut back below what the witnesses hold stops the sealer; a liar's seal is exposed."""
    admitted(service)
    sealer(service, witnesses).seal("acme")
    earlier = head(store_url)
    for _ in range(2):
        admitted(service)
        sealer(service, witnesses).seal("acme")
    unguard_log(store_url)
    restore(store_url, earlier)  # cut back from 9 leaves to 3
    with pytest.raises(AuditVerificationFailed, match="rolled back") as refused:
        sealer(service, witnesses).seal("acme")  # nothing pending: still refused
    assert refused.value.details["reason"] == "witness_refused"
    admitted(service)
    assert liar(service).seal("acme").size == 6  # the log goes on from the cut
    with pytest.raises(AuditVerificationFailed, match="rolled back"):
        sealer(service, witnesses).seal("acme")
    assert count_rows(store_url, "checkpoint_cosignatures", "size = 6") == 2  # the genuine 6
    assert [w.held() for w in witnesses] == [9, 9]
    forged = bundle(service, tmp_path / "forged.jsonl")
    assert codes(forged, []) == []
    assert codes(forged, [w.key for w in witnesses]) == ["cosignature_missing"]


def test_a_log_rolled_back_and_forked_at_the_same_size_is_refused_and_rejected(
    service: EffectLedger, witnesses: list[Served], store_url: str, tmp_path: Path
) -> None:
    """Another history of the size the witnesses hold is refused; the fork's bundle rejected."""
    admitted(service)
    sealer(service, witnesses).seal("acme")
    earlier = head(store_url)
    admitted(service)
    sealer(service, witnesses).seal("acme")
    unguard_log(store_url)
    restore(store_url, earlier)
    raw_sql(store_url, "DELETE FROM log_pending")
    admitted(service)  # another operation where the second one was
    forked = liar(service).seal("acme")
    assert forked.size == 6
    with pytest.raises(AuditVerificationFailed, match="refused") as refused:
        sealer(service, witnesses).seal("acme")
    assert refused.value.details["reason"] == "witness_refused"
    assert count_rows(store_url, "checkpoint_cosignatures", "seq = 2") == 2  # the genuine ones
    forged = bundle(service, tmp_path / "forged.jsonl")
    assert codes(forged, []) == []
    assert codes(forged, [witnesses[1].key]) == ["cosignature_missing"]


class _Forger(BaseHTTPRequestHandler):
    """A hostile witness: answers every submission 200 with a line its key did not sign."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        raw = W1.verifier().key_id.to_bytes(4, "big") + bytes(8 + 64)
        body = f"\u2014 {W1.name} {base64.b64encode(raw).decode()}\n".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


def test_a_witness_answering_with_a_forged_line_is_refused_and_nothing_is_stored(
    service: EffectLedger, store_url: str
) -> None:
    """A 200 whose line the witness key did not sign is ``cosignature_invalid``; no row."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Forger)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        admitted(service)
        forged = LogSealer(
            service.ledger.store, SIGNER, witnesses=[f"{url}={W1.verifier().key_string()}"]
        )
        with pytest.raises(AuditVerificationFailed) as refused:
            forged.seal("acme")
        assert refused.value.details["reason"] == "cosignature_invalid"
    finally:
        server.shutdown()
        server.server_close()
    assert count_rows(store_url, "log_checkpoints") == 1
    assert count_rows(store_url, "checkpoint_cosignatures") == 0


def test_a_rotation_checkpoint_is_submitted_and_cosigned(
    service: EffectLedger, witnesses: list[Served], store_url: str
) -> None:
    """The co-signed rotation checkpoint goes to the witnesses like any other."""
    admitted(service)
    sealer(service, witnesses).seal("acme")
    rotated = sealer(service, witnesses).rotate_key("acme", NEW_SIGNER)
    assert rotated is not None
    assert count_rows(store_url, "checkpoint_cosignatures", f"seq = {rotated.seq}") == 2
    assert [w.held() for w in witnesses] == [3, 3]
    assert all(w.witness is not None and w.witness.latest(ORIGIN) for w in witnesses)
    assert [w.witness.latest(ORIGIN)[1] for w in witnesses if w.witness] == [rotated.note] * 2


def test_the_workers_sealing_pass_has_each_checkpoint_cosigned(
    service: EffectLedger,
    witnesses: list[Served],
    store_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker with ``seal_witnesses`` seals, and both witnesses cosign what it signs."""
    monkeypatch.setenv("EFFECTLEDGER_LOG_KEY", SIGNER.key_string())
    admitted(service)
    entries = tuple(f"{w.endpoint.url}={w.key}" for w in witnesses)
    worker = Worker(service, WorkerSettings(seal_witnesses=entries))
    assert worker.seal_pass() == 3
    assert count_rows(store_url, "checkpoint_cosignatures", "seq = 1") == 2
    assert [w.held() for w in witnesses] == [3, 3]
    with pytest.raises(InvalidInput):
        WorkerSettings(seal_witnesses=[entries[0]])  # type: ignore[arg-type]


def test_witness_settings_refuse_bad_input_before_anything_is_signed(
    service: EffectLedger, witnesses: list[Served], store_url: str
) -> None:
    """A malformed URL=KEY, a log key given as a witness key, or a repeated witness is refused."""
    admitted(service)
    url = f"http://127.0.0.1:{witnesses[0].port}"
    for bad in (
        [witnesses[0].key],
        [f"{url}={VERIFIER_KEY}"],
        [f"ftp://x={witnesses[0].key}"],
        [f"{url}={witnesses[0].key}", f"{url}/={witnesses[0].key}"],
    ):
        with pytest.raises(InvalidInput):
            LogSealer(service.ledger.store, SIGNER, witnesses=bad)
    assert count_rows(store_url, "log_checkpoints") == 0
    assert witnesses[0].held() is None
