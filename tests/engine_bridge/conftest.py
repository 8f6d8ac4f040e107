"""The engine tests live in sub-folders that mirror engine_bridge/ (runtime, models, bench, cli,
training); their shared helpers (engine_corpus, hubserver, modelfiles, peer_env, peer_folders) stay
here and are imported by bare name, so this folder goes on sys.path (tests/faults uses them too)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
