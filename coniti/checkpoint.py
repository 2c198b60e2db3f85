"""Signed checkpoints: C2SP signed notes (c2sp.org/signed-note) with Ed25519, and C2SP
tlog checkpoints (c2sp.org/tlog-checkpoint) in them.

The formats, byte for byte those of Go's ``golang.org/x/mod/sumdb/note`` (the tests check its
published keys and signatures):

* **key name**: non-empty, no Unicode white space, no ``+``.
* **key ID**: the first 4 bytes of ``SHA-256(name ‖ 0x0A ‖ 0x01 ‖ 32-byte public key)``, read
  big-endian; written as 8 hex digits in keys, as 4 raw bytes in signatures.
* **verifier key** (public): ``<name>+<key ID>+<base64(0x01 ‖ public key)>``.
* **signer key** (secret): ``PRIVATE+KEY+<name>+<key ID>+<base64(0x01 ‖ 32-byte Ed25519 seed)>``.
* **signed note**: a text ending in a newline, a blank line, then one or more signature lines
  ``— <name> <base64(key ID ‖ 64-byte Ed25519 signature of the text)>`` (em dash U+2014, space),
  each ending in a newline. The whole note is UTF-8 with no control character but the newline; the
  text may hold blank lines (the last blank line starts the signatures).
* **checkpoint** (a note's text): ``<origin>\\n<tree size>\\n<base64 root>\\n`` then any non-empty
  extension lines. The size is ASCII decimal without leading zeros, below 2^64; the root the
  32-byte RFC 9162 root (:mod:`coniti.proofs`) in canonical standard base64.

Reading follows the signed-note rules: signatures by keys other than the verifier's (another name or
another key ID) are ignored; a note with more than 100 signatures is refused; a signature by the
verifier's key that does not verify refuses the note; a note with none refuses it too. Every
refusal is a :class:`~coniti.errors.CheckpointError` with a one-line message; no message ever
quotes a signer key. Ed25519 is :mod:`cryptography`'s (pyca), not ours.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from coniti.errors import CheckpointError
from coniti.proofs import HASH_SIZE

__all__ = [
    "Checkpoint",
    "generate_key",
    "open_note",
    "read_signer_key",
    "sign_checkpoint",
    "sign_note",
    "verifier_key",
    "verify_checkpoint",
    "write_signer_key",
]

ED25519 = 1
"""The signature type byte of Ed25519 in keys and key IDs (c2sp.org/signed-note)."""

MAX_SIGNATURES = 100
"""The most signature lines a note may carry (the spec asks at least 16 be accepted)."""

_SIGNATURE_PREFIX = "\N{EM DASH} "
_SIZE = re.compile(r"0|[1-9][0-9]*")
_KEY_ID = re.compile(r"[0-9a-fA-F]{8}")
_RAW = serialization.Encoding.Raw
_MAX_SIZE = 1 << 64


def _b64decode(text: str) -> bytes:
    """Strict standard base64 (RFC 4648 §4, padded); raises ValueError (binascii.Error)."""
    return binascii.a2b_base64(text.encode("ascii"), strict_mode=True)


def _b64encode(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _key_id(name: str, encoded_key: bytes) -> int:
    """SHA-256(name ‖ 0x0A ‖ encoded key)[:4], big-endian; the encoded key starts with its type byte."""
    digest = hashlib.sha256(name.encode("utf-8") + b"\n" + encoded_key).digest()
    return int.from_bytes(digest[:4], "big")


def _is_clean(text: str) -> bool:
    """UTF-8 encodable (no lone surrogate), with no control character but the newline."""
    if any(c < " " and c != "\n" for c in text):
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _is_key_name(name: str) -> bool:
    """Non-empty, no white space (Python's ``str.isspace``, which covers Unicode's White_Space), no
    ``+``, and clean."""
    return bool(name) and "+" not in name and not any(c.isspace() for c in name) and _is_clean(name)


def _short(text: str) -> str:
    return repr(text if len(text) <= 120 else text[:120] + "...")


@dataclass(frozen=True, slots=True)
class _Verifier:
    name: str
    key_id: int
    key: Ed25519PublicKey

    @property
    def label(self) -> str:
        return f"{self.name}+{self.key_id:08x}"


@dataclass(frozen=True, slots=True)
class _Signer:
    name: str
    key_id: int
    key: Ed25519PrivateKey


def _public_bytes(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(_RAW, serialization.PublicFormat.Raw)


def _format_verifier(name: str, public: bytes) -> str:
    encoded = bytes([ED25519]) + public
    return f"{name}+{_key_id(name, encoded):08x}+{_b64encode(encoded)}"


def _parse_verifier(text: str) -> _Verifier:
    if not isinstance(text, str):
        raise CheckpointError(f"a verifier key is text, got {type(text).__name__}")
    name, _, rest = text.partition("+")
    key_id, _, encoded = rest.partition("+")
    if not _is_key_name(name) or not _KEY_ID.fullmatch(key_id):
        raise CheckpointError(
            f"verifier key {_short(text)} is not <name>+<8 hex digits>+<base64 key>"
        )
    try:
        raw = _b64decode(encoded)
    except (ValueError, UnicodeEncodeError):
        raise CheckpointError(f"verifier key {_short(text)}: its key is not base64") from None
    if not raw or _key_id(name, raw) != int(key_id, 16):
        raise CheckpointError(f"verifier key {_short(text)}: its key does not match its key ID")
    if raw[0] != ED25519:
        raise CheckpointError(
            f"verifier key {_short(text)}: key type {raw[0]} is not Ed25519 ({ED25519})"
        )
    if len(raw) != 33:
        raise CheckpointError(f"verifier key {_short(text)}: its Ed25519 key is not 32 bytes")
    try:
        public = Ed25519PublicKey.from_public_bytes(raw[1:])
    except ValueError:
        raise CheckpointError(f"verifier key {_short(text)}: its key is no Ed25519 key") from None
    return _Verifier(name, int(key_id, 16), public)


def _parse_signer(text: str) -> _Signer:
    """The signer key ``text``; messages name the key's name at most, never the key."""
    shape = "a signer key is PRIVATE+KEY+<name>+<8 hex digits>+<base64 key>"
    if not isinstance(text, str):
        raise CheckpointError(f"a signer key is text, got {type(text).__name__}")
    private, _, rest = text.partition("+")
    key, _, rest = rest.partition("+")
    name, _, rest = rest.partition("+")
    key_id, _, encoded = rest.partition("+")
    if private != "PRIVATE" or key != "KEY" or not _is_key_name(name):
        raise CheckpointError(f"malformed signer key: {shape}")
    if not _KEY_ID.fullmatch(key_id):
        raise CheckpointError(f"signer key for {name!r} has no 8-hex-digit key ID: {shape}")
    try:
        raw = _b64decode(encoded)
    except (ValueError, UnicodeEncodeError):
        raise CheckpointError(f"signer key for {name!r}: its key is not base64") from None
    if not raw or raw[0] != ED25519:
        raise CheckpointError(f"signer key for {name!r} is not an Ed25519 key")
    if len(raw) != 33:
        raise CheckpointError(f"signer key for {name!r}: its Ed25519 seed is not 32 bytes")
    private_key = Ed25519PrivateKey.from_private_bytes(raw[1:])
    if _key_id(name, bytes([ED25519]) + _public_bytes(private_key)) != int(key_id, 16):
        raise CheckpointError(f"signer key for {name!r} does not match its key ID")
    return _Signer(name, int(key_id, 16), private_key)


def generate_key(name: str) -> tuple[str, str]:
    """A new Ed25519 key named ``name``: ``(signer key, verifier key)``. The signer key is secret;
    the verifier key is what readers of the checkpoints are given. Raises CheckpointError for a name
    that is empty or holds white space, ``+`` or a control character."""
    if not isinstance(name, str) or not _is_key_name(name):
        raise CheckpointError(
            f"key name {name!r} must be non-empty, without white space, '+' or control characters"
        )
    key = Ed25519PrivateKey.generate()
    seed = key.private_bytes(_RAW, serialization.PrivateFormat.Raw, serialization.NoEncryption())
    encoded = bytes([ED25519]) + _public_bytes(key)
    signer = (
        f"PRIVATE+KEY+{name}+{_key_id(name, encoded):08x}+{_b64encode(bytes([ED25519]) + seed)}"
    )
    return signer, _format_verifier(name, _public_bytes(key))


def verifier_key(signer: str) -> str:
    """The verifier key of the signer key ``signer``. Raises CheckpointError for a malformed one."""
    parsed = _parse_signer(signer)
    return _format_verifier(parsed.name, _public_bytes(parsed.key))


def sign_note(text: str, signer: str) -> str:
    """``text`` signed by ``signer`` (a signer key): the text, a blank line and one signature line.
    Raises CheckpointError for a text that does not end in a newline or holds a control character
    other than the newline, or a malformed signer key."""
    key = _parse_signer(signer)
    if not isinstance(text, str) or not text.endswith("\n"):
        raise CheckpointError("a note's text must end with a newline")
    if not _is_clean(text):
        raise CheckpointError("a note's text must be UTF-8 without control characters but newlines")
    signature = key.key.sign(text.encode("utf-8"))
    blob = key.key_id.to_bytes(4, "big") + signature
    return f"{text}\n{_SIGNATURE_PREFIX}{key.name} {_b64encode(blob)}\n"


def open_note(note: str | bytes, verifier: str) -> str:
    """The text of the signed ``note`` once its signature by ``verifier`` (a verifier key) holds.

    Signatures by other keys are ignored. Raises CheckpointError when the note is malformed (not
    UTF-8, a control character, no blank line before the signatures, a signature line out of
    shape, more than :data:`MAX_SIGNATURES`), when a signature by the verifier's key does not
    verify, or when the verifier's key did not sign it."""
    key = _parse_verifier(verifier)
    if isinstance(note, bytes):
        try:
            note = note.decode("utf-8")
        except UnicodeDecodeError:
            raise CheckpointError("the note is not UTF-8") from None
    if not isinstance(note, str):
        raise CheckpointError(f"a note is text, got {type(note).__name__}")
    if not _is_clean(note):
        raise CheckpointError("the note holds a control character other than a newline")
    split = note.rfind("\n\n")
    if split < 0:
        raise CheckpointError("the note has no blank line before its signatures")
    text, block = note[: split + 1], note[split + 2 :]
    if not block:
        raise CheckpointError("the note has no signature after its blank line")
    if not block.endswith("\n"):
        raise CheckpointError("the note's signature lines do not end with a newline")
    lines = block[:-1].split("\n")
    if len(lines) > MAX_SIGNATURES:
        raise CheckpointError(f"the note has {len(lines)} signatures, more than {MAX_SIGNATURES}")
    message = text.encode("utf-8")
    verified = False
    others: list[str] = []
    for line in lines:
        if not line.startswith(_SIGNATURE_PREFIX):
            raise CheckpointError(f"note line {_short(line)} after the blank line is no signature")
        name, _, encoded = line[len(_SIGNATURE_PREFIX) :].partition(" ")
        try:
            blob = _b64decode(encoded) if _is_key_name(name) and encoded else b""
        except (ValueError, UnicodeEncodeError):
            blob = b""
        if len(blob) < 5:
            raise CheckpointError(f"note signature line {_short(line)} is malformed")
        key_id = int.from_bytes(blob[:4], "big")
        if name != key.name or key_id != key.key_id:
            others.append(f"{name}+{key_id:08x}")
            continue
        try:
            key.key.verify(blob[4:], message)
        except InvalidSignature:
            raise CheckpointError(f"the signature by key {key.label} does not verify") from None
        verified = True
    if not verified:
        by = f" (signed by {', '.join(others)})" if others else ""
        raise CheckpointError(f"the note is not signed by key {key.label}{by}")
    return text


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A tree head: the log's ``origin``, its tree ``size`` and the 32-byte ``root`` of that tree,
    plus any ``extensions`` (opaque non-empty lines; their use is not recommended by the spec).

    Raises CheckpointError on construction for an empty origin, a field holding a newline or a
    control character, a size outside ``[0, 2^64)``, a root that is not 32 bytes, or an empty
    extension line."""

    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.origin, str) or not self.origin:
            raise CheckpointError("a checkpoint's origin must be non-empty text")
        if "\n" in self.origin or not _is_clean(self.origin):
            raise CheckpointError(
                f"checkpoint origin {_short(self.origin)} holds a control character"
            )
        size = self.size
        if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size < _MAX_SIZE:
            raise CheckpointError(f"checkpoint size {size!r} is not a whole number in [0, 2^64)")
        if not isinstance(self.root, bytes | bytearray) or len(self.root) != HASH_SIZE:
            raise CheckpointError(f"a checkpoint's root must be {HASH_SIZE} bytes")
        object.__setattr__(self, "root", bytes(self.root))
        object.__setattr__(self, "extensions", tuple(self.extensions))
        for number, line in enumerate(self.extensions, 1):
            if not isinstance(line, str) or not line:
                raise CheckpointError(f"checkpoint extension line {number} must be non-empty text")
            if "\n" in line or not _is_clean(line):
                raise CheckpointError(
                    f"checkpoint extension line {number} holds a control character"
                )

    def text(self) -> str:
        """The note text: origin, size and base64 root, then the extension lines, each ending in a
        newline."""
        lines = [self.origin, str(self.size), _b64encode(self.root), *self.extensions]
        return "".join(line + "\n" for line in lines)

    @classmethod
    def parse(cls, text: str) -> Checkpoint:
        """The checkpoint a note's ``text`` holds (unsigned: :func:`verify_checkpoint` checks the
        signature first). Raises CheckpointError for text out of the format."""
        if not isinstance(text, str) or not text.endswith("\n"):
            raise CheckpointError("a checkpoint's text must end with a newline")
        lines = text[:-1].split("\n")
        if len(lines) < 3:
            raise CheckpointError(
                f"a checkpoint has at least 3 lines (origin, size, root), this has {len(lines)}"
            )
        origin, size, root, *extensions = lines
        if not _SIZE.fullmatch(size) or int(size) >= _MAX_SIZE:
            raise CheckpointError(
                f"checkpoint size {_short(size)} is not a decimal below 2^64 without leading zeros"
            )
        try:
            raw = _b64decode(root)
        except (ValueError, UnicodeEncodeError):
            raw = b""
        if len(raw) != HASH_SIZE or _b64encode(raw) != root:
            raise CheckpointError(f"checkpoint root {_short(root)} is not the base64 of 32 bytes")
        return cls(origin, int(size), raw, tuple(extensions))


def sign_checkpoint(checkpoint: Checkpoint, signer: str) -> str:
    """``checkpoint`` as a signed note, signed by ``signer`` (a signer key)."""
    return sign_note(checkpoint.text(), signer)


def verify_checkpoint(note: str | bytes, verifier: str, *, origin: str | None = None) -> Checkpoint:
    """The checkpoint in the signed ``note``, once its signature by ``verifier`` holds and, when
    ``origin`` is given, its origin is that one. Raises CheckpointError otherwise (see
    :func:`open_note` and :meth:`Checkpoint.parse`). The key's name need not be the origin (the
    spec says it should be): pass ``origin`` to pin the log, the verifier key to pin the signer."""
    checkpoint = Checkpoint.parse(open_note(note, verifier))
    if origin is not None and checkpoint.origin != origin:
        raise CheckpointError(
            f"the checkpoint is for origin {_short(checkpoint.origin)}, not {_short(origin)}"
        )
    return checkpoint


def write_signer_key(path: str | os.PathLike[str], name: str) -> str:
    """Generate a key named ``name`` (:func:`generate_key`), write its signer key to a new file
    ``path`` (mode 0600, one line; an existing file is refused) and return its verifier key.
    Raises CheckpointError for a bad name or a file that cannot be created, and then writes nothing."""
    signer, verifier = generate_key(name)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        raise CheckpointError(f"key file {os.fspath(path)} already exists: choose a new file") from None
    except OSError as exc:
        raise CheckpointError(f"cannot create key file {os.fspath(path)}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "w", encoding="ascii") as out:
        out.write(signer + "\n")
    return verifier


def read_signer_key(path: str | os.PathLike[str]) -> str:
    """The signer key in the file ``path`` (as :func:`write_signer_key` writes it). Raises
    CheckpointError for a file that cannot be read, is readable or writable by group or others
    (a secret key: ``chmod 600`` it), or does not hold a signer key."""
    where = os.fspath(path)
    try:
        with open(path, encoding="ascii") as file:
            mode = os.fstat(file.fileno()).st_mode
            text = file.read(4096)
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"cannot read key file {where}: {getattr(exc, 'strerror', None) or exc}") from None
    if mode & 0o077:
        raise CheckpointError(f"key file {where} is open to group or others: chmod 600 {where}")
    signer = text.strip()
    _parse_signer(signer)
    return signer
