"""A reactive rule modelled on the walks of the 48 held-out prompts (measured here, not built): after a
chain-7 step that took no draft, run one or two AR steps before drafting again.

Part 1: llama.cpp's AR answer (128 tokens) to each held-out prompt, and the shipped drafter's accepted
drafts (first 7 slots of a whole block, PyTorch, fed by the PyTorch target) at every position of it.
Part 2: the walk replayed under each rule, a chain-7 step costing C AR tokens (2.2: the H200 bench's
break-even commit for chain 7; 2.5 and 3.0 for dearer steps), an AR step 1; printed as tokens per AR
cost (x AR). Output of a run: ar_after_miss.txt beside this file.

    python docs/runs/2026-11-30-cpu/drafter-walk/ar_after_miss.py T.gguf   # ~4 min on 2 cores
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]


def accepted_everywhere(target: Path, draft: Path, prompts: Path, max_tokens: int = 128, budget: int = 7):
    from drafter_walk import every_drafts, torch_pair
    from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
    from engine_bridge.runtime.config import EngineConfig, GenerationSettings
    from engine_bridge.runtime.engine import Engine
    from engine_bridge.training.walk import matched

    items = [json.loads(line) for line in prompts.read_text().splitlines() if line.strip()]
    eng = Engine.load(
        EngineConfig(target=target, draft=draft, n_ctx=2048, n_gpu_layers=0, draft_n_gpu_layers=0, n_threads=2),
        preflight=PAIR_PREFLIGHT,
    )
    tgt, dr = torch_pair(target, draft)
    out = []
    try:
        for it in items:
            text = eng.format_chat(it["messages"][:1])
            prompt = eng.tokenize(text)
            eng.reset()
            ar = list(eng.generate(text, GenerationSettings(mode="ar", max_tokens=max_tokens)).tokens)
            x = prompt + ar
            drafts = every_drafts(tgt, dr, prompt, ar, budget)
            acc = [matched(drafts[a], x[a + 1 : a + 1 + budget]) for a in range(len(prompt), len(x) - 1)]
            out.append({"cat": it["category"], "plen": len(prompt), "n": len(x), "acc": acc})
    finally:
        eng.close()
    return out


def replay(r: dict, c: float, ar_after_zero: int) -> tuple[int, float]:
    """(tokens, cost in AR tokens) of one answer under the rule."""
    plen, n, acc = r["plen"], r["n"], r["acc"]
    a, cost, toks, pending = plen, 0.0, 0, 0
    while a < n - 1:
        if pending:
            cost += 1.0
            a += 1
            toks += 1
            pending -= 1
            continue
        k = acc[a - plen]
        cost += c
        toks += min(k + 1, n - 1 - a)
        a += k + 1
        if k == 0:
            pending = ar_after_zero
    return toks, cost


def main() -> None:
    target = Path(sys.argv[1])
    data = accepted_everywhere(
        target, ROOT / "resources/models/smollm2/drafter.gguf", ROOT / "resources/models/smollm2/prompts.jsonl"
    )
    for c in (2.2, 2.5, 3.0):
        for cat in ("chat", "math", "code"):
            cells = []
            for m in (0, 1, 2):
                t = cost = 0.0
                for r in (r for r in data if r["cat"] == cat):
                    a, b = replay(r, c, m)
                    t += a
                    cost += b
                cells.append(f"AR-after-0 x{m}: {t / cost:.3f}")
            print(f"c={c} {cat}: " + "  ".join(cells))


if __name__ == "__main__":
    main()
