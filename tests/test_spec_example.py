"""The example of spec/memory-backend.md runs and prints exactly what the spec says."""

from __future__ import annotations

import subprocess
import sys
import textwrap

# Copied verbatim from spec/memory-backend.md, section "Example".
SPEC_EXAMPLE = textwrap.dedent(
    '''
    import numpy as np

    from coniti import Note, TimeRange
    from coniti.impl.memory import InMemoryBackend
    from coniti.memory import MemoryRecord, PutRequest, ScanRequest


    def rec(text: str, t: float) -> MemoryRecord:
        return MemoryRecord(
            note=Note.create(text, timestamp=t),
            vector=np.array([1.0, 0.0, 0.0]),
        )


    memory = InMemoryBackend()
    memory.put(PutRequest(records=[rec("first", 10.0), rec("second", 20.0), rec("third", 30.0)]))

    # Half-open range [10, 30): "first" and "second".
    window = TimeRange(start=10.0, end=30.0)
    page = memory.scan(ScanRequest(time_range=window, limit=1))
    print([r.note.text for r in page.records])      # ['first']

    # Resume exactly where the page stopped.
    page = memory.scan(ScanRequest(time_range=window, limit=1, cursor=page.next_cursor))
    print([r.note.text for r in page.records])      # ['second']
    print(page.next_cursor)                         # None: the end of the range
    '''
)

# What the spec's comments say each print shows.
EXPECTED = "['first']\n['second']\nNone\n"


def test_spec_example_prints_what_the_spec_says() -> None:
    """Run in a fresh interpreter, the example prints ['first'], ['second'], None and nothing else."""
    done = subprocess.run(
        [sys.executable, "-c", SPEC_EXAMPLE], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == EXPECTED
    assert done.stderr == ""
