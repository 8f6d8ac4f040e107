"""An AR request's decodes in runs: several one-token decodes in one llama.cpp call (patch 0028).

Decoding token by token from Python, a GPU waits on the host between tokens: the pick comes back
through ctypes, the step is recorded, the next batch is filled. ``llama_decode_greedy_run`` loops in
C instead, each decode's backend greedy pick fed to the next, as llama-bench does. A run returns its
picks and when each was read; the request then commits them one by one, as steps of one token each,
so the tokens, the steps and their records are the per-step loop's.

Runs are short, so that a stop (``cancel``, a stop string found by a token callback) takes effect
within one run: the first is FIRST_RUN tokens, and each later one is sized from the last one's
tokens per second to last about RUN_SECONDS, at most twice the last and MAX_RUN. On a GPU a run
decodes on a thread of llama.cpp's own while the request streams the run before it (the per-step
loop's streaming overlap, ``generation.overlap_commit_on``). Not on a Python thread: that would start
its call only once the streaming thread let go of the GIL, i.e. after the streaming (measured: a
worker's call started 211 / 511 / 1012 us after it was submitted while its caller ran Python for
200 / 500 / 1000 us).
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


#: Environment variable: "0" decodes AR requests one call a token, as before patch 0028 (read at every
#: request, so that one process can alternate the two for an A/B: gpu/gpu_request_ab.py).
AR_RUN_ENV = "DFLASH_AR_RUN"


def runs_available() -> bool:
    """Whether this engine has patch 0028's run and $DFLASH_AR_RUN is not "0"."""
    return os.environ.get(AR_RUN_ENV, "").strip() != "0" and llama_ffi.greedy_run_api() is not None


def next_length(last_len: int, last_seconds: float, left: int) -> int:
    """How many tokens the next run decodes: FIRST_RUN first, then about RUN_SECONDS' worth at the
    last run's pace (at most twice the last run and MAX_RUN), never more than ``left``."""
    if last_len <= 0 or last_seconds <= 0.0:
        n = FIRST_RUN
    else:
        n = min(MAX_RUN, 2 * last_len, max(1, int(RUN_SECONDS * last_len / last_seconds)))
    return max(1, min(n, left))


class ArRuns:
    """The runs of one AR request on one context: their lengths, and where each call runs."""

    def __init__(self, ctx: Context, batch: Batch, stop_at_eog: bool, overlap: bool):
        self.ctx, self.batch, self.stop_at_eog = ctx, batch, stop_at_eog
        self.last_len, self.last_seconds = 0, 0.0
        self.overlap = overlap
        self._running: int | None = None  # a run on llama.cpp's thread (overlap), to join
        self._result: tuple[list[int], list[int], int] | None = None

    def start(self, token: int, pos: int, n: int) -> None:
        """Starts a run of up to ``n`` decodes from ``token`` at ``pos``: on llama.cpp's thread when
        overlapping (``wait`` joins it), else here and now."""
        if self.overlap:
            self._running = self.ctx.greedy_run_start(self.batch, token, pos, n, self.stop_at_eog)
        else:
            self._result = self.ctx.greedy_run(self.batch, token, pos, n, self.stop_at_eog)

    def wait(self) -> tuple[list[int], list[int], int]:
        """The started run's (picks, nanoseconds from its start to each pick, return code)."""
        if self._running is not None:
            run, self._running = self._running, None
            out = self.ctx.greedy_run_join(run)
        else:
            assert self._result is not None  # start ran it
            out, self._result = self._result, None
        picks, ns, _ = out
        if picks:
            self.last_len, self.last_seconds = len(picks), ns[-1] * 1e-9
        return out

    def close(self) -> None:
        """Waits for a run still going: the context is the run's until it returns."""
        if self._running is not None:
            run, self._running = self._running, None
            self.ctx.greedy_run_join(run)
