"""Conformance: metadata filters on ``scan`` and ``count`` (the semantics of :mod:`coniti.filters`),
exact pages and cursors of filtered scans, on the sync and the async path."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from coniti.actor import TimeRange
from coniti.memory import CountRequest, DeleteRequest, MemoryBackend, ScanRequest
from coniti.testing.async_twins import assert_ascan_pages_match
from coniti.testing.fixtures import BackendFixtures
from coniti.testing.helpers import count, exact, ids, pages, put, record, scan_all

__all__ = ["FilterTests"]

NOTES: list[tuple[str, float, dict[str, Any]]] = [
    ("r0", 0.0, {"kind": "fact", "score": 0.9, "tags": ["x", "y"], "user": {"name": "ana", "age": 31}}),
    ("r1", 1.0, {"kind": "event", "score": 3, "tags": ["y"], "user": {"name": "bo"}}),
    ("r2", 2.0, {"kind": "fact", "score": "high", "tags": "x y", "pinned": True}),
    ("r3", 3.0, {"kind": None, "score": 1, "pinned": False}),
    ("r4", 4.0, {}),
    ("r5", 5.0, {"kind": "fact", "score": True, "tags": [], "user": "ana"}),
    ("r6", 5.0, {"kind": "FACT", "n": [1, 2], "deep": {"a": {"b": {"c": 1}}}}),
    ("r7", 6.0, {"kind": "fact", "score": 0, "tags": ["x"]}),
]
"""Records whose metadata exercises every rule; r5 and r6 share a timestamp (write order decides)."""

ALL = [name for name, _, _ in NOTES]

CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    ("empty-filter-matches-all", {}, ALL),
    ("scalar-equality", {"kind": "fact"}, ["r0", "r2", "r5", "r7"]),
    ("equality-is-case-sensitive", {"kind": "FACT"}, ["r6"]),
    ("dotted-path", {"user.name": "ana"}, ["r0"]),
    ("nested-object-is-a-path", {"user": {"name": "ana"}}, ["r0"]),
    ("deep-path", {"deep.a.b.c": 1}, ["r6"]),
    ("list-equality-is-strict", {"tags": "x"}, []),
    ("list-equals-list-in-order", {"tags": ["x"]}, ["r7"]),
    ("list-equality-numbers-by-value", {"n": [1, 2.0]}, ["r6"]),
    ("int-equals-float", {"score": 1.0}, ["r3"]),
    ("bool-is-not-a-number", {"score": 1}, ["r3"]),
    ("bool-equals-bool", {"score": True}, ["r5"]),
    ("contains-element-or-substring", {"tags": {"$contains": "x"}}, ["r0", "r2", "r7"]),
    ("contains-substring", {"kind": {"$contains": "ac"}}, ["r0", "r2", "r5", "r7"]),
    ("contains-nothing-in-a-number", {"score": {"$contains": 3}}, []),
    ("gt-numbers-only", {"score": {"$gt": 0.5}}, ["r0", "r1", "r3"]),
    ("gte-and-lt-together", {"score": {"$gte": 0, "$lt": 1}}, ["r0", "r7"]),
    ("lte-number", {"score": {"$lte": 0}}, ["r7"]),
    ("gte-strings-only", {"score": {"$gte": "a"}}, ["r2"]),
    ("comparison-on-missing-never-matches", {"nothing": {"$lt": 100}}, []),
    ("exists-true-includes-null", {"kind": {"$exists": True}}, ["r0", "r1", "r2", "r3", "r5", "r6", "r7"]),
    ("exists-false-matches-missing", {"pinned": {"$exists": False}}, ["r0", "r1", "r4", "r5", "r6", "r7"]),
    ("eq-null-matches-null-and-missing", {"kind": None}, ["r3", "r4"]),
    ("ne-matches-missing-and-null", {"kind": {"$ne": "fact"}}, ["r1", "r3", "r4", "r6"]),
    ("ne-null-needs-a-value", {"kind": {"$ne": None}}, ["r0", "r1", "r2", "r5", "r6", "r7"]),
    ("eq-operator", {"kind": {"$eq": "event"}}, ["r1"]),
    ("in-list", {"kind": {"$in": ["event", "FACT"]}}, ["r1", "r6"]),
    ("in-null-matches-missing", {"kind": {"$in": [None]}}, ["r3", "r4"]),
    ("nin-list", {"kind": {"$nin": ["event", "FACT"]}}, ["r0", "r2", "r3", "r4", "r5", "r7"]),
    ("path-into-a-string-is-missing", {"user.name": {"$exists": False}}, ["r2", "r3", "r4", "r5", "r6", "r7"]),
    ("and", {"$and": [{"kind": "fact"}, {"tags": {"$contains": "x"}}]}, ["r0", "r2", "r7"]),
    ("or", {"$or": [{"kind": "event"}, {"pinned": True}]}, ["r1", "r2"]),
    ("not", {"$not": {"kind": "fact"}}, ["r1", "r3", "r4", "r6"]),
    ("keys-combine-by-and", {"kind": "fact", "score": {"$gt": 0.5}}, ["r0"]),
    ("logic-with-sibling-paths", {"kind": "fact", "$not": {"tags": {"$contains": "y"}}}, ["r5", "r7"]),
]
"""``(case, filter, ids it selects from NOTES in scan order)``: the rules of :mod:`coniti.filters`."""


def _fill(backend: MemoryBackend, namespace: tuple[str, ...] = ()) -> None:
    put(backend, *[record(i, t, metadata=m, namespace=namespace) for i, t, m in NOTES])


def _fill_numbered(backend: MemoryBackend, n: int = 30) -> None:
    """``r0..`` at times 0, 1, ...: metadata ``{"i": i, "m3": i % 3 == 0}``."""
    put(backend, *[record(f"r{i}", float(i), metadata={"i": i, "m3": i % 3 == 0}) for i in range(n)])


M3 = {"m3": True}


class FilterTests(BackendFixtures):
    """Filtered ``scan`` and ``count``: the semantics, exact pages, cursors, ranges, namespaces, async."""

    @pytest.mark.parametrize(("f", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
    def test_scan_selects_by_the_rules(
        self, backend: MemoryBackend, f: dict[str, Any], expected: list[str]
    ) -> None:
        """A filtered scan returns exactly the records the filter's rules select, in scan order."""
        _fill(backend)
        assert ids(scan_all(backend, filter=f)) == expected

    @pytest.mark.parametrize(("f", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
    def test_count_agrees_with_scan(
        self, backend: MemoryBackend, f: dict[str, Any], expected: list[str]
    ) -> None:
        """A filtered count is the number of records the filtered scan returns."""
        _fill(backend)
        assert count(backend, filter=f) == len(expected)

    def test_no_filter_equals_empty_filter(self, backend: MemoryBackend) -> None:
        """filter=None and filter={} return the same records as an unfiltered scan, bit for bit."""
        _fill(backend)
        plain = [exact(r) for r in scan_all(backend)]
        assert [exact(r) for r in scan_all(backend, filter={})] == plain
        assert [exact(r) for r in scan_all(backend, filter=None)] == plain

    def test_filtered_records_are_whole(self, backend: MemoryBackend) -> None:
        """A filtered scan returns the very records an unfiltered scan returns (text, vector,
        metadata, embedding id), not partial ones."""
        _fill(backend)
        plain = {r.id: exact(r) for r in scan_all(backend)}
        got = scan_all(backend, filter={"kind": "fact"})
        assert [exact(r) for r in got] == [plain[i] for i in ids(got)]

    @pytest.mark.parametrize("limit", [1, 2, 3, 4, 7, 9, 10, 11, 50])
    def test_filtered_pages_are_exact(self, backend: MemoryBackend, limit: int) -> None:
        """Every page but the last holds exactly ``limit`` matching records; the pages together are
        the unlimited filtered scan; no empty page follows the last match."""
        _fill_numbered(backend)
        got = pages(backend, limit, filter=M3)
        assert [len(p.records) for p in got[:-1]] == [limit] * (len(got) - 1)
        assert [i for p in got for i in ids(p.records)] == [f"r{i}" for i in range(0, 30, 3)]
        assert len(got) == math.ceil(10 / limit)

    def test_last_page_ends_before_trailing_non_matches(self, backend: MemoryBackend) -> None:
        """A page that takes the last match has no cursor, though non-matching records follow it."""
        _fill_numbered(backend)  # the last match is r27; r28 and r29 do not match
        page = backend.scan(ScanRequest(limit=10, filter=M3))
        assert ids(page.records)[-1] == "r27" and page.next_cursor is None

    def test_page_with_a_match_beyond_the_limit_has_a_cursor(self, backend: MemoryBackend) -> None:
        """A full page has a cursor when another match follows, even after many non-matching records."""
        put(backend, *[record(f"r{i}", float(i), metadata={"hit": i in (0, 1, 2999)}) for i in range(3000)])
        page = backend.scan(ScanRequest(limit=2, filter={"hit": True}))
        assert ids(page.records) == ["r0", "r1"] and page.next_cursor is not None
        rest = backend.scan(ScanRequest(limit=2, filter={"hit": True}, cursor=page.next_cursor))
        assert ids(rest.records) == ["r2999"] and rest.next_cursor is None

    def test_no_match_gives_an_empty_page(self, backend: MemoryBackend) -> None:
        """A filter nothing matches gives no records and no cursor."""
        _fill_numbered(backend)
        page = backend.scan(ScanRequest(limit=3, filter={"i": -1}))
        assert page.records == [] and page.next_cursor is None

    def test_cursor_is_the_position_of_the_last_record(self, backend: MemoryBackend) -> None:
        """A filtered page's cursor resumes right after its last record, whatever filter follows:
        an unfiltered scan from it continues with the very next record."""
        _fill_numbered(backend)
        page = backend.scan(ScanRequest(limit=2, filter=M3))
        assert ids(page.records) == ["r0", "r3"]
        rest = backend.scan(ScanRequest(cursor=page.next_cursor))
        assert ids(rest.records) == [f"r{i}" for i in range(4, 30)]

    def test_unfiltered_cursor_resumes_a_filtered_scan(self, backend: MemoryBackend) -> None:
        """A cursor from an unfiltered page resumes a filtered scan after the same position."""
        _fill_numbered(backend)
        page = backend.scan(ScanRequest(limit=4))
        rest = backend.scan(ScanRequest(cursor=page.next_cursor, filter=M3))
        assert ids(rest.records) == [f"r{i}" for i in range(6, 30, 3)]

    def test_cursor_resumes_across_deletes(self, backend: MemoryBackend) -> None:
        """Deleting the page's last record and the next match between pages loses nothing else."""
        _fill_numbered(backend)
        page = backend.scan(ScanRequest(limit=3, filter=M3))
        assert ids(page.records) == ["r0", "r3", "r6"]
        backend.delete(DeleteRequest(ids=["r6", "r9"]))
        rest = backend.scan(ScanRequest(limit=3, filter=M3, cursor=page.next_cursor))
        assert ids(rest.records) == ["r12", "r15", "r18"]

    def test_cursor_sees_matches_inserted_after_it(self, backend: MemoryBackend) -> None:
        """A matching record put after the cursor's position between pages is on the next page; one
        put before it is not."""
        _fill_numbered(backend)
        page = backend.scan(ScanRequest(limit=2, filter=M3))
        put(
            backend,
            record("early", 1.5, metadata={"m3": True}),
            record("late", 4.5, metadata={"m3": True}),
        )
        rest = backend.scan(ScanRequest(limit=2, filter=M3, cursor=page.next_cursor))
        assert ids(rest.records) == ["late", "r6"]

    def test_filter_within_a_time_range(self, backend: MemoryBackend) -> None:
        """A filter and a half-open time range together select their intersection, in scan and count."""
        _fill_numbered(backend)
        window = TimeRange(start=6.0, end=18.0)
        assert ids(scan_all(backend, time_range=window, filter=M3)) == ["r6", "r9", "r12", "r15"]
        assert count(backend, time_range=window, filter=M3) == 4

    def test_filtered_pages_within_a_time_range(self, backend: MemoryBackend) -> None:
        """Filtered pages stay inside the time range and end at its last match."""
        _fill_numbered(backend)
        window = TimeRange(start=1.0, end=20.0)
        got = pages(backend, 2, time_range=window, filter=M3)
        assert [ids(p.records) for p in got] == [["r3", "r6"], ["r9", "r12"], ["r15", "r18"]]

    def test_filters_keep_namespaces_isolated(self, backend: MemoryBackend) -> None:
        """A filtered scan or count sees only its namespace."""
        _fill(backend, ("a",))
        put(backend, record("root", 0.0, metadata={"kind": "fact"}))
        assert ids(scan_all(backend, filter={"kind": "fact"})) == ["root"]
        assert count(backend, ("a",), filter={"kind": "fact"}) == 4

    def test_filter_after_delete(self, backend: MemoryBackend) -> None:
        """Deleted records are neither returned nor counted by a filtered read."""
        _fill(backend)
        backend.delete(DeleteRequest(ids=["r0", "r7"]))
        assert ids(scan_all(backend, filter={"kind": "fact"})) == ["r2", "r5"]
        assert count(backend, filter={"kind": "fact"}) == 2

    def test_request_factories_carry_the_filter(self, backend: MemoryBackend) -> None:
        """scan_request and count_request pass ``filter`` on to the request."""
        _fill(backend)
        f = {"kind": "fact"}
        assert ids(backend.scan(backend.scan_request(limit=2, filter=f)).records) == ["r0", "r2"]
        assert backend.count(backend.count_request(filter=f)).count == 4

    @pytest.mark.parametrize("limit", [None, 1, 3])
    def test_ascan_matches_scan(self, backend: MemoryBackend, limit: int | None) -> None:
        """ascan with a filter gives the same pages as scan, ending at the same page."""
        _fill_numbered(backend)
        assert_ascan_pages_match(backend, limit=limit, filter=M3)

    def test_acount_matches_count(self, backend: MemoryBackend) -> None:
        """acount with a filter returns what count returns."""
        _fill(backend)
        for f in [{}, {"kind": "fact"}, {"score": {"$gt": 0.5}}]:
            request = CountRequest(filter=f)
            assert asyncio.run(backend.acount(request)) == backend.count(request)
