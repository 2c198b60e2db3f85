"""The ContinuityEngine: notes in, answers out, memory underneath (see :mod:`coniti.engine.engine`).

This package keeps the import path ``coniti.engine`` and every name it exported when it was one
module.
"""

from coniti.engine.engine import EMBEDDING_KEY as EMBEDDING_KEY
from coniti.engine.engine import (
    Answer,
    ContinuityEngine,
    DerivedReport,
    Hit,
    IngestResult,
    Snapshot,
)
from coniti.engine.engine import _Derived as _Derived
from coniti.engine.engine import _holders as _holders
from coniti.engine.engine import pool_size as pool_size

__all__ = ["Answer", "ContinuityEngine", "DerivedReport", "Hit", "IngestResult", "Snapshot"]
