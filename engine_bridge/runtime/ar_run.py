"""An AR request's decodes in runs: several one-token decodes in one llama.cpp call (patch 0028).

Decoding token by token from Python, the target waits on the host between tokens: the pick comes back
through ctypes, the step is recorded, the next batch is filled. ``llama_decode_greedy_run`` loops in
C instead, each decode's backend greedy pick fed to the next, as llama-bench does. A run returns its
picks and when each was read; the request then commits them one by one, as steps of one token each,
so the tokens, the steps and their records are the per-step loop's.

Runs are short, so that a stop (``cancel``, a stop string found by a token callback) takes effect
within one run: the first is FIRST_RUN tokens, and each later one is sized from the last one's
tokens per second to last about RUN_SECONDS, at most twice the last and MAX_RUN.

Where: wherever the target runs. CPU: +1.45 % AR tok/s. GPU (sitting s73, H100): +1.2 %, with the run
in the caller's thread; an earlier version that decoded each run on a thread of its own, so that the
run before streamed meanwhile, read 0.9665x and was dropped (docs/benchmarks.md, "An autoregressive
run in one call").
"""

from __future__ import annotations

import os

from . import llama_ffi
from .native import Batch, Context

#: Tokens in a request's first run.
FIRST_RUN = 4
#: Most tokens in one run.
MAX_RUN = 32
#: About how long a run may last, in seconds: a stop takes effect within one run.
RUN_SECONDS = 0.025
#: Environment variable: "1" runs AR requests in runs wherever the target runs, "0" one call a token
#: everywhere (read at every request, so that one process can alternate the two for an A/B:
#: gpu/gpu_request_ab.py). Unset: runs for a target on the CPU, RUNS_ON_DEVICE for one on a GPU.
AR_RUN_ENV = "DFLASH_AR_RUN"
#: Whether a target on a GPU decodes in runs when the switch is unset. On: in sitting s73 (H100,
#: 2026-12-07; the first 40 prompts of each public suite on both sides twice, one process) runs in the
#: caller's thread read 919.4 -> 930.5 tok/s (1.0121x, median per request 1.0108), the same tokens in
#: 240 of 240 requests. (s72's runs on a thread of their own read 0.9665x: that version is dropped.)
RUNS_ON_DEVICE = True


def runs_on(target_on_device: bool) -> bool:
    """Whether AR requests decode in runs: this engine has patch 0028, and $DFLASH_AR_RUN, else where
    the target runs (above), says so."""
    forced = os.environ.get(AR_RUN_ENV, "").strip()
    if forced not in ("", "0", "1"):
        raise ValueError(f"{AR_RUN_ENV}={forced!r}: expected 0 or 1")
    if llama_ffi.greedy_run_api() is None:
        return False
    if forced:
        return forced == "1"
    return RUNS_ON_DEVICE or not target_on_device


def next_length(last_len: int, last_seconds: float, left: int) -> int:
    """How many tokens the next run decodes: FIRST_RUN first, then about RUN_SECONDS' worth at the
    last run's pace (at most twice the last run and MAX_RUN), never more than ``left``."""
    if last_len <= 0 or last_seconds <= 0.0:
        n = FIRST_RUN
    else:
        n = min(MAX_RUN, 2 * last_len, max(1, int(RUN_SECONDS * last_len / last_seconds)))
    return max(1, min(n, left))


class ArRuns:
    """The runs of one AR request on one context, and the pace that sizes the next one."""

    def __init__(self, ctx: Context, batch: Batch, stop_at_eog: bool):
        self.ctx, self.batch, self.stop_at_eog = ctx, batch, stop_at_eog
        self.last_len, self.last_seconds = 0, 0.0

    def run(self, token: int, pos: int, left: int) -> tuple[list[int], list[int], int]:
        """Decodes the next run from ``token`` at ``pos`` (at most ``left`` tokens): its picks, the
        nanoseconds from its start to each pick, and its return code (``Context.greedy_run``)."""
        n = next_length(self.last_len, self.last_seconds, left)
        picks, ns, rc = self.ctx.greedy_run(self.batch, token, pos, n, self.stop_at_eog)
        if picks:
            self.last_len, self.last_seconds = len(picks), ns[-1] * 1e-9
        return picks, ns, rc
