"""Proof commands: keygen, checkpoint, prove, verify-checkpoint, fork, revert, receipt (the Merkle tree over the log,
:mod:`coniti.impl.proving`; keys and notes, :mod:`coniti.checkpoint`). Each is a thin call of the
library; ``--json`` prints one object."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from coniti.cli.context import common_options, ns_option, settings
from coniti.cli.parse import format_namespace
from coniti.proofs import leaf_hash

__all__ = ["checkpoint", "fork", "keygen", "prove", "read_note", "receipt", "revert", "verify_checkpoint"]


def read_note(file: str) -> str:
    """The signed note in ``file`` (``-``: standard input)."""
    if file == "-":
        return sys.stdin.read()
    try:
        return Path(file).read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise click.UsageError(f"cannot read checkpoint file {file}: {getattr(exc, 'strerror', None) or exc}") from None


def _verifier(value: str) -> str:
    """A verifier key given as itself or as a file holding it on its first line."""
    path = Path(value)
    if "+" not in value and path.is_file():
        return path.read_text("utf-8").split("\n", 1)[0].strip()
    return value


@click.command()
@click.argument("name")
@click.option("--key", "key_file", required=True, metavar="FILE",
              help="Where to write the secret signer key (a new file, mode 0600).")
@common_options
def keygen(name: str, key_file: str) -> None:
    """Make an Ed25519 key NAME for signing checkpoints: the signer key goes to --key FILE (mode
    0600), the verifier key (public; give it to whoever checks the checkpoints) is printed."""
    from coniti.checkpoint import write_signer_key

    s = settings()
    verifier = write_signer_key(key_file, name)
    if s.json:
        s.out.json({"name": name, "key_file": key_file, "verifier": verifier})
    else:
        s.out.line(verifier)


@click.command()
@click.option("--key", "key_file", required=True, metavar="FILE", help="The signer key file (from keygen).")
@click.option("--origin", default=None, help="The checkpoint's origin line (default: the store's).")
@common_options
def checkpoint(key_file: str, origin: str | None) -> None:
    """Sign the Merkle tree at the head as a C2SP checkpoint and keep it in the log (an event
    stamped with --actor and --reason); print the signed note."""
    from coniti.checkpoint import Checkpoint, read_signer_key

    s = settings()
    signer = read_signer_key(key_file)
    with s.open_store("write") as store, store.audit(reason=s.reason):
        note = store.checkpoint(signer, origin=origin)
        seq = store.head
    head = Checkpoint.parse(note.split("\n\n", 1)[0] + "\n")
    if s.json:
        s.out.json({"seq": seq, "origin": head.origin, "size": head.size, "root": head.root.hex(), "note": note})
    else:
        s.out.line(note.rstrip("\n"))


@click.command()
@click.argument("seq", type=int, required=False)
@click.option("--size", type=int, default=None, help="The tree size to prove in (default: the head).")
@click.option("--consistency", nargs=2, type=int, default=None, metavar="A B",
              help="Prove that the tree of size B extends the tree of size A instead.")
@common_options
def prove(seq: int | None, size: int | None, consistency: tuple[int, int] | None) -> None:
    """Print the RFC 9162 inclusion proof of event SEQ in the tree of --size events (default: the
    head), or with --consistency A B the proof that the tree of B events extends the one of A."""
    s = settings()
    if (seq is None) == (consistency is None):
        raise click.UsageError("give SEQ, or --consistency A B")
    if consistency is not None and size is not None:
        raise click.UsageError("--size goes with SEQ; --consistency takes both sizes")
    with s.open_store() as store:
        if consistency is not None:
            old, new = consistency
            proof = store.prove_consistency(old, new)
            document = {
                "old_size": old, "new_size": new, "old_root": store.root(old)[1].hex(),
                "new_root": store.root(new)[1].hex(), "proof": [h.hex() for h in proof],
            }  # fmt: skip
        else:
            assert seq is not None
            proof = store.prove_inclusion(seq, size)
            tree_size, root = store.root(size)
            event_hash = store.event_hash(seq)
            document = {
                "seq": seq, "index": seq - 1, "size": tree_size, "root": root.hex(), "event_hash": event_hash,
                "leaf_hash": leaf_hash(bytes.fromhex(event_hash)).hex(), "proof": [h.hex() for h in proof],
            }  # fmt: skip
    if s.json:
        s.out.json(document)
        return
    s.out.fields([(key, value) for key, value in document.items() if key != "proof"])
    for number, value in enumerate(proof):
        s.out.line(f"  {number}: {value.hex()}")


@click.command(name="verify-checkpoint")
@click.argument("file", metavar="FILE")
@click.option("--verifier", required=True, metavar="KEY", help="The verifier key (or a file holding it).")
@click.option("--origin", default=None, help="The origin it must be for (default: the store's).")
@common_options
def verify_checkpoint(file: str, verifier: str, origin: str | None) -> None:
    """Check the signed checkpoint in FILE (- for standard input): signed by --verifier, for the
    store's origin, and this store's history extends it. Exit 1 with the reason otherwise."""
    s = settings()
    note = read_note(file)
    with s.open_store() as store:
        head = store.verify_checkpoint(note, _verifier(verifier), origin=origin)
        events = store.head
    if s.json:
        s.out.json({"ok": True, "origin": head.origin, "size": head.size, "root": head.root.hex(), "head": events})
    else:
        s.out.line(f"ok: checkpoint of {head.origin} at size {head.size}; this store ({events} events) extends it")


@click.command()
@click.argument("dest", metavar="DEST")
@click.option("--at", "at", type=int, default=None, help="The last event the fork keeps (default: the head).")
@common_options
def fork(dest: str, at: int | None) -> None:
    """Make a new store at DEST (new or empty) whose log is this store's events 1 to --at, frame for
    frame (the same hashes and Merkle root at that size); the two then diverge."""
    s = settings()
    with s.open_store() as store:
        with store.fork(dest, at=at, durability="nosync") as forked:
            forked.sync()
            size, root = forked.root()
        parent_root = store.root(size)[1]
    if s.json:
        s.out.json({"store": dest, "at": size, "root": root.hex(), "same_root": root == parent_root})
    else:
        s.out.line(f"forked {s.store_path} at event {size} into {dest} (root {root.hex()})")


@click.command()
@click.option("--to", "to", type=int, required=True, help="The event whose state the namespace returns to.")
@ns_option("The namespace to revert.")
@common_options
def revert(to: int, namespace: tuple[str, ...]) -> None:
    """Make the records of the namespace what they were right after event --to, by appending the
    compensating writes (deletes, and puts of the old content) in one atomic write stamped with
    --reason (required); history is untouched and metadata keys keep their values."""
    from coniti.revert import revert as revert_to

    s = settings()
    if not s.reason:
        raise click.UsageError("revert needs --reason: it is kept in every event it writes")
    with s.open_store("write") as store:
        result = revert_to(store, to, namespace, s.reason)
    written = [] if result is None else sorted(set(result.versions) - set(result.unchanged))
    deleted = [] if result is None else result.deleted
    seqs = [] if result is None else result.seqs
    if s.json:
        s.out.json({"to": to, "namespace": list(namespace), "written": written, "deleted": deleted, "seqs": seqs})
    elif result is None:
        s.out.line(f"nothing to revert: {format_namespace(namespace)} is as it was after event {to}")
    else:
        s.out.line(
            f"reverted {format_namespace(namespace)} to event {to}: restored {len(written)}, "
            f"deleted {len(deleted)} (events {', '.join(map(str, seqs))})"
        )


@click.command()
@click.argument("seq", type=int)
@click.option("--query", "text", default=None, metavar="TEXT",
              help="The query's text, for a receipt that kept only its digest (asked as a plain string).")
@common_options
def receipt(seq: int, text: str | None) -> None:
    """Show the recall receipt kept by event SEQ (engine.ask(..., receipt=True)) and say whether
    it replays: the same query asked of memory at the receipt's point gives the same hits, scores
    bit for bit. A receipt that kept only the query's digest replays with --query. Exit 1 when it
    does not replay."""
    from coniti.cli.context import CliError
    from coniti.receipts import read_receipt

    s = settings()
    with s.open_store() as store:
        kept = read_receipt(store, seq)
        replays: bool | None = None
        if kept.query is not None or text is not None:
            with s.open_engine(store) as engine:
                replays = engine.replay(seq, text)[1]
    document = {"seq": seq, **kept.to_value(), "replays": replays}
    if s.json:
        s.out.json(document)
    else:
        s.out.fields([
            ("receipt", f"event {seq}, read at event {kept.point}"),
            ("query", kept.query_digest if kept.query is None else kept.query.get("text")),
            ("strategy", kept.strategy), ("k", kept.k), ("embedder", kept.embedder),
            ("replays", "not checked (give --query)" if replays is None else ("yes" if replays else "NO")),
        ])  # fmt: skip
        for ns, rid, version, score in kept.hits:
            s.out.line(f"  {score:.6f}  {format_namespace(ns)}  {rid}  (version {version})")
    if replays is False:
        raise CliError(f"receipt {seq} does not replay: the memory at event {kept.point} answers otherwise")
