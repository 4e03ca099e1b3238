"""Cosignatures in bundles: extra signature lines a reviewer with witness keys requires.

A witness's cosignature line is appended to the checkpoint's signed note. The log signature
check is unchanged (the line is a signature by a key the log verifier does not know), the line
verifies with the verifier written from the C2SP text alone (``spec_verifies``), and
``verify_bundle(..., witness_keys=..., witnesses=N)`` names a missing or changed one.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from effectledger.audit.bundles.format import checkpoint_line, header_line
from effectledger.audit.bundles.verify import verify_bundle
from effectledger.audit.log.merkle import EMPTY_ROOT
from effectledger.audit.log.note import open_note
from effectledger.audit.log.tlog import Checkpoint, sign_checkpoint
from effectledger.audit.witnessing.cosign import Cosigner
from effectledger.audit.witnessing.witness import Witness
from effectledger.cli import main
from effectledger.errors import InvalidInput
from tests.support.evidence import SIGNER, VERIFIER_KEY
from tests.unit.test_witness import NOW, request, spec_verifies

W1 = Cosigner("witness.example/w1", bytes(range(64, 96)))
W2 = Cosigner("witness.example/w2", bytes(range(96, 128)))
K1, K2 = W1.verifier().key_string(), W2.verifier().key_string()


def cosigned(tmp_path: Path, *cosigners: Cosigner) -> tuple[str, str]:
    """acme's first (empty) checkpoint and the same note with each witness's cosignature."""
    signed = sign_checkpoint(Checkpoint("effectledger/acme", 0, EMPTY_ROOT), [SIGNER])
    lines = ""
    for cosigner in cosigners:
        witness = Witness(
            tmp_path / f"{cosigner.name.replace('/', '_')}.db",
            cosigner,
            [SIGNER.verifier()],
            clock=lambda: NOW,
        )
        answer = witness.add_checkpoint(request(0, [], signed))
        witness.close()
        assert answer.status == 200
        lines += answer.body.decode()
    return signed, signed + lines


def bundle(note: str) -> bytes:
    """A log bundle of acme holding only the checkpoint ``note``."""
    return header_line("acme") + checkpoint_line(1, note)


def codes(source: bytes, keys: list[str], witnesses: int | None = None) -> list[str]:
    """The finding codes of verifying ``source`` with the log key and the witness ``keys``."""
    report = verify_bundle(source, [VERIFIER_KEY], witness_keys=keys, witnesses=witnesses)
    return [finding.code for finding in report.findings]


def test_cosignature_lines_leave_the_log_signature_alone_and_verify_from_the_spec(
    tmp_path: Path,
) -> None:
    """The log key opens the cosigned note as before; each line passes the spec's verifier."""
    plain, note = cosigned(tmp_path, W1, W2)
    opened = open_note(note, [SIGNER.verifier()])
    assert opened.text == open_note(plain, [SIGNER.verifier()]).text
    assert [s.name for s in opened.signatures] == [SIGNER.name]
    assert {s.name for s in opened.unverified_signatures} == {W1.name, W2.name}
    assert note.startswith(plain)  # the log's signature line is byte for byte the one it signed
    extra = note[len(plain) :].splitlines()
    for line, cosigner in zip(extra, (W1, W2), strict=True):
        assert spec_verifies(note, line, cosigner.name, cosigner.verifier().public_key) == NOW
    assert codes(bundle(note), [K1, K2]) == []
    assert codes(bundle(note), []) == []
    assert codes(bundle(plain), []) == []  # a bundle from before witnesses verifies as it did


def test_a_missing_or_changed_cosignature_is_named(tmp_path: Path) -> None:
    """Too few cosignatures is ``cosignature_missing``; a changed line ``cosignature_invalid``."""
    plain, note = cosigned(tmp_path, W1)
    assert codes(bundle(plain), [K1]) == ["cosignature_missing"]
    assert codes(bundle(note), [K1, K2]) == ["cosignature_missing"]
    assert codes(bundle(note), [K1, K2], witnesses=1) == []
    assert codes(bundle(note), [K2], witnesses=1) == ["cosignature_missing"]
    line = note[len(plain) :]
    name, encoded = line.rstrip("\n").split(" ")[1:]
    raw = bytearray(base64.b64decode(encoded))
    raw[-1] ^= 1
    changed = plain + f"\u2014 {name} {base64.b64encode(bytes(raw)).decode()}\n"
    assert codes(bundle(changed), [K1]) == ["cosignature_invalid", "cosignature_missing"]
    assert codes(bundle(changed), []) == []  # the log signature still verifies


def test_witness_arguments_are_checked_before_anything_is_read(tmp_path: Path) -> None:
    """More witnesses than distinct keys, N below 1, or a log key as a witness key is refused."""
    _, note = cosigned(tmp_path, W1)
    for keys, witnesses in (([K1, K1], 2), ([K1], 0), ([VERIFIER_KEY], None), ([], 1)):
        with pytest.raises(InvalidInput):
            verify_bundle(bundle(note), [VERIFIER_KEY], witness_keys=keys, witnesses=witnesses)
    path = tmp_path / "bundle.jsonl"
    path.write_bytes(bundle(note))
    verify = ["audit", "verify", "--bundle", str(path), "--key", VERIFIER_KEY]
    assert main([*verify, "--witnesses", "1"]) == 1
    assert main([*verify, "--witness-key", K1, "--witnesses", "2"]) == 1
    assert main([*verify, "--witness-key", K1]) == 0
    assert main([*verify, "--witness-key", K2]) == 1


def test_explain_from_a_bundle_verifies_its_cosignatures_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``explain --bundle --witness-key`` refuses a bundle its witness did not cosign."""
    _, note = cosigned(tmp_path, W1)
    path = tmp_path / "bundle.jsonl"
    path.write_bytes(bundle(note))
    explain = ["audit", "explain", "--bundle", str(path), "--key", VERIFIER_KEY, "op-1"]
    assert main([*explain, "--witness-key", K2]) == 1
    assert "cosignature_missing" in capsys.readouterr().err
    assert main([*explain, "--witness-key", K1]) == 1  # verified; the bundle has no such event
    assert "not_found" in capsys.readouterr().err
    assert main(["audit", "explain", "--db", "sqlite:///x.db", "--tenant", "acme",
                 "--witness-key", K1, "op-1"]) == 1  # fmt: skip
    assert "invalid_input" in capsys.readouterr().err
