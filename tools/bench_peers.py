#!/usr/bin/env python3
"""The peers benchmark: coniti beside chromadb, lancedb, qdrant-client (local), sqlite-vec and
LangGraph's SqliteStore, side by side in one run; the peers in a venv of their own.

Usage (from the repository root)::

    .venv/bin/python tools/bench_peers.py                       # N=100,000, 3 rounds
    .venv/bin/python tools/bench_peers.py --n 2000 --rounds 1   # a quick look
    .venv/bin/python tools/bench_peers.py --help

The code and its full description: ``bench/peers.py`` beside this file.
"""

from bench.peers import main

if __name__ == "__main__":
    raise SystemExit(main())
