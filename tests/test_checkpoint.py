"""coniti.checkpoint: C2SP signed notes (Ed25519) and tlog checkpoints.

Known answers are Go's: golang/mod ``sumdb/note/note_test.go`` and ``note.go`` (the PeterNeumann
and EnochRoot keys and signatures), ``sumdb/client_test.go`` (the sumdb test key, and a signed tree
head of size 6 quoted in TestClientFork), ``sumdb/tlog/note_test.go`` (the tree note golden); and
the example checkpoint of c2sp.org/tlog-checkpoint. Ed25519 signatures are deterministic, so
signing the same text with the same key must give Go's bytes.
"""

from __future__ import annotations

import base64
import hashlib
import re

import pytest

from coniti.checkpoint import (
    MAX_SIGNATURES,
    Checkpoint,
    generate_key,
    open_note,
    sign_checkpoint,
    sign_note,
    verifier_key,
    verify_checkpoint,
)
from coniti.errors import CheckpointError, ProofError
from coniti.proofs import MerkleTree, leaf_hash

# golang/mod sumdb/note (note.go's example and note_test.go)
PETER_SIGNER = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
PETER_VERIFIER = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
ENOCH_VERIFIER = "EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop"
NEUMANN_TEXT = (
    "If you think cryptography is the answer to your problem,\n"
    "then you don't know what your problem is.\n"
)
PETER_SIG = "— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n"
ENOCH_SIG = "— EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWLox33WWd1RvMc+QQ=\n"

# golang/mod sumdb/client_test.go: the test key, and the tree head of size 6 TestClientFork prints
SUMDB_SIGNER = (
    "PRIVATE+KEY+localhost.localdev/sumdb+00000c67+AXu6+oaVaOYuQOFrf1V59JK1owcFlJcHwwXHDfDGxSPk"
)
SUMDB_VERIFIER = "localhost.localdev/sumdb+00000c67+AcTrnkbUA+TU4heY3hkjiSES/DSQniBqIeQ/YppAUtK6"
SUMDB_TREE_6 = (
    "go.sum database tree\n6\nwc4SkQt52o5W2nQ8To2ARs+mWuUJjss+sdleoiqxMmM=\n\n"
    "— localhost.localdev/sumdb AAAMZ6oRNswlEZ6ZZhxrCvgl1MBy+nusq4JU+TG6Fe2NihWLqOzb+y2c2kzRLoCr4tvw9o36ucQEnhc20e4nA4Qc/wc=\n"
)

ORIGIN = "coniti.example/store-1"


@pytest.fixture(scope="module")
def keys() -> tuple[str, str]:
    return generate_key(ORIGIN)


def checkpoint_of(size: int) -> Checkpoint:
    tree = MerkleTree(leaf_hash(bytes([i]) * 32) for i in range(size))
    return Checkpoint(ORIGIN, size, tree.root())


# -- Go's signed notes ----------------------------------------------------------------------------


def test_signing_matches_go() -> None:
    """Signing Go's example text with Go's example key gives Go's signed note, byte for byte."""
    assert sign_note(NEUMANN_TEXT, PETER_SIGNER) == NEUMANN_TEXT + "\n" + PETER_SIG


def test_the_verifier_key_of_a_signer_key_matches_go() -> None:
    """The verifier key derived from Go's signer keys is Go's verifier key."""
    assert verifier_key(PETER_SIGNER) == PETER_VERIFIER
    assert verifier_key(SUMDB_SIGNER) == SUMDB_VERIFIER


@pytest.mark.parametrize("verifier", [PETER_VERIFIER, ENOCH_VERIFIER])
def test_a_doubly_signed_go_note_opens_with_either_key(verifier: str) -> None:
    """Go's note signed by PeterNeumann and EnochRoot opens with either verifier; the other
    signature is ignored."""
    assert open_note(NEUMANN_TEXT + "\n" + PETER_SIG + ENOCH_SIG, verifier) == NEUMANN_TEXT


def test_a_go_signature_altered_in_the_middle_fails() -> None:
    """Go's 'invalid signature' case: four characters spliced into the signature refuse the note."""
    bad = PETER_SIG[:60] + "ABCD" + PETER_SIG[60:]
    with pytest.raises(CheckpointError, match=r"signature by key PeterNeumann\+c74f20a3 does not"):
        open_note(NEUMANN_TEXT + "\n" + bad, PETER_VERIFIER)


def test_a_go_signed_tree_head_verifies_as_a_checkpoint() -> None:
    """The sumdb tree head of size 6 (a checkpoint before the name) verifies, and re-signing its text
    with the sumdb test key gives the same note."""
    checkpoint = verify_checkpoint(SUMDB_TREE_6, SUMDB_VERIFIER, origin="go.sum database tree")
    assert checkpoint.size == 6
    assert (
        base64.b64encode(checkpoint.root).decode() == "wc4SkQt52o5W2nQ8To2ARs+mWuUJjss+sdleoiqxMmM="
    )
    assert sign_checkpoint(checkpoint, SUMDB_SIGNER) == SUMDB_TREE_6


def test_checkpoint_text_matches_go_format_tree() -> None:
    """Go's tlog FormatTree golden: size 123456789012 and the RFC 6962 leaf hash of 'hello world'."""
    checkpoint = Checkpoint("go.sum database tree", 123456789012, leaf_hash(b"hello world"))
    golden = "go.sum database tree\n123456789012\nTszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBb0=\n"
    assert checkpoint.text() == golden
    assert Checkpoint.parse(golden) == checkpoint


def test_the_c2sp_example_checkpoint_parses() -> None:
    """The body of c2sp.org/tlog-checkpoint's example parses to its origin, size and root."""
    text = "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
    checkpoint = Checkpoint.parse(text)
    assert (checkpoint.origin, checkpoint.size) == ("example.com/behind-the-sofa", 20852163)
    assert checkpoint.text() == text


# -- keys -----------------------------------------------------------------------------------------


def test_every_mangling_of_a_go_verifier_key_is_refused() -> None:
    """As Go's TestNewVerifier: every proper substring of the key, and the key with any one
    character incremented, is refused."""
    key = PETER_VERIFIER
    mangled = {key[i:j] for i in range(len(key) + 1) for j in range(i + 1, len(key) + 1)} - {key}
    mangled |= {key[:i] + chr(ord(key[i]) + 1) + key[i + 1 :] for i in range(len(key))}
    for text in sorted(mangled):
        with pytest.raises(CheckpointError):
            open_note(NEUMANN_TEXT + "\n" + PETER_SIG, text)
            pytest.fail(f"accepted {text!r}")


def test_every_mangling_of_a_go_signer_key_is_refused() -> None:
    """As Go's TestNewSigner: every proper substring of the key, and the key with any one character
    incremented, is refused."""
    key = PETER_SIGNER
    mangled = {key[i:j] for i in range(len(key) + 1) for j in range(i + 1, len(key) + 1)} - {key}
    mangled |= {key[:i] + chr(ord(key[i]) + 1) + key[i + 1 :] for i in range(len(key))}
    for text in sorted(mangled):
        with pytest.raises(CheckpointError):
            verifier_key(text)
            pytest.fail(f"accepted {text!r}")


@pytest.mark.parametrize(
    ("key", "message"),
    [
        (
            "PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY==",
            "not 32 bytes",
        ),
        ("PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "is not Ed25519"),
    ],
)
def test_go_bad_verifier_keys_are_refused_for_their_reason(key: str, message: str) -> None:
    """Go's two crafted keys (right key ID, wrong length; right key ID, unknown type) are refused,
    each for its reason."""
    with pytest.raises(CheckpointError, match=message):
        open_note(NEUMANN_TEXT + "\n" + PETER_SIG, key)


def test_generated_keys_have_the_note_formats(keys: tuple[str, str]) -> None:
    """generate_key gives PRIVATE+KEY+<name>+<id>+<base64> and <name>+<id>+<base64>, the same key
    ID, the ID being SHA-256(name, newline, 0x01, public key)[:4]."""
    signer, verifier = keys
    signer_id = re.fullmatch(rf"PRIVATE\+KEY\+{re.escape(ORIGIN)}\+([0-9a-f]{{8}})\+(\S+)", signer)
    verifier_id = re.fullmatch(rf"{re.escape(ORIGIN)}\+([0-9a-f]{{8}})\+(\S+)", verifier)
    assert signer_id and verifier_id and signer_id[1] == verifier_id[1]
    public = base64.b64decode(verifier_id[2])
    assert len(public) == 33 and public[0] == 1
    assert len(base64.b64decode(signer_id[2])) == 33
    assert hashlib.sha256(ORIGIN.encode() + b"\n" + public).digest()[:4].hex() == verifier_id[1]
    assert verifier_key(signer) == verifier


def test_generated_keys_differ() -> None:
    """Two keys generated under one name are different keys."""
    assert generate_key("a")[1] != generate_key("a")[1]


@pytest.mark.parametrize("name", ["", "a b", "a+b", "a\tb", "a\u00a0b", "a\nb"])
def test_a_key_name_with_space_or_plus_is_refused(name: str) -> None:
    """A key name that is empty or holds white space (Unicode's too), '+' or a control character
    is refused."""
    with pytest.raises(CheckpointError, match="key name"):
        generate_key(name)


def test_a_signer_key_never_appears_in_a_message() -> None:
    """A signer key that does not match its ID is refused without quoting the key."""
    secret = PETER_SIGNER.replace("c74f20a3", "c74f20a4")
    with pytest.raises(CheckpointError) as caught:
        sign_note("text\n", secret)
    assert "AYEKFALV" not in str(caught.value)
    assert "does not match its key ID" in str(caught.value)


# -- checkpoints ----------------------------------------------------------------------------------


def test_a_signed_checkpoint_verifies(keys: tuple[str, str]) -> None:
    """A checkpoint signed with a generated key verifies with its verifier key, for its origin."""
    signer, verifier = keys
    checkpoint = checkpoint_of(7)
    note = sign_checkpoint(checkpoint, signer)
    assert note.startswith(checkpoint.text() + "\n— " + ORIGIN + " ")
    assert verify_checkpoint(note, verifier, origin=ORIGIN) == checkpoint
    assert verify_checkpoint(note.encode("utf-8"), verifier) == checkpoint


def test_a_checkpoint_signed_by_another_key_is_refused(keys: tuple[str, str]) -> None:
    """A checkpoint signed by another key of the same name is refused, naming the key expected and
    the key found."""
    other_signer, _ = generate_key(ORIGIN)
    note = sign_checkpoint(checkpoint_of(3), other_signer)
    with pytest.raises(CheckpointError, match=r"^the note is not signed by key coniti\.example/"):
        verify_checkpoint(note, keys[1])


def test_a_checkpoint_for_another_origin_is_refused(keys: tuple[str, str]) -> None:
    """When the caller names the origin, a checkpoint for another one is refused."""
    note = sign_checkpoint(Checkpoint("elsewhere", 1, b"\x00" * 32), keys[0])
    with pytest.raises(CheckpointError, match="^the checkpoint is for origin 'elsewhere', not "):
        verify_checkpoint(note, keys[1], origin=ORIGIN)


def test_a_checkpoint_with_an_altered_size_is_refused(keys: tuple[str, str]) -> None:
    """Changing the signed size from 7 to 8 breaks the signature."""
    note = sign_checkpoint(checkpoint_of(7), keys[0]).replace("\n7\n", "\n8\n", 1)
    with pytest.raises(CheckpointError, match="does not verify"):
        verify_checkpoint(note, keys[1])


def test_a_checkpoint_with_an_altered_signature_is_refused(keys: tuple[str, str]) -> None:
    """Flipping a bit of the signature (after the key ID) refuses the note."""
    note = sign_checkpoint(checkpoint_of(7), keys[0])
    head, line = note.rsplit("\n\n", 1)
    name, encoded = line[len("— ") :].rstrip("\n").split(" ")
    blob = bytearray(base64.b64decode(encoded))
    blob[10] ^= 1
    altered = f"{head}\n\n— {name} {base64.b64encode(bytes(blob)).decode()}\n"
    with pytest.raises(CheckpointError, match="does not verify"):
        verify_checkpoint(altered, keys[1])


def test_unknown_signatures_are_ignored(keys: tuple[str, str]) -> None:
    """A cosignature by an unknown key beside the known key's is ignored (key rotation, witnesses)."""
    note = sign_checkpoint(checkpoint_of(4), keys[0])
    cosigned = (
        note + sign_note(checkpoint_of(4).text(), generate_key("witness")[0]).split("\n\n")[1]
    )
    assert verify_checkpoint(cosigned, keys[1]).size == 4


@pytest.mark.parametrize(
    ("note", "message"),
    [
        ("a\nb\nc\n— x AAAAAAA=\n", "no blank line"),
        ("a\n1\nAAAA\n\n— x AAAAAAA=", "do not end with a newline"),
        ("a\n1\nAAAA\n\n", "no signature after its blank line"),
        ("a\x01\n\n— x AAAAAAA=\n", "control character"),
        ("a\n\nnot a signature\n", "is no signature"),
        ("a\n\n— bad name AAAAAAA=\n", "is malformed"),
        ("a\n\n— x AAAA\n", "is malformed"),
        ("a\n\n— x not-base64!\n", "is malformed"),
    ],
)
def test_malformed_notes_are_refused(note: str, message: str, keys: tuple[str, str]) -> None:
    """Notes out of the signed-note format are refused, saying what is wrong."""
    with pytest.raises(CheckpointError, match=message):
        open_note(note, keys[1])


def test_a_note_that_is_not_utf8_is_refused(keys: tuple[str, str]) -> None:
    """Bytes that are not UTF-8 are refused."""
    with pytest.raises(CheckpointError, match="not UTF-8"):
        open_note(b"\xff\n\n- x AAAAAAA=\n", keys[1])


def test_too_many_signatures_are_refused() -> None:
    """As Go: 101 signature lines refuse the note, even when one of them is good."""
    note = NEUMANN_TEXT + "\n" + PETER_SIG * (MAX_SIGNATURES + 1)
    with pytest.raises(CheckpointError, match="101 signatures, more than 100"):
        open_note(note, PETER_VERIFIER)
    assert open_note(NEUMANN_TEXT + "\n" + PETER_SIG * MAX_SIGNATURES, PETER_VERIFIER)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("o\n01\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n", "size '01'"),
        ("o\n+1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n", "size '\\+1'"),
        ("o\n 1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n", "size ' 1'"),
        ("o\n1_0\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n", "size '1_0'"),
        ("o\n\u0661\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n", "size"),
        ("o\n18446744073709551616\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n", "below 2\\^64"),
        ("o\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAB=\n", "root"),
        ("o\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==\n", "root"),
        ("o\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "end with a newline"),
        ("o\n1\n", "at least 3 lines"),
        ("\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n", "origin"),
        ("o\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n", "extension line 1"),
    ],
)
def test_malformed_checkpoints_are_refused(text: str, message: str) -> None:
    """A size with leading zeros, a sign, a space, an underscore, a non-ASCII digit or past 2^64, a
    root that is not the canonical base64 of 32 bytes, a missing newline or line, an empty origin
    or an empty extension line is refused."""
    with pytest.raises(CheckpointError, match=message):
        Checkpoint.parse(text)


def test_extension_lines_round_trip(keys: tuple[str, str]) -> None:
    """Extension lines are signed and given back, in order."""
    checkpoint = Checkpoint(ORIGIN, 2, b"\x01" * 32, ("ext one", "ext two"))
    assert checkpoint.text().endswith("\next one\next two\n")
    assert verify_checkpoint(sign_checkpoint(checkpoint, keys[0]), keys[1]) == checkpoint


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"origin": ""}, "origin must be non-empty"),
        ({"origin": "a\nb"}, "control character"),
        ({"size": -1}, "size -1"),
        ({"size": 2**64}, "size"),
        ({"root": b"\x00" * 31}, "32 bytes"),
        ({"extensions": ("",)}, "extension line 1"),
    ],
)
def test_a_checkpoint_out_of_format_cannot_be_built(
    fields: dict[str, object], message: str
) -> None:
    """Checkpoint refuses, on construction, what it could not write as a checkpoint."""
    values: dict[str, object] = {"origin": "o", "size": 1, "root": b"\x00" * 32, **fields}
    with pytest.raises(CheckpointError, match=message):
        Checkpoint(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["no newline", "bad\x07\n"])
def test_sign_note_refuses_text_it_could_not_sign(text: str) -> None:
    """A text without a final newline or with a control character is refused before signing."""
    with pytest.raises(CheckpointError, match="note's text"):
        sign_note(text, PETER_SIGNER)


def test_checkpoint_errors_are_proof_errors() -> None:
    """CheckpointError is a ProofError (a ConitiError and ValueError)."""
    assert issubclass(CheckpointError, ProofError) and issubclass(CheckpointError, ValueError)
