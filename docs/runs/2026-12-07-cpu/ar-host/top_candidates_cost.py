"""The host's top-k for a tree step on this CPU: tree.top_candidates on random logits of 16 rows x 49,152
(the default pair's vocabulary), 4 and 8 candidates, 50 calls each (docs/benchmarks.md, "Eight
candidates per position at budget 15"; it ran while another job used this machine)."""

import timeit

import numpy as np

from engine_bridge.runtime import tree

x = np.random.randn(16, 49152).astype(np.float32)
for k in (4, 8):
    print(k, f"{timeit.timeit(lambda: tree.top_candidates(x, k), number=50) / 50 * 1e3:.2f} ms")
