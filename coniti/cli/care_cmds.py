"""Care commands on the store itself: stats, verify, rebuild, compact, erase."""

from __future__ import annotations

from pathlib import Path

import click

from coniti.cli.context import CliError, common_options, ns_option, settings
from coniti.cli.parse import format_namespace

__all__ = ["compact", "erase", "rebuild", "stats", "verify"]


def _store_size(path: Path) -> int:
    """Bytes on disk of the files in a store directory."""
    return sum(p.stat().st_size for p in path.iterdir() if p.is_file())


@click.command()
@common_options
def stats() -> None:
    """Events, namespaces, records, size on disk, head sequence number and hash."""
    s = settings()
    path = s.store_path
    with s.open_store() as store:
        spaces = [
            (ns, store.count(store.count_request(None, ns)).count)
            for ns in sorted(store.namespaces())
        ]
        head, head_hash = store.head, store.head_hash
    size = _store_size(path)
    records = sum(n for _, n in spaces)
    if s.json:
        s.out.json(
            {
                "store": str(path),
                "events": head,
                "records": records,
                "namespaces": [{"namespace": list(ns), "records": n} for ns, n in spaces],
                "bytes": size,
                "head_seq": head,
                "head_hash": head_hash,
            }
        )
        return
    s.out.fields(
        [
            ("store", str(path)),
            ("events", head),
            ("records", f"{records} in {len(spaces)} namespaces"),
            ("size on disk", f"{size:,} bytes"),
            ("head", f"seq {head}, hash {head_hash}"),
        ]
    )
    s.out.table(["namespace", "records"], ([format_namespace(ns), n] for ns, n in spaces))


@click.command()
@common_options
def verify() -> None:
    """Check every event, the hash chain and the projections; exit 1 if a problem is found."""
    s = settings()
    with s.open_store() as store, s.out.progress("verifying"):
        report = store.verify()
    problems = list(report.problems)
    if s.json:
        s.out.json(
            {
                "events_checked": report.events_checked,
                "head_seq": report.head_seq,
                "head_hash": report.head_hash,
                "problems": problems,
            }
        )
    else:
        s.out.fields(
            [
                ("events checked", report.events_checked),
                ("head seq", report.head_seq),
                ("head hash", report.head_hash),
                ("problems", len(problems) or "none"),
            ]
        )
        for problem in problems:
            s.out.line(f"  {problem}")
    if problems:
        raise CliError(f"verify found {len(problems)} problem(s) in {s.store_path}")


@click.command()
@common_options
def rebuild() -> None:
    """Recompute every projection from the log alone."""
    s = settings()
    with s.open_store("write") as store, s.out.progress("rebuilding projections"):
        folded = store.rebuild()
    if s.json:
        s.out.json({"events": folded})
    else:
        s.out.line(f"rebuilt the projections from {folded} events")


@click.command()
@common_options
def compact() -> None:
    """Rewrite the store without free pages, so no byte of erased content stays in its files.

    Needs the store alone: it fails (exit 1) while another process has it open.
    """
    s = settings()
    with s.open_store("write") as store, s.out.progress("compacting"):
        before, after = store.compact()
    if s.json:
        s.out.json({"bytes_before": before, "bytes_after": after})
    else:
        s.out.line(f"compacted {s.store_path}: {before:,} bytes -> {after:,} bytes")


@click.command()
@click.argument("ids", nargs=-1, metavar="[ID]...")
@click.option("--meta", "keys", multiple=True, metavar="KEY",
              help="Erase every value of metadata KEY instead (repeatable).")
@click.option("--whole-namespace", is_flag=True,
              help="Erase every record and every metadata key of the namespace.")
@click.option("--certificate", "certificate", default=None, metavar="FILE",
              help="Also compact the store and write a signed erasure certificate to FILE (record IDs; needs --key).")
@click.option("--key", "key_file", default=None, metavar="FILE", help="The signer key file of --certificate (from keygen).")
@ns_option("Namespace of the records.")
@common_options
def erase(
    ids: tuple[str, ...], keys: tuple[str, ...], whole_namespace: bool, certificate: str | None,
    key_file: str | None, namespace: tuple[str, ...],
) -> None:
    """Erase the content of every version of records ID... from the whole history (for privacy
    requests); with --meta KEY the values of metadata keys, with --whole-namespace every record and
    key of the namespace. --reason is required and kept in each erase event (the receipt). Exit 1 if
    an id or key was never there.

    The hash chain still verifies. Run 'coniti compact' afterwards to drop the freed bytes, or give
    --certificate FILE --key KEY: the store is then compacted, its files scanned for the erased
    content, and FILE gets a signed statement (the ids and versions erased, each erase event with
    its inclusion proof against a signed checkpoint, the scan's result; see coniti.certificate).
    """
    s = settings()
    if not s.reason:
        raise click.UsageError("erase needs --reason: it is kept in the erase event")
    if whole_namespace and (ids or keys):
        raise click.UsageError("--whole-namespace erases everything in the namespace: give no ID or --meta with it")
    if ids and keys:
        raise click.UsageError("give record IDs or --meta keys, not both (run erase once for each)")
    if not (ids or keys or whole_namespace):
        raise click.UsageError("erase needs record IDs, --meta KEY or --whole-namespace")
    if certificate is not None:
        _erase_certified(list(ids), namespace, certificate, key_file, bool(keys or whole_namespace))
        return
    with s.open_store("write") as store:
        if whole_namespace:
            result = store.erase_namespace(namespace, reason=s.reason)
        elif keys:
            result = store.erase_meta(list(keys), namespace=namespace, reason=s.reason)
        else:
            result = store.erase(list(ids), namespace=namespace, reason=s.reason)
    if s.json:
        s.out.json(result.to_dict())
    else:
        names = [*result.erased, *(f"metadata key {key}" for key in result.erased_keys)]
        for name, seq in zip(names, result.receipts, strict=True):
            s.out.line(f"erased {name} (receipt: event {seq})")
        if whole_namespace and not names:
            s.out.line(f"nothing left to erase in {format_namespace(namespace)}")
    missing = [*result.missing, *(f"metadata key {key}" for key in result.missing_keys)]
    if missing:
        raise CliError(f"never in {format_namespace(namespace)}: {', '.join(missing)}")


def _erase_certified(
    ids: list[str], namespace: tuple[str, ...], certificate: str, key_file: str | None, other: bool
) -> None:
    """``erase ID... --certificate FILE --key KEY`` (:func:`coniti.certificate.erase_with_certificate`)."""
    from coniti.certificate import erase_with_certificate, verify_certificate, write_certificate
    from coniti.checkpoint import read_signer_key, verifier_key

    s = settings()
    if other:
        raise click.UsageError("--certificate covers record IDs: give no --meta or --whole-namespace with it")
    if key_file is None:
        raise click.UsageError("--certificate needs --key FILE (the signer key from coniti keygen)")
    if Path(certificate).exists():
        raise CliError(f"certificate file {certificate} already exists: choose a new file")
    signer = read_signer_key(key_file)
    with s.open_store("write") as store:
        note = erase_with_certificate(store, ids, namespace=namespace, reason=s.reason or "", signer=signer)
    write_certificate(certificate, note)
    statement = verify_certificate(note, verifier_key(signer))
    residue = statement["compaction"]["residue"]
    if s.json:
        s.out.json(statement)
    else:
        for entry in statement["erased"]:
            s.out.line(f"erased {entry['id']} (versions {entry['versions']}, receipt: event {entry['receipt']})")
        s.out.line(f"certificate written to {certificate}")
    if residue:
        raise CliError(f"erased content still found in the store's files for: {', '.join(residue)}")
