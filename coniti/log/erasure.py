"""Erasure in the log (FORMAT.md §3.4, §15): what a namespace held of a record or a metadata key,
and its content taken out of the frames and the projections. Used by
:meth:`~coniti.log.eventlog.EventLog.erase` and by a cluster node folding another node's receipt
(:func:`erase_for_receipt`); the receipts themselves are appended by
:class:`~coniti.log.append.Appends`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from coniti.errors import StoreCorrupted, namespace_text
from coniti.log.codec import ERASE, META, LogEvent, decode_envelope, erase_payload, is_erased
from coniti.log.keys import name_key, ns_bytes, ts_key
from coniti.log.projections import IndexView, Projections

__all__ = [
    "Held",
    "erase_for_receipt",
    "erase_values",
    "erase_versions",
    "erased_later",
    "held_keys",
    "held_records",
    "holds_value",
    "names_in",
]


_Versions = list[tuple[int, int, bytes]]
"""The versions of one record to erase: ``(put seq, end seq or 0, timestamp key)``, oldest first."""


Held = tuple[list[tuple[str, bytes, Any]], list[str]]
"""What :func:`held_records` and :func:`held_keys` give, their third fields told apart by the caller."""


def held_records(
    p: Projections, nsid: bytes, ids: Iterable[str]
) -> tuple[list[tuple[str, bytes, _Versions]], list[str]]:
    """``(found, missing)``: for each id the namespace ever held, ``(id, id key, versions)``; the
    ids it never held (a hashed key shared with another id does not count)."""
    found: list[tuple[str, bytes, _Versions]] = []
    missing: list[str] = []
    for record_id in ids:
        idk = name_key(record_id)
        versions = []
        for put_seq, end_seq in p.versions(nsid, idk):
            env = decode_envelope(p.frame(put_seq), put_seq)
            if env.id == record_id:
                assert env.timestamp is not None
                versions.append((put_seq, end_seq, ts_key(env.timestamp)))
        if versions:
            found.append((record_id, idk, versions))
        else:
            missing.append(record_id)
    return found, missing


def held_keys(
    p: Projections, nsid: bytes, keys: Iterable[str]
) -> tuple[list[tuple[str, bytes, list[int]]], list[str]]:
    """``(found, missing)``: for each metadata key the namespace ever held, ``(key, name key, seqs
    of its meta and erase events)``; the keys it never held. Each event the ``meta`` index names
    must be a write or erasure of a key of that name key, else :class:`StoreCorrupted`."""
    found: list[tuple[str, bytes, list[int]]] = []
    missing: list[str] = []
    for key in keys:
        mk = name_key(key)
        seqs = []
        for seq in p.meta_events(nsid, mk):
            env = decode_envelope(p.frame(seq), seq)
            if env.kind not in (META, ERASE) or env.key is None or name_key(env.key) != mk:
                raise StoreCorrupted(
                    f"metadata key {key!r}: its index names event {seq}, which is not a write of it"
                )
            if env.key == key:
                seqs.append(seq)
        if seqs:
            found.append((key, mk, seqs))
        else:
            missing.append(key)
    return found, missing


def names_in(p: Projections, nsid: bytes, of_meta: bool) -> list[str]:
    """Every record id (``of_meta``: metadata key) the namespace ever held, in key order, read from
    the envelopes of the events its ``ver`` (``meta``) entries name."""
    names: dict[str, None] = {}
    for _, seq in p.name_keys(nsid, of_meta):
        env = decode_envelope(p.frame(seq), seq)
        name = env.key if of_meta else env.id
        if name is None:
            raise StoreCorrupted(f"event {seq} is named by an index of namespace {namespace_text(env.namespace)} it does not fit")
        names[name] = None
    return list(names)


def erased_later(p: IndexView, nsid: bytes, mk: bytes, key: str, seq: int) -> bool:
    """Whether an erase event of metadata key ``key`` follows its meta event ``seq`` (what a meta
    frame without its payload needs to be read as erased rather than damaged)."""
    for later in p.meta_events(nsid, mk):
        if later <= seq:
            return False
        env = decode_envelope(p.frame(later), later)
        if env.kind == ERASE and env.key == key:
            return True
    return False


def holds_value(frame: bytes) -> bool:
    """Whether ``frame`` is a meta event whose value is not erased (an erase event holds none)."""
    return not is_erased(frame) and decode_envelope(frame).kind == META


def erase_versions(p: Projections, nsid: bytes, record_id: str, idk: bytes, versions: _Versions) -> None:
    """Erase every version of a record (``versions``): each put frame loses its payload and the
    projections drop the version from every read; so do the feedback events given to it (FORMAT
    §14). Its receipt is the caller's to append (:meth:`Appends.erase_record`)."""
    for put_seq, end_seq, tsk in versions:
        frame = p.frame(put_seq)
        if not is_erased(frame):
            p.replace_frame(put_seq, erase_payload(frame))
        p.unindex_version(nsid, put_seq, end_seq, tsk)
    for fb_seq in p.feedback_seqs(nsid, idk):
        frame = p.frame(fb_seq)
        if not is_erased(frame) and decode_envelope(frame, fb_seq).id == record_id:
            p.replace_frame(fb_seq, erase_payload(frame))


def erase_values(p: Projections, seqs: list[int]) -> None:
    """Erase every value of a metadata key (its meta events ``seqs``): each frame loses its payload.
    Its receipt is the caller's to append (:meth:`Appends.erase_key`)."""
    for seq in seqs:
        frame = p.frame(seq)
        if not is_erased(frame):
            p.replace_frame(seq, erase_payload(frame))


def erase_for_receipt(p: Projections, event: LogEvent) -> list[int]:
    """What an ``erase`` receipt ``event`` stands for, done to the log before the receipt is folded
    (cluster mode: a node folding another node's erasure erases its own copy the same way): every
    version of the record ``event.id`` (:func:`erase_versions`), or every value of the key
    ``event.key`` (:func:`erase_values`), of the receipt's namespace. Returns the sequence numbers
    of the events whose content it covers (erased now or before)."""
    nsid = p.nsid(ns_bytes(event.namespace))
    if nsid is None:
        return []
    if event.key is not None:
        found_keys = held_keys(p, nsid, [event.key])[0]
        seqs = [s for _, _, entries in found_keys for s in entries if s < event.seq]
        erase_values(p, seqs)
        return seqs
    assert event.id is not None
    covered: list[int] = []
    for record_id, idk, versions in held_records(p, nsid, [event.id])[0]:
        erase_versions(p, nsid, record_id, idk, versions)
        covered += [put_seq for put_seq, _, _ in versions]
        covered += [s for s in p.feedback_seqs(nsid, idk) if is_erased(p.frame(s))]
    return covered
