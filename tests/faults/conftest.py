"""Fault-injection suite: the fast part runs with the other tests; ``-m faults_long`` runs the long
part (the figures benchmarks/faults.py prints come from the same cases)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# The cases live next to the tests; the local hub and the losslessness assertion are the engine
# tests' own (tests/engine_bridge/hubserver.py, engine_corpus.py).
for p in (HERE, HERE.parent / "engine_bridge"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))
