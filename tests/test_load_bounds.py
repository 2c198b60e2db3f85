"""load within bounded memory, whatever the file: gzip bombs are refused without materialising them,
and a child process under RLIMIT_AS proves the bound (tools/faultcheck.py measures peak RSS)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from coniti.errors import MemoryFileError
from coniti.impl.memory import InMemoryBackend
from coniti.memfile import FORMAT, MAX_LINE_BYTES, VERSION

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
