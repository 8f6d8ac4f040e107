"""The verify mode a request runs in when nobody chose one (the app's first run, ``generate`` and
``serve`` without ``--mode``).

Without a drafter: AR. With one, it depends on where the target runs, because a speculative step is
priced by the machine:
- On a GPU build, chain: chain 7 beat auto on every public suite measured (an H200, the full
  MT-Bench / GSM8K test / HumanEval sets: 0.97 / 1.41 / 1.33x AR against auto's 0.91-0.95 / 1.16 /
  1.05-1.07; docs/benchmarks.md, "The full public sets on an H200").
- On a CPU-only build, auto: on a 2-vCPU machine a chain-7 step of the default pair costs 4-5 AR
  steps, more than the shipped drafter commits (1.6-2.8 tokens a step on public prompts there), and
  chain 7 ran at 0.39-0.70x AR where auto ran at 0.92-1.01x: it keeps the target alone where
  speculation does not pay (docs/benchmarks.md, "A CPU-only build starts in auto"). Its first
  request on a pair and machine measures their step costs first (6.8 s there), and says so
  (``Engine.generate``'s ``on_progress``).
"""

from __future__ import annotations

from . import llama_ffi


def default_mode(has_drafter: bool) -> str:
    """ "ar" without a drafter; else "chain" on a GPU build, "auto" on a CPU-only one (see above)."""
    if not has_drafter:
        return "ar"
    try:
        backend = llama_ffi.build_info().get("backend", "cpu")
    except Exception:  # noqa: BLE001 - no engine to ask (a broken install): the mode before
        return "chain"
    return "auto" if backend == "cpu" else "chain"
