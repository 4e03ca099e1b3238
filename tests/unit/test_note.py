"""Tests for C2SP signers, signed notes and checkpoints (audit.signers, audit.note, audit.tlog).

Known-answer vectors are the PeterNeumann / EnochRoot keys and signatures of Go's
golang.org/x/mod/sumdb/note (note.go, note_test.go), and real checkpoints published by the Go
checksum database, verified with its well-known public key. Ed25519 is deterministic, so our
signatures must match Go's byte for byte.
"""

from __future__ import annotations

import base64
import hashlib
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from effectledger.audit.keys.signers import Signer, Verifier, generate_signer, key_id
from effectledger.audit.log.merkle import MerkleTree, leaf_hash
from effectledger.audit.log.note import MAX_SIGNATURES, Note, Signature, open_note, sign_note
from effectledger.audit.log.proofs import verify_inclusion
from effectledger.audit.log.tlog import Checkpoint, open_checkpoint, sign_checkpoint
from effectledger.errors import EffectLedgerError, NoteError

EM = "\u2014"  # EM DASH, the signature line prefix

PETER_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
PETER_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
ENOCH_VKEY = "EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop"
TEXT = (
    "If you think cryptography is the answer to your problem,\n"
    "then you don't know what your problem is.\n"
)
PETER_B64 = (
    "x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM="
)
ENOCH_B64 = (
    "rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWLox33WWd1RvMc+QQ="
)
PETER_SIG = f"{EM} PeterNeumann {PETER_B64}\n"
ENOCH_SIG = f"{EM} EnochRoot {ENOCH_B64}\n"

# The Go checksum database key (its base64 contains '+') and checkpoints it published.
SUMDB_VKEY = "sum.golang.org+033de0ae+Ac4zctda0e5eza+HJyk9SxEdh+s3Ux18htTTAD8OuAn8"
SUMDB_CHECKPOINTS = [
    (
        15368405,
        "go.sum database tree\n15368405\n/g9am3I6YWNKaZX/jkne1fqd9zEyjss+JXyPXG0WfkY=\n\n"
        f"{EM} sum.golang.org Az3grqJGUaSGukG9p8nI2vKgiFn7qGHxn0W+mrwyI6Gz3F0t1J3LzmWk/p96Ybf2"
        "95EjwdSwlzgijq5WA9d1Ded7owM=\n",
    ),
    (
        63096908,
        "go.sum database tree\n63096908\n8lHrQPRYe4KT4WQ9/Qk8/taKnD6IRHbFgfN7vQE2Y54=\n\n"
        f"{EM} sum.golang.org Az3gri/oVBN1jAhNZ/iS+W31psFAWRT20/GyrhpU6taFwulQGetBkH5S7wpGXdS"
        "935jiIGiUUAXBVHzT/P6fYhqAmAk=\n",
    ),
    (
        63512409,
        "go.sum database tree\n63512409\nF7eHRPqN/cqPtqti14NKdGGaI1Giw8coWP3KxihFZbg=\n\n"
        f"{EM} sum.golang.org Az3gri1OBHKT87Xj8UXU8zjoHGy/X+7Nl94f8TZkELVaasolmGApUsWqwVG9vE6h"
        "gqYb/ph/w2vdkLIVRH7bMB/FPQ4=\n",
    ),
]


def sig_of(name: str, b64: str) -> Signature:
    """Build the Signature value a signature line decodes to."""
    raw = base64.b64decode(b64)
    return Signature(name, int.from_bytes(raw[:4], "big"), raw[4:])


PETER = sig_of("PeterNeumann", PETER_B64)
ENOCH = sig_of("EnochRoot", ENOCH_B64)


@pytest.fixture
def peter() -> Verifier:
    """The PeterNeumann verifier from note_test.go."""
    return Verifier.from_key_string(PETER_VKEY)


@pytest.fixture
def enoch() -> Verifier:
    """The EnochRoot verifier from note_test.go."""
    return Verifier.from_key_string(ENOCH_VKEY)


# --- Keys ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("vkey", [PETER_VKEY, ENOCH_VKEY, SUMDB_VKEY])
def test_verifier_key_strings_round_trip(vkey: str) -> None:
    """Known verifier keys parse and re-encode to exactly the same string."""
    verifier = Verifier.from_key_string(vkey)
    assert verifier.key_string() == vkey
    assert vkey.startswith(f"{verifier.name}+{verifier.key_id:08x}+")


def test_signer_key_derives_the_known_verifier() -> None:
    """The Go signer key yields the Go verifier key, key ID c74f20a3, and re-encodes unchanged."""
    signer = Signer.from_key_string(PETER_SKEY)
    assert signer.name == "PeterNeumann"
    assert signer.key_id == 0xC74F20A3
    assert signer.key_string() == PETER_SKEY
    assert signer.verifier().key_string() == PETER_VKEY
    assert signer.verifier() == Verifier.from_key_string(PETER_VKEY)


def test_key_id_is_truncated_sha256_of_name_newline_alg_and_key() -> None:
    """key_id is the big-endian first 4 bytes of SHA-256(name || 0x0A || 0x01 || public key)."""
    public = Verifier.from_key_string(PETER_VKEY).public_key
    digest = hashlib.sha256(b"PeterNeumann\n\x01" + public).digest()
    assert key_id("PeterNeumann", public) == int.from_bytes(digest[:4], "big") == 0xC74F20A3


@pytest.mark.parametrize(("key", "parse"), [(PETER_VKEY, "verifier"), (PETER_SKEY, "signer")])
def test_mangled_key_strings_are_rejected(key: str, parse: str) -> None:
    """Every proper substring and every single-character bump of a key string fails to parse."""
    parser = Verifier.from_key_string if parse == "verifier" else Signer.from_key_string
    variants = {key[i:j] for i in range(len(key) + 1) for j in range(i + 1, len(key) + 1)}
    variants |= {key[:i] + chr(ord(key[i]) + 1) + key[i + 1 :] for i in range(len(key))}
    variants.discard(key)
    for variant in variants:
        with pytest.raises(NoteError) as caught:
            parser(variant)
        assert caught.value.reason == "key_invalid", variant


@pytest.mark.parametrize(
    "vkey",
    [
        # From note_test.go: wrong key length and unknown algorithm, each with an adjusted ID.
        "PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY==",
        "PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
        # Uppercase key ID and non-canonical base64 are refused (stricter than Go).
        "PeterNeumann+C74F20A3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
        "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW\n",
        "",
    ],
)
def test_special_bad_verifier_keys_are_rejected(vkey: str) -> None:
    """Keys with a wrong length, unknown algorithm or non-canonical encoding are refused."""
    with pytest.raises(NoteError) as caught:
        Verifier.from_key_string(vkey)
    assert caught.value.reason == "key_invalid"


@pytest.mark.parametrize(
    "name", ["", "a b", "a+b", "tab\there", "nl\n", "nbsp\u00a0", "ideographic\u3000", "nul\x00"]
)
def test_invalid_key_names_are_rejected(name: str) -> None:
    """Key names must be non-empty and free of Unicode spaces, '+' and control characters."""
    with pytest.raises(NoteError) as caught:
        generate_signer(name)
    assert caught.value.reason == "key_invalid"


def test_generated_signer_round_trips_and_hides_its_seed() -> None:
    """A fresh signer's key strings round-trip and its repr shows no private material."""
    signer = generate_signer("log.example/audit")
    assert Signer.from_key_string(signer.key_string()).verifier() == signer.verifier()
    assert Verifier.from_key_string(signer.verifier().key_string()) == signer.verifier()
    secret = signer.key_string().split("+", 4)[4]  # the base64 seed may itself contain "+"
    assert secret not in repr(signer)
    assert signer.key_string().startswith("PRIVATE+KEY+log.example/audit+")
    assert generate_signer("log.example/audit").key_id != signer.key_id


# --- Signing and opening notes (golang.org/x/mod/sumdb/note vectors) ----------------------------


def test_sign_matches_go_byte_for_byte() -> None:
    """Signing the Go example text with the Go key reproduces the Go signed note exactly."""
    signed = sign_note(TEXT, [Signer.from_key_string(PETER_SKEY)])
    assert signed == TEXT + "\n" + PETER_SIG


@pytest.mark.parametrize("text", ["abc", "", "abc\n\x01\n", "carriage\r\n", "lone \ud800\n"])
def test_sign_rejects_malformed_text(text: str) -> None:
    """Text without a final newline, or with control characters or invalid UTF-8, is refused."""
    with pytest.raises(NoteError) as caught:
        sign_note(text, [Signer.from_key_string(PETER_SKEY)])
    assert caught.value.reason == "note_malformed"


def test_sign_requires_a_signer_and_emits_each_key_once() -> None:
    """Signing needs at least one signer; a key listed twice produces one signature line."""
    signer = Signer.from_key_string(PETER_SKEY)
    with pytest.raises(NoteError) as caught:
        sign_note(TEXT, [])
    assert caught.value.reason == "note_malformed"
    assert sign_note(TEXT, [signer, signer]) == TEXT + "\n" + PETER_SIG


def test_open_reports_verified_and_unknown_signatures(peter: Verifier, enoch: Verifier) -> None:
    """With only Peter trusted, Peter's signature verifies and Enoch's is reported unverified."""
    note = open_note(TEXT + "\n" + PETER_SIG + ENOCH_SIG, [peter])
    assert note == Note(TEXT, (PETER,), (ENOCH,))
    both = open_note(TEXT + "\n" + PETER_SIG + ENOCH_SIG, [peter, enoch])
    assert both == Note(TEXT, (PETER, ENOCH), ())
    assert PETER.line() == PETER_SIG


def test_open_without_trusted_signature_is_unverified(peter: Verifier) -> None:
    """A note signed by no trusted key fails with note_unverified and carries the parsed note."""
    with pytest.raises(NoteError) as caught:
        open_note(TEXT + "\n" + PETER_SIG + ENOCH_SIG, [])
    assert caught.value.reason == "note_unverified"
    assert caught.value.note == Note(TEXT, (), (PETER, ENOCH))
    assert caught.value.details["signed_by"] == ["PeterNeumann+c74f20a3", "EnochRoot+af0cfe78"]
    with pytest.raises(NoteError, match="no signature by a trusted key"):
        open_note(TEXT + "\n" + ENOCH_SIG, [peter])


def test_open_rejects_a_bad_signature_by_a_trusted_key(peter: Verifier) -> None:
    """A corrupted signature whose name and key ID match a trusted key rejects the whole note."""
    corrupted = f"{EM} PeterNeumann {PETER_B64[:43]}ABCD{PETER_B64[43:]}\n"
    with pytest.raises(NoteError, match="invalid signature for key PeterNeumann") as caught:
        open_note(TEXT + "\n" + corrupted, [peter])
    assert caught.value.reason == "note_bad_signature"
    # Also when a valid signature by the same key comes first: every trusted signature counts.
    with pytest.raises(NoteError) as caught:
        open_note(TEXT + "\n" + PETER_SIG + corrupted, [peter])
    assert caught.value.reason == "note_bad_signature"


def test_open_drops_duplicate_signatures(peter: Verifier) -> None:
    """Repeated identical lines are reported once; distinct unknown signatures are all kept."""
    enoch_abcd = f"{EM} EnochRoot {ENOCH_B64[:46]}ABCD{ENOCH_B64[46:]}\n"
    note = open_note(
        TEXT + "\n" + PETER_SIG + PETER_SIG + ENOCH_SIG + ENOCH_SIG + enoch_abcd, [peter]
    )
    assert note.signatures == (PETER,)
    assert note.unverified_signatures == (ENOCH, sig_of("EnochRoot", enoch_abcd.split()[2]))


def test_open_handles_repeated_and_ambiguous_verifiers(peter: Verifier, enoch: Verifier) -> None:
    """The same key listed twice is harmless; two keys sharing one name and ID are refused."""
    assert open_note(TEXT + "\n" + ENOCH_SIG, [enoch, peter, enoch]).signatures == (ENOCH,)
    impostor = generate_signer("EnochRoot").verifier()
    impostor._key_id = enoch.key_id  # simulate a 32-bit key ID collision
    with pytest.raises(NoteError, match="ambiguous") as caught:
        open_note(TEXT + "\n" + ENOCH_SIG, [enoch, impostor])
    assert caught.value.reason == "key_invalid"
    assert open_note(TEXT + "\n" + PETER_SIG, [enoch, impostor, peter]).signatures == (PETER,)


def test_open_limits_the_number_of_signatures(peter: Verifier) -> None:
    """Up to MAX_SIGNATURES lines are accepted; one more makes the note malformed."""
    assert open_note(TEXT + "\n" + PETER_SIG * MAX_SIGNATURES, [peter]).signatures == (PETER,)
    for verifiers in ([peter], []):
        with pytest.raises(NoteError) as caught:
            open_note(TEXT + "\n" + PETER_SIG * (MAX_SIGNATURES + 1), verifiers)
        assert caught.value.reason == "note_malformed"


@pytest.mark.parametrize(
    "message",
    [
        TEXT,
        TEXT + "\n",
        TEXT + "\n" + PETER_SIG[:-1],
        "\x01" + TEXT + "\n" + PETER_SIG,
        TEXT + "\n" + f"{EM} Bad Name {PETER_B64}\n",
        TEXT + "\n" + PETER_SIG + "Unexpected line.\n",
        TEXT + "\n" + f"- PeterNeumann {PETER_B64}\n",
        TEXT + "\n" + f"{EM}PeterNeumann {PETER_B64}\n",
        TEXT + "\n" + f"{EM} PeterNeumann\n",
        TEXT + "\n" + f"{EM} PeterNeumann {PETER_B64.rstrip('=')}\n",
        TEXT + "\n" + f"{EM} PeterNeumann AAAA\n",
        TEXT + "\n" + f"{EM} Peter+Neumann {PETER_B64}\n",
        TEXT.replace("\n", "\r\n") + "\n" + PETER_SIG,
    ],
)
def test_open_rejects_malformed_notes(message: str, peter: Verifier) -> None:
    """Notes violating the signed-note syntax fail with note_malformed before any trust check."""
    with pytest.raises(NoteError) as caught:
        open_note(message, [peter])
    assert caught.value.reason == "note_malformed"


def test_open_accepts_utf8_bytes_and_rejects_invalid_utf8(peter: Verifier) -> None:
    """A note may be given as UTF-8 bytes; bytes that are not UTF-8 are malformed."""
    encoded = (TEXT + "\n" + PETER_SIG).encode()
    assert open_note(encoded, [peter]).signatures == (PETER,)
    with pytest.raises(NoteError) as caught:
        open_note(b"\xff" + encoded, [peter])
    assert caught.value.reason == "note_malformed"


def test_modified_text_fails_verification(peter: Verifier) -> None:
    """Changing one character of a signed text invalidates the trusted signature."""
    with pytest.raises(NoteError) as caught:
        open_note(TEXT.replace("problem,", "problem;") + "\n" + PETER_SIG, [peter])
    assert caught.value.reason == "note_bad_signature"


def test_text_may_contain_empty_lines() -> None:
    """Per the spec the text may hold empty lines; the last empty line separates signatures."""
    signer = generate_signer("example.com/notes")
    for text in ("a\n\nb\n", "\n", "a\n\n", "\n\nlast\n"):
        assert open_note(sign_note(text, [signer]), [signer.verifier()]).text == text


note_texts = st.lists(
    st.text(st.characters(exclude_categories=("Cc", "Cs")), max_size=20), min_size=1, max_size=6
).map(lambda lines: "".join(f"{line}\n" for line in lines))


@given(text=note_texts)
def test_any_valid_text_round_trips(text: str) -> None:
    """Any text of newline-terminated lines without control characters signs and opens intact."""
    signer = Signer.from_key_string(PETER_SKEY)
    opened = open_note(sign_note(text, [signer]), [signer.verifier()])
    assert opened.text == text
    assert opened.signatures[0].name == "PeterNeumann"


def test_note_error_survives_pickling() -> None:
    """NoteError keeps its code, reason, message, details and attached note across pickling."""
    error = NoteError("nope", reason="note_unverified", note=Note("x\n", ()), signed_by=["a+01"])
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.code, copy.reason, str(copy), copy.note) == (
        "note_invalid",
        "note_unverified",
        "nope",
        Note("x\n", ()),
    )
    assert copy.details == {"reason": "note_unverified", "signed_by": ["a+01"]}
    assert isinstance(copy, ValueError)
    assert isinstance(copy, EffectLedgerError)


# --- Checkpoints --------------------------------------------------------------------------------

ROOT = hashlib.sha256(b"root").digest()


@pytest.mark.parametrize(("size", "note"), SUMDB_CHECKPOINTS)
def test_real_sum_golang_org_checkpoints_verify(size: int, note: str) -> None:
    """Checkpoints published by the Go checksum database verify with its public key."""
    verifier = Verifier.from_key_string(SUMDB_VKEY)
    checkpoint, signatures = open_checkpoint(note, [verifier], origin="go.sum database tree")
    assert checkpoint.size == size
    assert checkpoint.to_text() == note[: note.index("\n\n") + 1]
    assert [s.key_id for s in signatures] == [0x033DE0AE]
    forged = note.replace(f"\n{size}\n", f"\n{size + 1}\n")
    with pytest.raises(NoteError) as caught:
        open_checkpoint(forged, [verifier])
    assert caught.value.reason == "note_bad_signature"


def test_checkpoint_text_format() -> None:
    """A checkpoint body is origin, decimal size and base64 root, then extension lines."""
    checkpoint = Checkpoint("example.com/log", 20852163, ROOT, ("ext one", "ext two"))
    root64 = base64.b64encode(ROOT).decode()
    assert checkpoint.to_text() == f"example.com/log\n20852163\n{root64}\next one\next two\n"
    assert Checkpoint.parse(checkpoint.to_text()) == checkpoint
    assert Checkpoint("o", 0, ROOT).to_text() == f"o\n0\n{root64}\n"


@given(
    origin=st.text(st.characters(exclude_categories=("Cc", "Cs")), min_size=1, max_size=30),
    size=st.integers(min_value=0, max_value=2**64 - 1),
    root=st.binary(min_size=32, max_size=32),
    extensions=st.lists(
        st.text(st.characters(exclude_categories=("Cc", "Cs")), min_size=1, max_size=10),
        max_size=3,
    ),
)
def test_checkpoint_round_trips(origin: str, size: int, root: bytes, extensions: list[str]) -> None:
    """Any valid checkpoint survives to_text and parse unchanged."""
    checkpoint = Checkpoint(origin, size, root, tuple(extensions))
    assert Checkpoint.parse(checkpoint.to_text()) == checkpoint


ROOT64 = base64.b64encode(ROOT).decode()


@pytest.mark.parametrize(
    "text",
    [
        f"log\n01\n{ROOT64}\n",
        f"log\n+1\n{ROOT64}\n",
        f"log\n 1\n{ROOT64}\n",
        f"log\n1_000\n{ROOT64}\n",
        f"log\n\u0661\n{ROOT64}\n",
        f"log\n-0\n{ROOT64}\n",
        f"log\n{2**64}\n{ROOT64}\n",
        f"log\n{'9' * 5000}\n{ROOT64}\n",
        f"log\n1\n{base64.b64encode(ROOT[:31]).decode()}\n",
        f"log\n1\n{ROOT64.rstrip('=')}\n",
        f"log\n1\n{ROOT.hex()}\n",
        f"log\n1\n{ROOT64}",
        f"log\n1\n{ROOT64}\n\n",
        f"log\n1\n{ROOT64}\n\nextension\n",
        f"\n1\n{ROOT64}\n",
        "log\n1\n",
        f"log\r\n1\n{ROOT64}\n",
    ],
)
def test_checkpoint_parse_is_strict(text: str) -> None:
    """Leading zeros, signs, non-ASCII digits, oversized sizes and bad roots are rejected."""
    with pytest.raises(NoteError) as caught:
        Checkpoint.parse(text)
    assert caught.value.reason == "checkpoint_malformed"


@pytest.mark.parametrize(
    ("origin", "size", "root", "extensions"),
    [
        ("", 1, ROOT, ()),
        ("two\nlines", 1, ROOT, ()),
        ("log", -1, ROOT, ()),
        ("log", 2**64, ROOT, ()),
        ("log", True, ROOT, ()),
        ("log", 1, ROOT[:31], ()),
        ("log", 1, ROOT, ("",)),
        ("log", 1, ROOT, ("bad\x07bell",)),
        ("log", 1, ROOT, "not-a-sequence-of-lines"),
    ],
)
def test_checkpoint_construction_validates_fields(
    origin: str, size: int, root: bytes, extensions: tuple[str, ...]
) -> None:
    """A Checkpoint cannot be built with a field that would not serialise to a valid body."""
    with pytest.raises(NoteError) as caught:
        Checkpoint(origin, size, root, extensions)
    assert caught.value.reason == "checkpoint_malformed"


def test_signed_checkpoint_commits_to_a_merkle_tree() -> None:
    """A signed checkpoint of a Merkle tree lets a reviewer check an inclusion proof offline."""
    leaves = [leaf_hash(b"event-%d" % i) for i in range(11)]
    tree = MerkleTree(leaves)
    signer = generate_signer("effectledger.example/audit")
    note = sign_checkpoint(
        Checkpoint("effectledger.example/audit", tree.size, tree.root()), [signer]
    )
    checkpoint, signatures = open_checkpoint(note, [signer.verifier()])
    assert [s.name for s in signatures] == ["effectledger.example/audit"]
    verify_inclusion(leaves[7], 7, checkpoint.size, tree.inclusion_proof(7), checkpoint.root_hash)


def test_open_checkpoint_checks_the_expected_origin() -> None:
    """A checkpoint for another origin is refused when the caller names the expected origin."""
    signer = generate_signer("a.example/log")
    note = sign_checkpoint(Checkpoint("a.example/log", 3, ROOT), [signer])
    assert open_checkpoint(note, [signer.verifier()], origin="a.example/log")[0].size == 3
    with pytest.raises(NoteError) as caught:
        open_checkpoint(note, [signer.verifier()], origin="b.example/log")
    assert caught.value.reason == "checkpoint_origin_mismatch"


def test_open_checkpoint_rejects_a_signed_non_checkpoint(peter: Verifier) -> None:
    """A validly signed note whose text is not a checkpoint is checkpoint_malformed."""
    with pytest.raises(NoteError) as caught:
        open_checkpoint(TEXT + "\n" + PETER_SIG, [peter])
    assert caught.value.reason == "checkpoint_malformed"


# --- Key rotation -------------------------------------------------------------------------------

LOG = "effectledger.example/audit"


def test_rotation_co_signed_checkpoint_verifies_with_either_key() -> None:
    """During rotation a checkpoint signed by old and new key opens with either or both trusted."""
    old, new = generate_signer(LOG), generate_signer(LOG)
    note = sign_checkpoint(Checkpoint(LOG, 42, ROOT), [old, new])
    for trusted, expected in (
        ([old.verifier()], [old.key_id]),
        ([new.verifier()], [new.key_id]),
        ([old.verifier(), new.verifier()], [old.key_id, new.key_id]),
    ):
        checkpoint, signatures = open_checkpoint(note, trusted)
        assert checkpoint == Checkpoint(LOG, 42, ROOT)
        assert [s.key_id for s in signatures] == expected


def test_checkpoint_signed_only_by_a_rotated_out_key_is_unverified() -> None:
    """After rotation, a checkpoint signed only by the retired key is note_unverified."""
    old, new = generate_signer(LOG), generate_signer(LOG)
    note = sign_checkpoint(Checkpoint(LOG, 42, ROOT), [old])
    with pytest.raises(NoteError) as caught:
        open_checkpoint(note, [new.verifier()])
    assert caught.value.reason == "note_unverified"
    assert caught.value.note is not None
    assert [s.key_id for s in caught.value.note.unverified_signatures] == [old.key_id]


def test_resigning_under_the_same_name_with_another_key_is_unverified() -> None:
    """A note re-signed by a different key using the trusted name has another key ID: ignored."""
    trusted, attacker = generate_signer(LOG), generate_signer(LOG)
    genuine = sign_checkpoint(Checkpoint(LOG, 42, ROOT), [trusted])
    text = genuine[: genuine.index("\n\n") + 1]
    forged = sign_note(text.replace("\n42\n", "\n43\n"), [attacker])
    with pytest.raises(NoteError) as caught:
        open_checkpoint(forged, [trusted.verifier()])
    assert caught.value.reason == "note_unverified"


def test_forged_key_id_under_the_trusted_name_is_a_bad_signature() -> None:
    """A signature claiming the trusted name and key ID but made by another key is rejected."""
    trusted, attacker = generate_signer(LOG), generate_signer(LOG)
    text = Checkpoint(LOG, 43, ROOT).to_text()
    forged_sig = Signature(LOG, trusted.key_id, attacker.sign(text.encode()))
    with pytest.raises(NoteError) as caught:
        open_checkpoint(text + "\n" + forged_sig.line(), [trusted.verifier()])
    assert caught.value.reason == "note_bad_signature"


def test_each_key_verifies_a_note_once_however_often_it_is_opened() -> None:
    """A note opened twice, with its signature line repeated, costs one Ed25519 verification;
    a changed text is verified afresh and refused."""
    from effectledger.audit.log.note import _verified

    signer = Signer("log.example", bytes(range(32)))
    note = sign_note("effectledger/acme\n3\n" + "A" * 43 + "=\n", [signer])
    signature = note[note.rfind("\n\n") + 2 :]
    doubled = note + signature
    _verified.cache_clear()
    for _ in range(2):
        assert [s.name for s in open_note(doubled, [signer.verifier()]).signatures] == [
            "log.example"
        ]
    assert (_verified.cache_info().misses, _verified.cache_info().hits) == (1, 3)
    with pytest.raises(NoteError) as refused:
        open_note(doubled.replace("\n3\n", "\n4\n"), [signer.verifier()])
    assert refused.value.reason == "note_bad_signature"
    assert _verified.cache_info().misses == 2
