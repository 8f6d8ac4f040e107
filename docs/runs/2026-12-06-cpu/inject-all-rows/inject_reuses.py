"""The drafter's graph reuses with and without DFLASH_INJECT_ALL_ROWS, on the real default pair
(CPU): the first three GSM8K test prompts, chain 5 and 7, 48 tokens, through the test's own runner.

Usage (project root): PYTHONPATH=. python docs/runs/2026-12-06-cpu/inject-all-rows/inject_reuses.py
"""

import sys

import pytest

sys.path.insert(0, "tests/engine_bridge/runtime")
sys.path.insert(0, "tests/engine_bridge")
from default_pair import load_default_pair  # noqa: E402
from test_inject_all_rows import _runs  # noqa: E402

eng = load_default_pair()
for budget in (5, 7):
    for side in ("", "1"):
        seen, reuses, decodes = _runs(eng, pytest.MonkeyPatch(), side, budget)
        steps = sum(len(r["steps"]) for r in seen)
        print(
            f"chain {budget}, all rows {side or '0'}: drafter decodes {decodes}, graph reuses {reuses}, steps {steps}"
        )
eng.close()
