"""The rows a get, scan or count returns, read from the projections of one transaction and checked;
which versions have expired.

Nothing is returned unchecked (``log/FORMAT.md`` §5.1): from layout 4 on each index entry's seal and
its put's payload CRC are checked, before it by the other index and the payload's digest. The hot
loops (:meth:`RecordReads.get_rows`, :meth:`RecordReads._sealed_scan`) open the sealed values of
:mod:`coniti.log.layout` themselves, with its constants, instead of a call per entry.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from coniti.errors import StoreCorrupted
from coniti.log.codec import (
    CLEAR,
    DELETE,
    ERASE,
    PUT,
    decode_envelope,
    read_content,
    read_put,
    recorded_at,
)
from coniti.log.keys import (
    INLINE_NAME,
    NSID_LEN,
    SEQ_LEN,
    Namespace,
    damaged,
    decode_ts_key,
    inline_name,
    inv_seq_key,
    name_key,
    seq_from_inv,
    seq_from_key,
    seq_key,
    ts_key,
    unpack_position,
)
from coniti.log.layout import (
    INLINE,
    KEY_NTS,
    LIVE,
    PAST_KEY,
    PC,
    POSITION,
    SEAL,
    SK,
    TS_ZERO,
    TSK,
    TV_END,
    VER_LENGTHS,
    cnt_last,
    opened,
    scan_start,
    scan_stop,
    sound_landing,
    split_position,
    time_key,
    unpack_crc,
    unpack_pc,
    unseal,
    ver_key,
)
from coniti.log.projections import IndexView, Row

__all__ = ["RecordReads"]

_tuple_new = tuple.__new__


class RecordReads(IndexView):
    """The reads of records: rows by id (:meth:`get_rows`), in time order (:meth:`scan_rows`,
    :meth:`scan_as_of`) and counted (:meth:`count_range`), now or as of an event, each checked,
    and the expiry they judge (:meth:`expiring`, :meth:`hidden`, :meth:`expired`); the lookups are
    :class:`IndexView`'s. A read or write transaction; it writes nothing."""

    __slots__ = ()

    def get_rows(
        self,
        namespace: Namespace,
        nsid: bytes,
        ids: Sequence[str],
        as_of: int | None = None,
        now: float | None = None,
    ) -> tuple[list[Row], list[str]]:
        """The rows of the records ``ids`` of ``namespace`` (its id ``nsid``) visible now (or right
        after event ``as_of``), in the order of ``ids``, and the ids that have none. In a namespace
        holding expiring versions (one lookup of its marker), expiry is judged by ``now`` when given
        (a write's recorded time), else by :meth:`clock`; elsewhere a get reads nothing more. Each
        row is checked (:meth:`_sealed_row`, or :meth:`_row` in an older layout, its entry's seal
        first); a newest version that is not visible because an event ended it is checked to be
        ended by that event. In layout 4 the expiry is the ``ver`` value's own (no marker lookup),
        and the clock is read only when a version expires."""
        rows: list[Row] = []
        missing: list[str] = []
        names = list(namespace)
        sealed = self.d.sealed
        if not sealed:  # before layout 4 expiry is judged in a namespace with the marker only
            if not self.expiring(nsid):
                now = None
            elif now is None:
                now = self.clock(as_of)
        cur = self._ver_cur
        if cur is None:  # _vcur() written out
            cur = self._ver_cur = self.txn.cursor(db=self.d.ver)
        crc32, ver_seed = self.d.seals.crc, self.d.seals.ver
        for record_id in ids:
            idk = name_key(record_id)
            prefix = nsid + idk
            row = None
            probe = prefix if as_of is None else prefix + inv_seq_key(as_of)
            landed = cur.set_range(probe)
            key = cur.key() if landed else b""
            # As of an event, a key of the record before the probe is a later version: only a
            # misdirected lookup lands there (the miss path below refuses it).
            if landed and len(key) == len(prefix) + SEQ_LEN and key.startswith(prefix) and (
                as_of is None or key >= probe
            ):
                value = cur.value()
                end = value[:SEQ_LEN]
                if end == LIVE or (as_of is not None and seq_from_key(end) > as_of):
                    seq = seq_from_inv(key[-SEQ_LEN:])
                    sk = seq_key(seq)
                    if not sealed:
                        row = self._row(names, nsid, sk, value[SEQ_LEN:TV_END], idk, record_id, end, False, value[TV_END:], now)
                    else:
                        n = len(value) - 2 * SEAL  # the end of the value before P C
                        if n + 2 * SEAL not in VER_LENGTHS:
                            raise damaged(names, idk, record_id, 0, "its ver entry is damaged")
                        crc, seal = unpack_pc(value, n)
                        if seal != crc32(key + value[: n + SEAL], ver_seed):  # opened(), written out
                            raise damaged(names, idk, record_id, 0, "its ver entry is damaged")
                        xk = value[TV_END:n]
                        if xk and now is None:
                            now = self.clock(as_of)
                        row = self._sealed_row(names, sk, seq, value[SEQ_LEN:TV_END], idk, record_id, crc, xk, now)
                elif sealed and not self._genuine_ver(key, value):
                    raise damaged(names, idk, record_id, 0, "its ver entry is damaged")
                elif not sound_landing(cur, probe, True, self._genuine_ver):
                    # An ended version answers "missing" only if the lookup was not sent past
                    # a newer one (a re-put after a delete): the key before must precede the probe.
                    raise damaged(names, idk, record_id, 0, "the ver index is damaged near it")
                elif as_of is None:
                    self._check_end(names, idk, record_id, end)
            elif not self._ver_landing_sound(cur, probe, landed):
                raise damaged(names, idk, record_id, 0, "the ver index is damaged near it")
            if row is None:
                missing.append(record_id)
            else:
                rows.append(row)
        return rows, missing

    def scan_rows(
        self,
        namespace: Namespace,
        nsid: bytes,
        start: float | None,
        end: float | None,
        after: tuple[float, int] | None,
        limit: int | None,
        as_of: int | None = None,
    ) -> tuple[list[Row], tuple[float, int] | None]:
        """The rows of ``namespace`` (its id ``nsid``) visible now (or right after event ``as_of``)
        in (timestamp, write order) with ``start <= timestamp < end``, strictly after the position
        ``after`` = ``(timestamp, seq)``, at most ``limit``; plus the position of the last row when
        more may follow. Now: a walk of ``time`` decoding each entry as it goes (a page counts the
        entries it walks); as of an event: :meth:`scan_as_of`. In a namespace holding expiring
        versions, expired ones are left out and a page holds exactly ``limit`` rows when more
        follow. Each row is checked (:meth:`_sealed_row`, or :meth:`_row` in an older layout)."""
        row_of = self._row
        names = list(namespace)
        now = self.reader_now(nsid, as_of)
        if now is not None:
            return self._scan_expiring(names, nsid, start, end, after, limit, as_of, now)
        if self.d.sealed and as_of is None:
            return self._sealed_scan(names, nsid, start, end, after, limit)
        if as_of is not None:
            entries, more = self._tver_walk(nsid, start, end, after, limit, as_of)
            rows = []
            for seq, tsk, idk, ended, crc in entries:
                if self.d.sealed:
                    row = self._sealed_row(names, seq_key(seq), seq, tsk, idk, None, unpack_crc(crc)[0], b"", None)
                else:
                    row = row_of(names, nsid, seq_key(seq), tsk, idk, None, ended, True)
                if row is not None:
                    rows.append(row)
            return rows, more
        rows = []
        last = b""
        for taken, (key, idk, _) in enumerate(self._time_walk(names, nsid, start, end, after)):
            if taken == limit:
                return rows, split_position(last[POSITION])
            last = key
            row = row_of(names, nsid, key[SK], key[TSK], idk, None, LIVE, True)
            if row is not None:
                rows.append(row)
        return rows, None

    def _sealed_scan(
        self,
        names: list[str],
        nsid: bytes,
        start: float | None,
        end: float | None,
        after: tuple[float, int] | None,
        limit: int | None,
    ) -> tuple[list[Row], tuple[float, int] | None]:
        """:meth:`scan_rows` now, in a namespace without expiring versions of a layout-4 store: a
        walk of ``time`` checked as :meth:`_time_walk` checks it, each row checked as
        :meth:`_sealed_row` checks it (both written out here, the hot loop of a scan; an entry with
        a hashed id key or a timestamp not above 0.0 takes :meth:`_sealed_row` itself)."""
        cur = self.txn.cursor(db=self.d.time)
        first = scan_start(nsid, start, after)
        landed = cur.set_range(first)
        if not sound_landing(cur, first, landed, self._genuine_time_now):
            raise damaged(names, b"", None, 0, "the time index is out of order where the scan begins")
        rows: list[Row] = []
        if not landed:
            return rows, None
        stop = scan_stop(nsid, end)
        last = first[:-1]  # sorts before every key the walk may return
        d = self.d
        crc32, time_seed = d.seals.crc, d.seals.time
        get, log_db = self.txn.get, d.log
        row_of = self._sealed_row
        append = rows.append
        for taken, (key, value) in enumerate(cur.iternext(keys=True, values=True)):
            if key >= stop:
                if not self._genuine_time(key, value, False):
                    raise damaged(names, b"", None, 0, "the time index is damaged where the scan ends")
                break
            n = len(value) - PC  # the end of the value before P C
            if len(key) != KEY_NTS or key <= last or n < SEAL:
                raise damaged(names, b"", None, 0, "the time index is damaged")
            crc, seal = unpack_pc(value, n)
            if seal != crc32(key + value[: n + SEAL], time_seed):  # opened(), written out
                raise damaged(names, b"", None, 0, "the time index is damaged")
            if taken == limit:
                return rows, split_position(last[POSITION])
            last = key
            idk = value[:n]
            flipped, seq = unpack_position(key, NSID_LEN)
            if not flipped < 0.0 or idk[:1] != INLINE:  # a timestamp not above 0.0 or a hashed id
                row = row_of(names, key[SK], seq, key[TSK], idk, None, crc, b"", None)
                if row is not None:
                    append(row)
                continue
            frame = get(key[SK], None, log_db)  # positional: cheaper than the keyword db=
            if frame is None:
                raise damaged(names, idk, None, seq, "the index names an event the log lacks")
            try:
                data = read_content(frame, seq, crc, crc32)
                if data is not None:  # else erased
                    rid = idk[INLINE_NAME].decode("utf-8", "surrogatepass")  # inline_name(idk)
                    append(_tuple_new(Row, (rid, -flipped, data, seq, None)))
            except (StoreCorrupted, KeyError, TypeError, AttributeError, ValueError) as exc:
                raise damaged(names, idk, None, seq, str(exc)) from exc
        return rows, None

    def _scan_expiring(
        self,
        names: list[str],
        nsid: bytes,
        start: float | None,
        end: float | None,
        after: tuple[float, int] | None,
        limit: int | None,
        as_of: int | None,
        now: float,
    ) -> tuple[list[Row], tuple[float, int] | None]:
        """:meth:`scan_rows` where expiry applies: rows not expired at ``now``, exactly ``limit``
        per page (the walk reads one row past a full page to know whether more follow)."""
        if as_of is not None:
            entries, _ = self._tver_walk(nsid, start, end, after, None, as_of)
            walk: Iterator[tuple[bytes, bytes, bytes, bytes, bytes]] = (
                (seq_key(seq), tsk, idk, ended, crc) for seq, tsk, idk, ended, crc in entries
            )
        else:
            walk = (
                (key[SK], key[TSK], idk, LIVE, crc)
                for key, idk, crc in self._time_walk(names, nsid, start, end, after)
            )
        rows: list[Row] = []
        last: tuple[bytes, bytes] | None = None
        sealed = self.d.sealed
        for sk, tsk, idk, ended, crc in walk:
            if sealed:
                seq = seq_from_key(sk)
                xk = self._expiry_key(names, nsid, idk, seq, ended, tsk)
                row = self._sealed_row(names, sk, seq, tsk, idk, None, unpack_crc(crc)[0], xk, now)
            else:
                row = self._row(names, nsid, sk, tsk, idk, None, ended, True, now=now)
            if row is None:
                continue
            if limit is not None and len(rows) == limit:
                assert last is not None
                return rows, split_position(last[0] + last[1])
            rows.append(row)
            last = (tsk, sk)
        return rows, None

    def _time_walk(
        self, names: list[str], nsid: bytes, start: float | None, end: float | None, after: tuple[float, int] | None
    ) -> Iterator[tuple[bytes, bytes, bytes]]:
        """``(key N T S, id key, payload CRC)`` of the live entries of ``time`` of namespace
        ``names`` (id ``nsid``) in range, checked as they go (the key before the start, strictly
        ascending keys of the right length, each value's seal in layout 4, the key that ends the
        walk); else :class:`StoreCorrupted`. The CRC is b"" in an older layout (none kept)."""
        cur = self.txn.cursor(db=self.d.time)
        first = scan_start(nsid, start, after)
        landed = cur.set_range(first)
        if not sound_landing(cur, first, landed, self._genuine_time_now):
            raise damaged(names, b"", None, 0, "the time index is out of order where the scan begins")
        if not landed:
            return
        stop = scan_stop(nsid, end)
        last = first[:-1]  # sorts before every key the walk may return
        sealed = self.d.sealed
        seals = self.d.seals
        crc32 = seals.crc
        for key, value in cur.iternext(keys=True, values=True):
            if key >= stop:
                if not self._genuine_time(key, value, False):
                    raise damaged(names, b"", None, 0, "the time index is damaged where the scan ends")
                return
            if len(key) != KEY_NTS or key <= last:
                raise damaged(names, b"", None, 0, "the time index is out of order")
            last = key
            if not sealed:
                yield key, value, b""
                continue
            n = len(value) - SEAL
            if n < 2 * SEAL or unpack_crc(value, n)[0] != crc32(key + value[:n], seals.time):  # opened()
                raise damaged(names, b"", None, seq_from_key(key[SK]), "its time entry is damaged")
            yield key, value[: n - SEAL], value[n - SEAL : n]

    def scan_as_of(
        self,
        nsid: bytes,
        start: float | None,
        end: float | None,
        after: tuple[float, int] | None,
        limit: int | None,
        as_of: int,
        confirm: bool = False,
    ) -> tuple[list[tuple[int, bytes, bytes, bytes]], tuple[float, int] | None]:
        """Records visible right after event ``as_of`` in (timestamp, write order) with ``start <=
        timestamp < end``, strictly after position ``after`` = ``(timestamp, seq)``, at most
        ``limit``, as ``(put seq, timestamp key, record id key, end)`` (``end`` as in ``tver``);
        plus the position of the last one returned when more follow (else None). A walk of
        ``tver``, stopped by the namespace's scan bound as of that event. ``confirm``: every entry
        walked, returned or not, must be confirmed by ``ver`` (for a caller that returns no row
        of its own to check, such as a count; from layout 4 on each entry's seal is checked instead,
        always); else :class:`StoreCorrupted`."""
        entries, more = self._tver_walk(nsid, start, end, after, limit, as_of, confirm)
        return [entry[:4] for entry in entries], more

    def _tver_walk(
        self,
        nsid: bytes,
        start: float | None,
        end: float | None,
        after: tuple[float, int] | None,
        limit: int | None,
        as_of: int,
        confirm: bool = False,
    ) -> tuple[list[tuple[int, bytes, bytes, bytes, bytes]], tuple[float, int] | None]:
        """:meth:`scan_as_of` with each entry's payload CRC (b"" before layout 4) last."""
        out: list[tuple[int, bytes, bytes, bytes, bytes]] = []
        sealed = self.d.sealed
        seals = self.d.seals
        last_key = b""
        bound = self.last_position(nsid, as_of)
        if bound == b"":
            return out, None
        cur = self.txn.cursor(db=self.d.tver)
        first = scan_start(nsid, start, after)
        landed = cur.set_range(first)
        if not sound_landing(cur, first, landed, self._genuine_tver):
            raise StoreCorrupted("the tver index is out of order where a scan begins (damaged store)")
        if not landed:
            return out, None
        stop = scan_stop(nsid, end)
        last = first[:-1]  # sorts before every key the walk may return
        for key, value in cur.iternext(keys=True, values=True):
            if key >= stop:
                if not self._genuine_tver(key, value):
                    raise StoreCorrupted("the tver index is damaged where a scan ends")
                return out, None
            if len(key) != KEY_NTS or key <= last:
                raise StoreCorrupted("the tver index is out of order (damaged store)")
            last = key
            if bound is not None and key[POSITION] > bound:
                return out, None
            if sealed:
                body = opened(key, value, seals.tver, seals.crc)
                if body is None or len(body) < SEQ_LEN + 2 + SEAL:
                    raise StoreCorrupted(
                        f"the tver entry of event {seq_from_key(key[SK])} in namespace {self.label(nsid)} is damaged"
                    )
                idk, crc = body[SEQ_LEN:-SEAL], body[-SEAL:]
            elif confirm and not self._genuine_tver(key, value):
                raise StoreCorrupted("the tver index disagrees with the ver index (damaged store)")
            else:
                idk, crc = value[SEQ_LEN:], b""
            put_seq = seq_from_key(key[SK])
            ended = value[:SEQ_LEN]
            if put_seq > as_of or (ended != LIVE and seq_from_key(ended) <= as_of):
                continue
            if limit is not None and len(out) == limit:
                return out, split_position(last_key[POSITION])
            out.append((put_seq, key[TSK], idk, ended, crc))
            last_key = key
        return out, None

    def last_position(self, nsid: bytes, as_of: int) -> bytes | None:
        """The last ``T S`` that ``time`` held for the namespace right after event ``as_of`` (b"" if
        it held none): no version visible then sorts after it. None for a store in layout format 1
        (its 8-byte ``cnt`` values do not say): unbounded."""
        entry = self._cnt_entry(nsid, as_of)
        return b"" if entry is None else cnt_last(entry)

    def count_range(
        self, nsid: bytes, start: float | None, end: float | None, as_of: int | None = None
    ) -> int:
        """Records visible now (or right after event ``as_of``) with ``start <= timestamp < end``
        (unbounded where None); expired versions are not counted."""
        now = self.reader_now(nsid, as_of)
        if now is not None:
            hidden = self.hidden(nsid, now, as_of)
            if start is None and end is None:
                return self.count(nsid, as_of) - len(hidden)
            if as_of is not None:
                entries = self.scan_as_of(nsid, start, end, None, None, as_of, confirm=True)[0]
                return sum(1 for seq, *_ in entries if seq not in hidden)
            return sum(1 for key in self._confirmed_time(nsid, start, end) if seq_from_key(key[SK]) not in hidden)
        if start is None and end is None:
            return self.count(nsid, as_of)
        if as_of is not None:
            return len(self.scan_as_of(nsid, start, end, None, None, as_of, confirm=True)[0])
        return sum(1 for _ in self._confirmed_time(nsid, start, end))

    def _confirmed_time(self, nsid: bytes, start: float | None, end: float | None) -> Iterator[bytes]:
        """The keys of the live entries of ``time`` of the namespace in range, each confirmed by
        its ``ver`` entry (the walk checked as :meth:`_time_walk` checks it); else
        :class:`StoreCorrupted` naming the namespace."""
        names = self._names(nsid)
        if self.d.sealed:  # each entry's seal is checked by the walk
            for key, _, _ in self._time_walk(names, nsid, start, end, None):
                yield key
            return
        genuine = self._genuine_time_now
        for key, idk, _ in self._time_walk(names, nsid, start, end, None):
            if not genuine(key, idk):
                raise damaged(names, idk, None, seq_from_key(key[SK]), "the time and ver indexes disagree")
            yield key

    def _row(
        self,
        names: list[str],
        nsid: bytes,
        sk: bytes,
        tsk: bytes,
        idk: bytes,
        record_id: str | None,
        end: bytes,
        via_time: bool,
        xk: bytes = b"",
        now: float | None = None,
    ) -> Row | None:
        """(A store of layout 3 or older; see :meth:`_sealed_row` for layout 4.) The row of the
        version put by the event of log key ``sk`` that an index entry of
        namespace ``names`` (id ``nsid``) names with timestamp key ``tsk``, id key ``idk`` and end
        ``end``, or None when its content was erased, it expired at ``now``, or (``record_id``
        given) it is another id's sharing a hashed key. ``xk``: the expiry key that follows ``tsk``
        in the version's ``ver`` value (b"": none), given when found through ``ver``; found through
        ``time`` or ``tver`` it is read from the ``ver`` entry. ``now``: the clock expiry is judged
        by, given for a namespace holding expiring versions (its marker ``exv[N]``).

        Nothing is returned unchecked (``log/FORMAT.md`` §5.1): the frame must be that put with a
        payload matching its digest (:func:`read_content`), and the other index must agree: found
        through ``ver`` (``via_time`` False), the version's ``tver`` entry must hold ``end`` and
        ``idk``; found through ``time`` or ``tver``, its ``ver`` entry must hold ``end`` and
        ``tsk``. The id and timestamp then come from those keys; for a hashed id key, the
        timestamp key of 0.0, an expiring version or a namespace holding any, from the envelope,
        which must match them and whose expiry ``x`` must be the ``ver`` value's (:func:`read_put`).
        Raises :class:`StoreCorrupted` naming the namespace and the record."""
        txn = self.txn
        d = self.d
        frame = txn.get(sk, db=d.log)
        seq = seq_from_key(sk)
        if frame is None:
            raise damaged(names, idk, record_id, seq, "the index names an event the log lacks")
        found = None
        if via_time:
            found = txn.get(ver_key(nsid, idk, seq), db=d.ver)
            if found is not None:
                xk = found[TV_END:]
        expires_at = None
        try:
            if not xk and now is None and tsk != TS_ZERO and idk[:1] == INLINE:
                # id and timestamp from the keys, which the other index confirms below
                data = read_content(frame, seq)
                rid = record_id if record_id is not None else inline_name(idk)
                ts = decode_ts_key(tsk)
            else:
                env, data = read_put(frame, seq)
                rid, ts = env["i"], env["ts"]
                if env["n"] != names or name_key(rid) != idk or ts_key(ts) != tsk:
                    raise StoreCorrupted(f"event {seq} is not the put the index entry names")
                expires_at = env.get("x")
                if data is not None and xk != (b"" if expires_at is None else ts_key(expires_at)):
                    raise StoreCorrupted(f"the expiry in its ver entry is not event {seq}'s")
        except (StoreCorrupted, KeyError, TypeError, AttributeError, ValueError) as exc:
            raise damaged(names, idk, record_id, seq, str(exc)) from exc
        tk = time_key(nsid, tsk, sk)
        if data is None:
            if txn.get(tk, db=d.tver) is not None:
                raise damaged(names, idk, record_id, seq, "its content is gone but not erased")
            return None
        if via_time:
            agrees = found is not None and found[:TV_END] == end + tsk
        else:
            agrees = txn.get(tk, db=d.tver) == end + idk
        if not agrees:
            raise damaged(names, idk, record_id, seq, "the ver and tver indexes disagree")
        if record_id is not None and rid != record_id:
            return None
        if expires_at is not None:
            if now is None:
                raise damaged(names, idk, record_id, seq, "it expires but its namespace has no expiry marker")
            if expires_at <= now:
                return None
        return _tuple_new(Row, (rid, ts, data, seq, expires_at))

    def _sealed_row(
        self,
        names: list[str],
        sk: bytes,
        seq: int,
        tsk: bytes,
        idk: bytes,
        record_id: str | None,
        crc: int,
        xk: bytes,
        now: float | None,
    ) -> Row | None:
        """:meth:`_row` for a store of layout 4: the row of the version put by the event of log key
        ``sk`` (sequence ``seq``) that a sealed index entry (its seal checked by the caller) of namespace ``names``
        names with timestamp key ``tsk``, id key ``idk``, payload CRC ``crc`` and expiry key ``xk``
        (b"": none; ``now`` then given), or None when its content was erased, it expired at
        ``now``, or (``record_id`` given) it is another id's sharing a hashed key. The frame must be
        that put with a payload of that CRC (:func:`read_content`; an erased put's CRC is the one
        of no payload, so no other index is needed to tell erasure from damage). The id and
        timestamp come from the keys (a hashed id key or the timestamp key of 0.0: from the
        envelope, which must match them), the expiry from ``xk``."""
        d = self.d
        frame = self.txn.get(sk, None, d.log)  # positional: cheaper than the keyword db=
        if frame is None:
            raise damaged(names, idk, record_id, seq, "the index names an event the log lacks")
        try:
            if tsk != TS_ZERO and idk[:1] == INLINE:
                data = read_content(frame, seq, crc, d.seals.crc)
                if data is None:
                    return None
                rid = record_id if record_id is not None else inline_name(idk)
                ts = decode_ts_key(tsk)
            else:
                env, data = read_put(frame, seq, crc, d.seals.crc)
                if data is None:
                    return None
                rid, ts = env["i"], env["ts"]
                if env["n"] != names or name_key(rid) != idk or ts_key(ts) != tsk:
                    raise StoreCorrupted(f"event {seq} is not the put the index entry names")
        except (StoreCorrupted, KeyError, TypeError, AttributeError, ValueError) as exc:
            raise damaged(names, idk, record_id, seq, str(exc)) from exc
        if record_id is not None and rid != record_id:
            return None
        if not xk:
            return _tuple_new(Row, (rid, ts, data, seq, None))
        expires_at = decode_ts_key(xk)
        if now is None or expires_at <= now:
            return None
        return _tuple_new(Row, (rid, ts, data, seq, expires_at))

    def _expiry_key(self, names: list[str], nsid: bytes, idk: bytes, seq: int, end: bytes, tsk: bytes) -> bytes:
        """The expiry key ``X`` (b"": none) of the version put at ``seq``, found through ``time``
        or ``tver`` with end ``end`` and timestamp key ``tsk``: from its sealed ``ver`` entry,
        which must hold them (layout 4)."""
        vk = ver_key(nsid, idk, seq)
        found = self.txn.get(vk, db=self.d.ver)
        seals = self.d.seals
        body = None if found is None or len(found) not in VER_LENGTHS else opened(vk, found, seals.ver, seals.crc)
        if body is None or body[:TV_END] != end + tsk:
            raise damaged(names, idk, None, seq, "the ver and time indexes disagree")
        return body[TV_END:-SEAL]

    def _check_end(self, names: list[str], idk: bytes, record_id: str, end: bytes) -> None:
        """Check that event ``end`` (a sequence key), which the ``ver`` index says ended the newest
        version of ``record_id``, is a delete, erase or clear of it; else :class:`StoreCorrupted`."""
        seq = seq_from_key(end)
        frame = self.txn.get(end, db=self.d.log)
        if frame is None:
            raise damaged(names, idk, record_id, seq, "the index names an event the log lacks")
        event = decode_envelope(frame, seq)
        ok = event.namespace == tuple(names) and (
            event.kind == CLEAR or (event.kind in (DELETE, ERASE) and event.id == record_id)
        )
        if not ok:
            raise damaged(names, idk, record_id, seq, f"event {seq} does not end it")

    # -- expiry ------------------------------------------------------------------------------

    def expiring(self, nsid: bytes) -> bool:
        """Whether the namespace ever held a (not erased) version with an expiry: only then do
        scans and counts look at expiries (one lookup of the namespace's marker ``exv[N]``). In
        layout 4 the lookup lands where the marker sorts: an expiry entry of the namespace there
        instead (its marker lost) is :class:`StoreCorrupted`, not a namespace without expiries."""
        exv = self.d.exv
        if exv is None:
            return False
        if not self.d.sealed:
            return self.txn.get(nsid, db=exv) is not None
        cur = self.txn.cursor(db=exv)
        if not cur.set_range(nsid):
            return False
        key = cur.key()
        if key == nsid:
            return True
        if key[:NSID_LEN] == nsid or key < nsid:  # the marker lost, or a misdirected search
            raise StoreCorrupted(f"the expiry index of namespace {self.label(nsid)} has lost its marker")
        return False

    def hidden(self, nsid: bytes, now: float, as_of: int | None = None) -> set[int]:
        """Put seqs of the versions visible now (or right after ``as_of``) that expired at ``now``.
        Every entry walked is checked (its CRC, ascending keys); :class:`StoreCorrupted` naming the
        namespace otherwise."""
        out: set[int] = set()
        exv = self.d.exv
        if exv is None:
            return out
        cur = self.txn.cursor(db=exv)
        stop = nsid + ts_key(now) + PAST_KEY[:SEQ_LEN]
        legacy = self.d.legacy
        last = nsid
        landed = cur.set_range(nsid)
        if not sound_landing(cur, nsid, landed, self._genuine_exv):
            raise StoreCorrupted(f"the expiry index is damaged near namespace {self.label(nsid)}")
        if landed:
            for key, value in cur.iternext(keys=True, values=True):
                if key > stop or key[:NSID_LEN] != nsid:
                    if not self._genuine_exv(key, value):
                        raise StoreCorrupted(f"the expiry index of namespace {self.label(nsid)} is damaged")
                    break
                if len(key) == NSID_LEN:
                    if value:
                        raise StoreCorrupted(f"the expiry index of namespace {self.label(nsid)} is damaged")
                    continue  # the namespace's marker
                end = unseal(key, value, (SEQ_LEN,), legacy, self.d.seals.crc)
                if end is None or len(key) != NSID_LEN + 8 + SEQ_LEN or key < last:
                    raise StoreCorrupted(f"the expiry index of namespace {self.label(nsid)} is damaged")
                last = key
                put_seq = seq_from_key(key[-SEQ_LEN:])
                if as_of is None:
                    if end == LIVE:
                        out.add(put_seq)
                elif put_seq <= as_of and (end == LIVE or seq_from_key(end) > as_of):
                    out.add(put_seq)
        return out

    def _genuine_exv(self, key: bytes, value: bytes) -> bool:
        """Whether ``exv`` entry ``key`` -> ``value`` is a namespace marker or a sealed entry whose
        CRC holds (always true for a store of an older layout, whose values carry none)."""
        if len(key) == NSID_LEN:
            return not value
        return self.d.legacy or (
            len(key) == NSID_LEN + 8 + SEQ_LEN and unseal(key, value, (SEQ_LEN,), False, self.d.seals.crc) is not None
        )

    def expired(self, nsid: bytes, now: float) -> list[tuple[int, str]]:
        """Live versions of the namespace expired at ``now``: ``(put seq, record id)``, oldest put
        first. Each must be a put of the namespace that expires by ``now`` and be the live version
        of its id (:class:`StoreCorrupted` otherwise)."""
        out = []
        names = list(self._names(nsid))
        for put_seq in sorted(self.hidden(nsid, now)):
            env = decode_envelope(self.frame(put_seq), put_seq)
            idk = b"" if env.id is None else name_key(env.id)
            if (
                env.kind != PUT or list(env.namespace) != names or env.expires_at is None
                or env.expires_at > now or env.id is None or self.live_seq(nsid, idk) != put_seq
            ):
                raise damaged(names, idk, env.id, put_seq, "its expiry index entry does not fit it")
            out.append((put_seq, env.id))
        return out

    def clock(self, as_of: int | None) -> float:
        """The recorded-time clock expiry is judged by: now (never before the head's recorded time),
        or the recorded time of event ``as_of`` (0.0 for the empty log)."""
        if as_of is None:
            return self.head().next_at()
        return recorded_at(self.frame(as_of)) if as_of else 0.0

    def reader_now(self, nsid: bytes, as_of: int | None) -> float | None:
        """The clock a read of the namespace judges expiry by, or None when it holds no expiring
        version (reads then skip the check)."""
        return self.clock(as_of) if self.expiring(nsid) else None
