"""Where does the drafter miss: at tokens the target is sure of, or at tokens it is not?

Issue 27's drafter has sat at 1.61 accepted drafts per chain-7 step on its held-out answers since
sitting 8, whatever its training changed. If its misses fall where the target itself hesitates (a low
top-1 probability), a drafter cannot learn them from the target's greedy answers and the plateau is
near a ceiling; if they fall where the target is sure, the drafter has room to learn.

For each prompt: llama.cpp's greedy (AR) answer on CPU, the PyTorch target (read from its GGUF, f32)
teacher-forced on it for the probability of its top-1 token at every answer position, and the PyTorch
drafter walking the answer as the engine does (``engine_bridge.training.walk``, whole blocks, first
``--budget`` slots). Every draft slot the walk reaches is a hit (the drafter's token is the answer's)
or the step's miss; each is binned by the target's top-1 probability at that token.

    python benchmarks/miss_confidence.py --target T.gguf --draft D.gguf \\
        --prompts resources/models/smollm2/prompts.jsonl --max-tokens 128 --budget 7 --out miss.json
    python benchmarks/miss_confidence.py --summary miss.json     # a saved run's table, printed again

Prints, per category and bin: the share of answer tokens, the drafter's hit rate on the slots the walk
reaches, and the share of the walk's misses.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: bins of the target's top-1 probability at a token (lower edges, highest first)
BINS = (0.9, 0.6, 0.3, 0.0)


def bin_of(p: float) -> int:
    return next(i for i, lo in enumerate(BINS) if p >= lo)


def tally(p1: list[float], steps: list[tuple[int, int]], start: int, n_answer: int, budget: int) -> dict:
    """Counts per bin from one answer: ``p1[i]``, the target's top-1 probability for answer token i;
    ``steps``, the walk's (anchor, accepted) with anchors as positions in prompt + answer; ``start``,
    the prompt's length. A step's accepted drafts are hits at answer tokens anchor+1..anchor+k; a step
    that took fewer than ``budget`` missed at token anchor+k+1 (when the answer has it)."""
    out = {"tokens": [0] * len(BINS), "hits": [0] * len(BINS), "misses": [0] * len(BINS)}
    for p in p1:
        out["tokens"][bin_of(p)] += 1
    for a, k in steps:
        for j in range(a + 1, a + 1 + k):
            out["hits"][bin_of(p1[j - start])] += 1
        m = a + k + 1
        if k < budget and m - start < n_answer:
            out["misses"][bin_of(p1[m - start])] += 1
    return out


def table(cats: dict[str, dict]) -> str:
    lines = [
        "| category | target's top-1 probability | answer tokens | drafter hit rate (slots reached) | walk's misses |",
        "|---|---|---|---|---|",
    ]
    for cat, t in cats.items():
        nt, nm = sum(t["tokens"]), sum(t["misses"])
        for i, lo in enumerate(BINS):
            hi = 1.0 if i == 0 else BINS[i - 1]
            reached = t["hits"][i] + t["misses"][i]
            rate = f"{t['hits'][i] / reached:.2f} ({reached})" if reached else "-"
            lines.append(
                f"| {cat} | {lo:.1f}-{hi:.1f} | {t['tokens'][i] / max(nt, 1):.0%} | {rate} | "
                f"{t['misses'][i] / max(nm, 1):.0%} |"
            )
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", type=Path)
    ap.add_argument("--draft", type=Path)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompts", type=Path, help="JSONL with messages and category")
    src.add_argument("--summary", type=Path, help="print a saved --out JSON's table again (no run)")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--budget", type=int, default=7)
    ap.add_argument("--limit", type=int, default=0, help="first N prompts per category (0: all)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    if a.summary:
        print(table(json.loads(a.summary.read_text())["categories"]))
        return 0
    if a.target is None or a.draft is None:
        ap.error("--target and --draft are needed to run (only --summary goes without)")

    import torch

    from benchmarks.drafter_walk import every_drafts, prompts_by_category, torch_pair
    from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
    from engine_bridge.runtime.config import EngineConfig, GenerationSettings
    from engine_bridge.runtime.engine import Engine
    from engine_bridge.training.walk import walk

    torch.set_num_threads(a.threads)
    by_cat = prompts_by_category(a.prompts, a.limit)
    eng = Engine.load(
        EngineConfig(target=a.target, draft=None, n_ctx=2048, n_gpu_layers=0, n_threads=a.threads),
        check=False,
        preflight=PAIR_PREFLIGHT,
    )
    tgt, dr = torch_pair(a.target, a.draft)
    out: dict = {"target": a.target.name, "draft": a.draft.name, "budget": a.budget, "bins": BINS, "categories": {}}
    try:
        for cat, its in by_cat.items():
            tot = {"tokens": [0] * len(BINS), "hits": [0] * len(BINS), "misses": [0] * len(BINS)}
            for it in its:
                text = eng.format_chat(it["messages"][:1])
                prompt = eng.tokenize(text)
                eng.reset()
                answer = list(eng.generate(text, GenerationSettings(mode="ar", max_tokens=a.max_tokens)).tokens)
                x = torch.tensor([prompt + answer])
                with torch.no_grad():
                    logits, feats = tgt(x, layer_inputs=dr.c.target_layers)
                    # the top-1 probability of the token at answer position i, predicted from i - 1
                    probs = torch.softmax(logits[0, len(prompt) - 1 : x.shape[1] - 1].float(), -1)
                p1 = probs.max(-1).values.tolist()
                drafts = every_drafts(tgt, dr, prompt, answer, a.budget, feats=feats)
                xs = prompt + answer
                steps = walk(drafts, xs, len(prompt), len(xs) - 1)
                t = tally(p1, steps, len(prompt), len(answer), a.budget)
                for k in tot:
                    tot[k] = [u + v for u, v in zip(tot[k], t[k])]
            out["categories"][cat] = tot
            print(table({cat: tot}), flush=True)
    finally:
        eng.close()
    if a.out:
        a.out.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
