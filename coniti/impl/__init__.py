"""Built-in memory backends: :mod:`coniti.impl.memory` (in process) and :mod:`coniti.impl.log` (LMDB)."""
