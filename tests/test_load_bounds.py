"""load within bounded memory, whatever the file: gzip bombs are refused without materialising them,
and a child process under RLIMIT_AS proves the bound (tools/faultcheck.py measures peak RSS)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from coniti.errors import MemoryFileError
from coniti.impl.memory import InMemoryBackend
from coniti.memfile import _BATCH_BYTES as MEMFILE_BATCH_BYTES
from coniti.memfile import FORMAT, MAX_LINE_BYTES, VERSION

ROOT = Path(__file__).resolve().parent.parent

HEADER = json.dumps({"format": FORMAT, "version": VERSION, "embedding_id": None, "namespace": [],
                     "created_at": "2025-01-01T00:00:00Z", "count": 1}) + "\n"
LINE = json.dumps({"note": {"id": "a", "text": "x" * 100, "timestamp": 1.0, "metadata": {}},
                   "vector": [1.0] * 8, "embedding_id": None, "namespace": []}) + "\n"


def repeated_line_bomb(path: Path, mib: int) -> Path:
    """A gzip of the header and one valid record line repeated to ``mib`` MiB."""
    block = LINE * ((1 << 20) // len(LINE))
    with gzip.open(path, "wt", compresslevel=9) as f:
        f.write(HEADER)
        for _ in range(mib):
            f.write(block)
    return path


def endless_line_bomb(path: Path, mib: int) -> Path:
    """A gzip of the header and one line of ``mib`` MiB that never ends."""
    with gzip.open(path, "wt", compresslevel=9) as f:
        f.write(HEADER + '{"note": {"id": "a", "text": "')
        chunk = "x" * (1 << 20)
        for _ in range(mib):
            f.write(chunk)
    return path


def test_repeated_line_bomb_is_refused_naming_the_first_repeat(tmp_path: Path) -> None:
    """A small gzip of one record line repeated (8 MiB decompressed) is refused with the duplicate
    id on line 3, the first repeat, and nothing is loaded."""
    bomb = repeated_line_bomb(tmp_path / "bomb.jsonl.gz", 8)
    assert bomb.stat().st_size < 256 * 1024
    backend = InMemoryBackend()
    with pytest.raises(MemoryFileError, match=r"line 3: record id 'a' appears twice in namespace /"):
        backend.load(bomb)
    assert backend.count(backend.count_request()).count == 0


def test_endless_line_bomb_is_refused_naming_its_line(tmp_path: Path) -> None:
    """A gzip holding one line longer than MAX_LINE_BYTES is refused on line 2 after reading at
    most MAX_LINE_BYTES of it."""
    bomb = endless_line_bomb(tmp_path / "long.jsonl.gz", (MAX_LINE_BYTES >> 20) + 8)
    with pytest.raises(MemoryFileError, match=rf"line 2: longer than {MAX_LINE_BYTES} bytes"):
        InMemoryBackend().load(bomb)


CHILD = """
import resource, sys
limit = int(sys.argv[2]) << 20
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from coniti.errors import MemoryFileError
from coniti.impl.memory import InMemoryBackend
try:
    InMemoryBackend().load(sys.argv[1])
except MemoryFileError as exc:
    print("refused:", exc)
else:
    print("loaded")
"""


@pytest.mark.parametrize("kind", ["repeated", "endless"])
def test_bombs_are_refused_under_a_256_mib_address_space(tmp_path: Path, kind: str) -> None:
    """Under RLIMIT_AS = 256 MiB (the interpreter and coniti take about half), a 48 MiB bomb of
    either kind is refused with MemoryFileError: no MemoryError, no crash. (Holding the records of
    the repeated-line bomb, as load once did, needs well over 256 MiB.)"""
    make = repeated_line_bomb if kind == "repeated" else endless_line_bomb
    bomb = make(tmp_path / "bomb.jsonl.gz", 48)
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(bomb), "256"], capture_output=True, text=True,
        timeout=300, check=False, env={"OPENBLAS_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("refused: line "), proc.stdout
    assert "MemoryError" not in proc.stderr


LOAD_CHILD = """
import json, os, sys
from coniti.impl.log import LogBackend

def peak_rss():  # this process's own high-water mark (ru_maxrss would start at the parent's)
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) << 10 for line in status if line.startswith("VmHWM:"))

source, store = sys.argv[1], sys.argv[2]
backend = LogBackend(store)
data = os.path.join(store, "data.mdb")
before, start = os.path.getsize(data), peak_rss()
count = backend.load(source)
print(json.dumps({"count": count, "grown": peak_rss() - start, "data": os.path.getsize(data) - before}))
"""


def _blob_file(path: Path, n: int, blob: int) -> Path:
    """A memory file of ``n`` records without a vector, each with ``blob`` random bytes."""
    import numpy as np

    from coniti import Note
    from coniti.memory import MemoryRecord

    source = InMemoryBackend()
    rng = np.random.default_rng(n)
    source.put(source.put_request([
        MemoryRecord(note=Note(id=f"n{i}", text="x", timestamp=float(i)), vector=None, blob=rng.bytes(blob))
        for i in range(n)
    ]))  # fmt: skip
    source.dump(path)
    return path


def _text_file(path: Path, n: int, chars: int) -> Path:
    """A memory file of ``n`` records without a vector, each with a text of ``chars`` characters."""
    import random

    from coniti import Note
    from coniti.memory import MemoryRecord

    source = InMemoryBackend()
    words = random.Random(n)
    records = [
        MemoryRecord(note=Note(id=f"n{i}", text="".join(words.choices("abcdefgh ", k=chars)), timestamp=float(i)),
                     vector=None)
        for i in range(n)
    ]  # fmt: skip
    for start in range(0, n, 1000):
        source.put(source.put_request(records[start : start + 1000]))
    source.dump(path)
    return path


@pytest.mark.parametrize(
    "make",
    [lambda p: _blob_file(p, 8, 4 << 20), lambda p: _text_file(p, 8_000, 2_000)],
    ids=["8-blobs-of-4-mib", "8000-texts-of-2-kb"],
)
def test_a_load_into_a_log_backend_holds_what_it_writes_and_a_bounded_working_set(
    tmp_path: Path, make: Any
) -> None:
    """The bound the README states, in a child process: a load into a LogBackend raises peak RSS
    by at most what it adds to data.mdb (one LMDB transaction keeps the pages it writes until the
    commit) plus ten batches of lines (8 MiB plus the longest line each)."""
    source = make(tmp_path / "m.jsonl")
    longest = max(len(line) for line in source.read_bytes().splitlines())
    proc = subprocess.run(
        [sys.executable, "-c", LOAD_CHILD, str(source), str(tmp_path / "store")],
        capture_output=True, text=True, timeout=300, check=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1"},
    )  # fmt: skip
    out = json.loads(proc.stdout)
    assert out["count"] > 0 and out["data"] >= source.stat().st_size // 2
    assert out["grown"] <= out["data"] + 10 * (MEMFILE_BATCH_BYTES + longest), out
