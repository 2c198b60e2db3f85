"""Peak memory of one operation on a closed store, measured in a fresh child process.

The child is ``tools/bench.py`` with the hidden ``--child-*`` options: it opens the store, samples its
anonymous RSS (``RssAnon``: heap, numpy and LMDB buffers; the mapped store file excluded) every 2 ms
while the operation runs, and prints one JSON line with that peak and its peak RSS (``VmHWM``, which
includes mapped file pages, so it grows with what the operation touches). Operations: ``dump`` (every
namespace to memory files), ``verify`` and ``scan`` (every record, ``iter_all`` for coniti).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

from .common import ROOT
from .systems import ConitiSystem, make_system

__all__ = ["anon_peak", "child_peak", "measure_peak"]

Namespace = tuple[str, ...]


def measure_peak(
    op: str, key: str, path: Path, namespaces: Sequence[Namespace], fail: Callable[[str], NoReturn]
) -> dict[str, float]:
    """Run ``op`` on system ``key``'s closed store at ``path`` in a child process; its figures
    (``anon_base_mb``, ``anon_peak_mb``, ``maxrss_mb``). A failed child goes to ``fail`` with the
    end of its stderr."""
    cmd = [
        sys.executable,
        str(ROOT / "tools" / "bench.py"),
        "--child-peak",
        op,
        "--child-system",
        key,
        "--child-path",
        str(path),
        "--child-namespaces",
        json.dumps([list(ns) for ns in namespaces]),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        fail(f"peak {op} on {key} failed:\n{proc.stderr[-2000:]}")
    figures: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return figures


def _status_kb(field_name: str) -> int:
    """A field of ``/proc/self/status`` in kB, 0 when the kernel does not report it."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    return 0


@contextlib.contextmanager
def anon_peak() -> Iterator[list[int]]:
    """Sample ``RssAnon`` every 2 ms while the block runs; yields ``[base_kb, peak_kb]`` (the peak is
    final when the block exits)."""
    figures = [_status_kb("RssAnon")] * 2
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            figures[1] = max(figures[1], _status_kb("RssAnon"))
            time.sleep(0.002)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield figures
    finally:
        stop.set()
        sampler.join()
        figures[1] = max(figures[1], _status_kb("RssAnon"))


def child_peak(op: str, key: str, path: Path, namespaces: Sequence[Namespace]) -> None:
    """Run one op on an existing store and print its memory figures as one JSON line."""
    system = make_system(key, path)
    system.open()
    with anon_peak() as figures:
        _run_op(op, system, namespaces)
    base, peak = figures
    # VmHWM, not getrusage's ru_maxrss: Linux carries ru_maxrss over from the parent across exec.
    maxrss = _status_kb("VmHWM")
    system.close()
    figures_mb = {"anon_base_mb": base / 1024, "anon_peak_mb": peak / 1024, "maxrss_mb": maxrss / 1024}
    print(json.dumps(figures_mb))


def _run_op(op: str, system: Any, namespaces: Sequence[Namespace]) -> None:
    if op == "scan":
        if isinstance(system, ConitiSystem):
            for ns in namespaces:
                for _ in system.b.iter_all(namespace=ns):
                    pass
        else:
            for ns in namespaces:
                system.scan_all(ns)
    elif op == "dump":
        assert isinstance(system, ConitiSystem)
        with tempfile.TemporaryDirectory() as tmp:
            for k, ns in enumerate(namespaces):
                system.b.dump(Path(tmp) / f"{k}.jsonl", namespace=ns)
    elif op == "verify":
        backend: Any = system.b
        backend.verify()
    else:
        raise SystemExit(f"unknown op {op!r}")
