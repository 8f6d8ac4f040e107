"""The verify mode and budget a request runs with when nobody chose them (the app's first run,
``generate`` and ``serve`` without ``--mode`` / ``--budget``).

Without a drafter: AR. With one, it depends on where the target runs, because a speculative step is
priced by the machine:
- On a GPU build, chain: on an H100 (2026-12-06, patches 0001-0026, the full MT-Bench / GSM8K test /
  HumanEval sets, one run per suite) chain 7 ran at 1.24 / 1.65 / 1.52x AR, tree 7 at 1.25 / 1.59 /
  1.47 and auto 7 at 1.24 / 1.60 / 1.43 (docs/benchmarks.md, "Sitting s68"); before, on an H200, chain
  7 beat auto on every suite ("The full public sets on an H200").
- On a CPU-only build, auto: on a 2-vCPU machine a chain-7 step of the default pair costs 4-5 AR
  steps, more than the shipped drafter commits (1.6-2.8 tokens a step on public prompts there), and
  chain 7 ran at 0.39-0.70x AR where auto ran at 0.92-1.01x: it keeps the target alone where
  speculation does not pay (docs/benchmarks.md, "A CPU-only build starts in auto"). Its first
  request on a pair and machine measures their step costs first (6.8 s there), and says so
  (``Engine.generate``'s ``on_progress``).

The budget: 5 for chain on a GPU build, 7 otherwise. On an H100 (2026-12-06, the default pair, the
issue's public sets, one run per suite) chain 5 beat chain 7 and chain 3 on every suite: 1.32 / 1.77 /
1.61x AR on MT-Bench / GSM8K / HumanEval against 1.26 / 1.70 / 1.57 (chain 3: 1.24 / 1.54 / 1.44);
its verify is ~0.1 ms cheaper and the drafter's 6th and 7th tokens add 0.03-0.10 to the commit
(docs/benchmarks.md, "Sitting s68"). Sitting s69 (chain 4 / 5 / 6 in one run per suite) kept 5: 1.32 /
1.73 / 1.62x against 1.28 / 1.58 / 1.55 (chain 4) and 1.31 / 1.69 / 1.65 (chain 6). Tree keeps 7: tree 5
was measured on MT-Bench alone (1.31x AR once its top-k moved to the device in s69,
``drafter.BACKEND_TOP_K_MIN_BUDGET``). Auto, and every mode on a CPU build, keep 7 as before (budget 5
was not measured for them).
"""

from __future__ import annotations

from . import llama_ffi

GPU_CHAIN_BUDGET = 5
BUDGET = 7


def _backend() -> str | None:
    try:
        return str(llama_ffi.build_info().get("backend", "cpu"))
    except Exception:  # noqa: BLE001 - no engine to ask (a broken install)
        return None


def default_mode(has_drafter: bool) -> str:
    """ "ar" without a drafter; else "chain" on a GPU build, "auto" on a CPU-only one (see above)."""
    if not has_drafter:
        return "ar"
    return "auto" if _backend() == "cpu" else "chain"  # no engine to ask: chain, the mode before


def default_budget(mode: str) -> int:
    """Draft tokens per step (a tree's node budget) for ``mode`` when none was chosen: 5 for chain on
    a GPU build, else 7 (see above). An engine that cannot say its build keeps 7."""
    backend = _backend()
    return GPU_CHAIN_BUDGET if mode == "chain" and backend not in (None, "cpu") else BUDGET
