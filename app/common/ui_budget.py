"""Keeps the UI thread's CPU under a small share of wall time while answers stream.

On a machine whose cores all decode, every millisecond the UI thread spends drawing is taken from
generation, and then some: the engine's threads meet at barriers, so one descheduled thread
stalls the others, and the UI's Python holds the GIL the engine's step loop needs. A fixed redraw
rate that is cheap on one machine is too dear on another, so the rate adapts: the UI thread's
CPU time (``time.thread_time``) is measured over windows of a quarter second, and the throttles'
intervals stretch (x1.5, up to ``max_ms``) while it is above the budget and shrink back (down to
``min_ms``) once it is well below. When idle nothing is measured and nothing runs.
"""

from __future__ import annotations

import time

#: Share of wall time the UI thread may use while streaming. 1 % keeps the GUI within 2 % of the
#: headless CLI's tok/s on a 2-core CPU machine (docs/benchmarks.md, "GUI overhead"; 3 % cost 3 %).
DEFAULT_BUDGET = 0.01
WINDOW_S = 0.25


class CpuBudget:
    def __init__(self, budget: float = DEFAULT_BUDGET, min_ms: int = 50, max_ms: int = 1000):
        self.budget, self.min_ms, self.max_ms = budget, min_ms, max_ms
        self.interval_ms = min_ms
        self._cpu = time.thread_time()
        self._wall = time.perf_counter()
        self.share = 0.0  # the last window's measured share (for the status and tests)

    def update(self) -> int:
        """Call on the UI thread after each update; returns the interval to use from now on."""
        cpu, wall = time.thread_time(), time.perf_counter()
        elapsed = wall - self._wall
        if elapsed < WINDOW_S:
            return self.interval_ms
        self.share = (cpu - self._cpu) / elapsed
        self._cpu, self._wall = cpu, wall
        if self.share > self.budget:
            self.interval_ms = min(self.max_ms, int(self.interval_ms * 1.5))
        elif self.share < self.budget / 2:
            self.interval_ms = max(self.min_ms, int(self.interval_ms / 1.5))
        return self.interval_ms
