"""The verify mode a request runs in when nobody chose one (the app's first run, ``generate`` and
``serve`` without ``--mode``).

Without a drafter: AR. With one, it depends on where the target runs, because a speculative step is
priced by the machine:
- On a GPU build, chain: chain 7 beat auto on every public suite measured (an H200, the full
  MT-Bench / GSM8K test / HumanEval sets: 0.97 / 1.41 / 1.33x AR against auto's 0.91-0.95 / 1.16 /
  1.05-1.07; docs/benchmarks.md, "The full public sets on an H200").
- On a CPU-only build, auto: there a chain-7 step of the default pair costs ~5 AR steps (2 vCPUs),
  more than the shipped drafter commits (2.0-3.1 tokens a step on the public sets), and chain 7 ran
  at 0.26-0.46x AR where auto ran at ~1.0x (it keeps the target alone where speculation does not
  pay). Its first request on a pair and machine measures their step costs first (6.4 s for the
  default pair on a 2-vCPU machine), and says so (``Engine.generate``'s ``on_progress``).
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
