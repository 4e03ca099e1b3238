"""The witness: C2SP tlog-witness answers, and cosignatures that a verifier from the spec accepts.

``spec_verifies`` below is written from the text of C2SP tlog-cosignature alone (it does not use
the project's cosign module): key ID ``SHA-256(name ‖ "\\n" ‖ 0x04 ‖ public key)[:4]``, a
signature of ``key ID ‖ u64 big-endian timestamp ‖ Ed25519 signature`` over ``"cosignature/v1\\n"
‖ "time " ‖ decimal timestamp ‖ "\\n" ‖`` the whole checkpoint note body.
"""

from __future__ import annotations

import base64
import hashlib
import struct
from pathlib import Path

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from effectledger.audit.keys.signers import Signer
from effectledger.audit.log.merkle import MerkleTree
from effectledger.audit.log.tlog import Checkpoint, sign_checkpoint
from effectledger.audit.witnessing.cosign import CosignatureVerifier, Cosigner
from effectledger.audit.witnessing.witness import SIZE_CONTENT_TYPE, Witness
from effectledger.errors import LogKeyInvalid

LOG = Signer("log.example/test", bytes(range(32)))
ROGUE = Signer("log.example/test", bytes(range(1, 33)))
ORIGIN = "effectledger/acme"
NOW = 1_767_225_600


def spec_verifies(note: str, line: str, name: str, public_key: bytes) -> int | None:
    """The timestamp if ``line`` is a valid Ed25519 cosignature/v1 of ``note`` by the key."""
    body = note[: note.rfind("\n\n") + 1]
    prefix = "\u2014 " + name + " "
    if not line.startswith(prefix):
        return None
    raw = base64.b64decode(line[len(prefix) :].strip())
    key_id = hashlib.sha256(name.encode() + b"\n" + b"\x04" + public_key).digest()[:4]
    if raw[:4] != key_id or len(raw) != 76:
        return None
    timestamp = struct.unpack(">Q", raw[4:12])[0]
    message = b"cosignature/v1\n" + b"time " + str(timestamp).encode() + b"\n" + body.encode()
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(raw[12:], message)
    except InvalidSignature:
        return None
    return int(timestamp)


def leaves(count: int, salt: bytes = b"") -> list[bytes]:
    """``count`` distinct leaf hashes."""
    return [hashlib.sha256(salt + i.to_bytes(4, "big")).digest() for i in range(count)]


def note(tree: MerkleTree, size: int, signer: Signer = LOG) -> str:
    """The log's signed checkpoint of the first ``size`` leaves of ``tree``."""
    return sign_checkpoint(Checkpoint(ORIGIN, size, tree.root_at(size)), [signer])


def request(old: int, proof: list[bytes], signed: str) -> bytes:
    """An add-checkpoint request body."""
    lines = "".join(base64.b64encode(node).decode() + "\n" for node in proof)
    return f"old {old}\n{lines}\n{signed}".encode()


@pytest.fixture
def witness(tmp_path: Path) -> Witness:
    """A witness trusting the test log key, with its own file."""
    return Witness(
        tmp_path / "witness.db",
        Cosigner("witness.example/w1", bytes(range(64, 96))),
        [LOG.verifier()],
        clock=lambda: NOW,
    )


def test_a_first_checkpoint_is_cosigned_as_the_spec_says(witness: Witness) -> None:
    """The cosignature of a first checkpoint verifies with a verifier written from the spec."""
    tree = MerkleTree(leaves(5))
    signed = note(tree, 5)
    answer = witness.add_checkpoint(request(0, [], signed))
    assert answer.status == 200
    line = answer.body.decode()
    public = witness.cosigner.verifier().public_key
    assert spec_verifies(signed, line, "witness.example/w1", public) == NOW
    assert spec_verifies(note(tree, 4), line, "witness.example/w1", public) is None
    assert witness.cosigner.verifier().cosigned(signed + line) == NOW
    assert witness.latest(ORIGIN) == (5, signed)


def test_an_extension_with_its_proof_is_cosigned_and_an_older_one_refused(
    witness: Witness,
) -> None:
    """The next checkpoint needs the proof from the size held; an older one is 409 with it."""
    tree = MerkleTree(leaves(12))
    assert witness.add_checkpoint(request(0, [], note(tree, 5))).status == 200
    grown = witness.add_checkpoint(request(5, tree.consistency_proof(5, 12), note(tree, 12)))
    assert grown.status == 200
    older = witness.add_checkpoint(request(5, tree.consistency_proof(5, 8), note(tree, 8)))
    assert (older.status, older.content_type, older.body) == (409, SIZE_CONTENT_TYPE, b"12\n")
    rolled_back = witness.add_checkpoint(request(0, [], note(tree, 3)))
    assert rolled_back.status == 409
    assert witness.latest(ORIGIN) is not None
    assert witness.latest(ORIGIN)[0] == 12  # type: ignore[index]


def test_a_fork_is_refused(witness: Witness) -> None:
    """Another tree at the size held is 409; another tree past it fails its proof (422)."""
    tree = MerkleTree(leaves(8))
    fork = MerkleTree(leaves(4) + leaves(6, b"fork"))
    assert witness.add_checkpoint(request(0, [], note(tree, 8))).status == 200
    assert witness.add_checkpoint(request(8, [], note(fork, 8))).status == 409
    bad_proof = witness.add_checkpoint(request(8, fork.consistency_proof(8, 10), note(fork, 10)))
    assert bad_proof.status == 422
    assert witness.latest(ORIGIN)[0] == 8  # type: ignore[index]


def test_requests_it_must_not_cosign_get_the_spec_codes(witness: Witness) -> None:
    """Unknown origin 404, an untrusted log key 403, malformed or old > new 400."""
    tree = MerkleTree(leaves(4))
    other = sign_checkpoint(Checkpoint("elsewhere/log", 4, tree.root()), [LOG])
    assert witness.add_checkpoint(request(0, [], other)).status == 404
    assert witness.add_checkpoint(request(0, [], note(tree, 4, ROGUE))).status == 403
    assert witness.add_checkpoint(b"old 01\n\n" + note(tree, 4).encode()).status == 400
    assert witness.add_checkpoint(b"garbage").status == 400
    assert witness.add_checkpoint(request(9, [], note(tree, 4))).status == 400
    assert witness.latest(ORIGIN) is None


def test_the_witness_remembers_across_a_restart(tmp_path: Path, witness: Witness) -> None:
    """A new witness on the same file still refuses what is older than it cosigned."""
    tree = MerkleTree(leaves(6))
    assert witness.add_checkpoint(request(0, [], note(tree, 6))).status == 200
    witness.close()
    again = Witness(tmp_path / "witness.db", witness.cosigner, [LOG.verifier()])
    assert again.add_checkpoint(request(0, [], note(tree, 4))).status == 409


def test_witness_key_strings_read_back_and_refuse_log_keys() -> None:
    """Witness keys use signature type 0x04; a log key string is not a witness key."""
    cosigner = Cosigner.generate("witness.example/w2")
    again = Cosigner.from_key_string(cosigner.key_string())
    assert again.verifier().key_string() == cosigner.verifier().key_string()
    parsed = CosignatureVerifier.from_key_string(cosigner.verifier().key_string())
    assert parsed.key_id == cosigner.verifier().key_id
    with pytest.raises(LogKeyInvalid):
        CosignatureVerifier.from_key_string(LOG.verifier().key_string())


def test_sixteen_threads_submitting_one_extension_get_one_cosignature(witness: Witness) -> None:
    """Sixteen racing submissions of the same next checkpoint: one 200, fifteen 409, size once."""
    import threading

    tree = MerkleTree(leaves(20))
    assert witness.add_checkpoint(request(0, [], note(tree, 10))).status == 200
    body = request(10, tree.consistency_proof(10, 20), note(tree, 20))
    start = threading.Barrier(16)
    statuses: list[int] = []

    def submit() -> None:
        start.wait()
        statuses.append(witness.add_checkpoint(body).status)
        witness.close()

    threads = [threading.Thread(target=submit) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses) == [200] + [409] * 15
    assert witness.latest(ORIGIN)[0] == 20  # type: ignore[index]
