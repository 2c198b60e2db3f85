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


# Copied verbatim from spec/memory-backend.md, section "Memory file" (the embedding id paragraph).
SPEC_SENTENCE = (
    'memory.set_meta(memory.meta_set_request(key="embedding_id", value=spec_id)) '
    'with the spec id from Container.resolved()["embedding"].spec_id'
)


def test_spec_embedding_id_sentence_works_as_written() -> None:
    """The spec's way to set a hand-filled backend's embedding id runs as written (its ``Container``
    is the container in use), and a memory file dumped afterwards names that id in its header."""
    import io
    import json

    from coniti import Container
    from coniti.impl.memory import InMemoryBackend

    call, source = SPEC_SENTENCE.split(" with the spec id from ")
    container = Container(embedding="random_projection")
    memory = InMemoryBackend()
    spec_id = eval(source, {"Container": container})  # noqa: S307 - the spec's own expression
    exec(call, {"memory": memory, "spec_id": spec_id})  # noqa: S102 - the spec's own statement
    assert spec_id == container.embedder.spec_id
    assert memory.get_meta(memory.meta_get_request("embedding_id")).value == spec_id
    out = io.StringIO()
    memory.dump(out)
    assert json.loads(out.getvalue().splitlines()[0])["embedding_id"] == spec_id
