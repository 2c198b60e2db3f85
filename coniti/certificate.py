"""Erasure certificates: a signed statement that records were erased from a log store, with proofs.

:func:`erase_with_certificate` erases record ids of one namespace (``LogBackend.erase``), compacts
the store (``compact``: the store must be open nowhere else), scans the store's files for the bytes
of every erased version's text and blob (the *residue*: none is the claim), signs a checkpoint of
the tree that holds the erase events (``LogBackend.checkpoint``) and makes each erase event's
inclusion proof against it. The certificate is a C2SP signed note (:mod:`coniti.checkpoint`) by the
same key, whose text is one line of canonical JSON (ASCII, keys sorted):

* ``format`` ``"coniti-erasure-certificate"``, ``version`` 1, ``origin``, ``namespace``, ``reason``;
* ``erased``: per id, the ``versions`` (put seqs) erased, the erase event ``receipt`` (its seq),
  its ``event_hash`` and ``proof`` (the RFC 9162 audit path, hex) in the checkpoint's tree;
* ``checkpoint``: the signed checkpoint note;
* ``compaction``: ``bytes_before``, ``bytes_after``, ``files`` scanned, ``residue`` (the ids whose
  content bytes were still found: empty when the claim holds; texts and blobs shorter than
  :data:`MIN_SCAN_BYTES` are not scanned, as they may occur by chance, and are listed in
  ``unscanned``).

:func:`verify_certificate` checks it with the verifier key alone: the note's signature, the
checkpoint's, and every proof. Ids that were never held are refused before anything is written.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from coniti.checkpoint import open_note, sign_note, verify_checkpoint
from coniti.errors import CheckpointError, ContractError
from coniti.proofs import leaf_hash, verify_inclusion

__all__ = ["FORMAT", "MIN_SCAN_BYTES", "erase_with_certificate", "verify_certificate", "write_certificate"]

FORMAT = "coniti-erasure-certificate"
MIN_SCAN_BYTES = 8
"""Content shorter than this is not scanned for (it may occur in the files by chance)."""


def _scan(path: str, needles: dict[str, list[bytes]]) -> tuple[list[str], list[str]]:
    """The files under store ``path`` (its derived state included) and the ids whose content bytes
    any of them holds."""
    root = Path(path)
    files = sorted(p for p in root.rglob("*") if p.is_file())
    found: set[str] = set()
    for file in files:
        data = file.read_bytes()
        for rid, contents in needles.items():
            if rid not in found and any(content in data for content in contents):
                found.add(rid)
    return [str(f.relative_to(root)) for f in files], sorted(found)


def erase_with_certificate(
    store: Any, ids: list[str], *, namespace: tuple[str, ...], reason: str, signer: str
) -> str:
    """Erase ``ids`` of ``namespace`` from ``store`` (a writable LogBackend, open nowhere else),
    compact it, check its files and return the signed certificate (see the module docstring).
    Raises :class:`ContractError` (nothing written) for an id the namespace never held, and
    :class:`CheckpointError` for a malformed signer key before anything is written."""
    from coniti.checkpoint import verifier_key

    verifier_key(signer)  # a bad key fails before anything is erased
    versions: dict[str, list[int]] = {}
    needles: dict[str, list[bytes]] = {}
    unscanned: list[str] = []
    for rid in ids:
        puts = [e for e in store.history(rid, namespace) if e.kind == "put"]
        if not puts:
            raise ContractError(f"record {rid!r} was never in namespace {'/'.join(namespace) or '/'}: nothing erased")
        versions[rid] = [e.seq for e in puts]
        contents = []
        for event in puts:
            if event.record is not None:
                contents.append(event.record.note.text.encode("utf-8", "surrogatepass"))
                if event.record.blob:
                    contents.append(bytes(event.record.blob))
        needles[rid] = [c for c in contents if len(c) >= MIN_SCAN_BYTES]
        if len(needles[rid]) < len(contents):
            unscanned.append(rid)
    result = store.erase(ids, namespace=namespace, reason=reason)
    before, after = store.compact()
    files, residue = _scan(store.path, needles)
    note = store.checkpoint(signer)
    size = int(note.split("\n")[1])
    erased = []
    for rid, seq in zip(result.erased, result.receipts, strict=False):
        erased.append({
            "id": rid, "versions": versions[rid], "receipt": seq, "event_hash": store.event_hash(seq),
            "proof": [h.hex() for h in store.prove_inclusion(seq, size)],
        })  # fmt: skip
    statement = {
        "format": FORMAT, "version": 1, "origin": store.origin, "namespace": list(namespace), "reason": reason,
        "erased": erased, "checkpoint": note,
        "compaction": {"bytes_before": before, "bytes_after": after, "files": files, "residue": residue,
                       "unscanned": unscanned},
    }  # fmt: skip
    text = json.dumps(statement, sort_keys=True, separators=(",", ":"), ensure_ascii=True) + "\n"
    return sign_note(text, signer)


def verify_certificate(certificate: str, verifier: str) -> dict[str, Any]:
    """The statement of ``certificate`` once its signature by ``verifier`` holds, its checkpoint is
    signed by the same key, and every erase event's proof puts it in the checkpoint's tree. Raises
    :class:`CheckpointError` (or :class:`~coniti.errors.ProofError`) naming what failed."""
    text = open_note(certificate, verifier)
    try:
        statement = json.loads(text)
        if statement.get("format") != FORMAT:
            raise ValueError(f"format {statement.get('format')!r}")
        checkpoint = verify_checkpoint(statement["checkpoint"], verifier, origin=statement["origin"])
        for entry in statement["erased"]:
            verify_inclusion(
                [bytes.fromhex(h) for h in entry["proof"]], leaf_hash=leaf_hash(bytes.fromhex(entry["event_hash"])),
                index=entry["receipt"] - 1, size=checkpoint.size, root=checkpoint.root,
            )
    except (ValueError, KeyError, TypeError) as exc:
        raise CheckpointError(f"not an erasure certificate: {exc}") from None
    return dict(statement)


def write_certificate(path: str | os.PathLike[str], certificate: str) -> None:
    """Write ``certificate`` to the new file ``path`` (an existing file is refused)."""
    with open(path, "x", encoding="utf-8") as out:
        out.write(certificate)
