"""Why the trainer's held-out acceptance is higher than the engine's: random anchors or a mismatch?

The trainer scores a drafter on blocks opened at uniformly random positions of held-out answers
("accepted drafts per block"). The engine opens a block only where the previous step ended: right
after the token that the drafter got wrong and the target corrected. This script puts the two side by
side on the same answers, with one drafter:

* ``engine``: llama.cpp's chain steps (accepted drafts per step, first ``--budget`` slots), on CPU;
* ``walk``: the PyTorch drafter (read from the same GGUF) fed by the PyTorch target (read from the
  target's GGUF), walking the engine's own answer as the engine does: a block opens at the first
  response token, its drafts are compared with the answer, the next block opens after the accepted
  drafts and the target's token. If the torch walk and the engine agree step by step, the two
  implementations draft alike and any gap to the trainer's figure is the anchors';
* ``every``: the same drafter with a block opened at every position of the answer (the expectation
  of the trainer's random anchors), first ``--budget`` slots.

    python benchmarks/drafter_walk.py --target T.gguf --draft D.gguf \
        --prompts resources/models/smollm2/prompts.jsonl --max-tokens 128 --budget 7
    python benchmarks/drafter_walk.py --target T.gguf --draft D.gguf --public ...   # report only
    python benchmarks/drafter_walk.py --summary walk48.json   # a saved run's figures, printed again

Runs on CPU (the engine with 2 threads and full blocks, as a GPU drafts). Prints a table per
category and writes JSON with ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def torch_pair(target: Path, draft: Path):
    """The PyTorch target and drafter, both read from their GGUFs (f32)."""
    from engine_bridge.training.drafter_gguf import drafter_from_gguf
    from engine_bridge.training.gguf_target import load_gguf_target

    tgt = load_gguf_target(target)
    return tgt, drafter_from_gguf(draft, tgt)


def every_drafts(tgt, dr, prompt: list[int], answer: list[int], budget: int, feats=None) -> dict[int, list[int]]:
    """The drafter's first ``budget`` drafts of a whole block opened at every answer position;
    ``feats``: the target's layer inputs over prompt + answer when the caller has them already."""
    import torch

    from engine_bridge.training.walk import span_drafts

    x = torch.tensor([prompt + answer])
    if feats is None:
        with torch.no_grad():
            _, feats = tgt(x, layer_inputs=dr.c.target_layers)
    span = [(len(prompt), x.shape[1] - 1)]
    return span_drafts(
        dr,
        torch.cat(feats, -1),
        x,
        span,
        dr.c.block_size,
        budget,
        dr.c.mask_token_id,
        tgt.embed_tokens.weight,
        tgt.lm_head_weight,
    )[0]


def prompts_by_category(path: Path | None, limit: int = 0) -> dict[str, list[dict]]:
    """The prompts of a suite file (JSONL with messages and a category), or the public suites when
    ``path`` is None, grouped by category; the first ``limit`` of each (0: all)."""
    if path is None:
        from engine_bridge.training.evaluate_chat import public_prompts

        items = public_prompts()
    else:
        items = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    cats: dict[str, list[dict]] = {}
    for it in items:
        cats.setdefault(it.get("category", "all"), []).append(it)
    return {c: v[:limit] for c, v in cats.items()} if limit else cats


def torch_scores(tgt, dr, prompt: list[int], answer: list[int], budget: int):
    """(the walk's accepted drafts per step, the accepted drafts of a block at every answer position),
    both over the first ``budget`` slots of a whole block."""
    from engine_bridge.training.walk import matched, walk

    x = prompt + answer
    drafts = every_drafts(tgt, dr, prompt, answer, budget)
    every = [matched(d, x[a + 1 : a + 1 + budget]) for a, d in sorted(drafts.items())]
    return [k for _, k in walk(drafts, x, len(prompt), len(x) - 1)], every


def summarize(rows: list[dict]) -> dict:
    """A category's figures from its rows (the engine's and the walk's accepted drafts per step, a
    block at every position, agreement, and how the engine's step after a step that took no draft
    does)."""
    n_eng = sum(len(r["engine"]) for r in rows)
    n_walk = sum(len(r["walk"]) for r in rows)
    pairs = [(p, q) for r in rows for p, q in zip(r["engine"][:-1], r["engine"][1:])]
    after0 = [q for p, q in pairs if p == 0]
    after = [q for p, q in pairs if p > 0]
    walk = statistics.fmean(k for r in rows for k in r["walk"]) if n_walk else 0.0
    every = statistics.fmean(r["every_mean"] for r in rows) if rows else 0.0
    return {
        "n": len(rows),
        "engine_accepted_per_step": sum(sum(r["engine"]) for r in rows) / max(n_eng, 1),
        "walk_accepted_per_step": walk,
        "every_position_accepted": every,
        "walk_over_every": walk / every if every else 0.0,
        "walks_equal_engine": sum(r["engine"] == r["walk"] for r in rows),
        "identical_to_ar": sum(r["identical_to_ar"] for r in rows),
        # steps the two take alike before a request's first parting, of the steps both take
        "steps_agree": sum(r["steps_agree"] for r in rows),
        "steps_compared": sum(min(len(r["engine"]), len(r["walk"])) for r in rows),
        "walk_zero_share": sum(k == 0 for r in rows for k in r["walk"]) / max(n_walk, 1),
        "engine_after_zero": statistics.fmean(after0) if after0 else 0.0,
        "engine_after_some": statistics.fmean(after) if after else 0.0,
        "engine_zero_after_zero": sum(q == 0 for q in after0) / max(len(after0), 1),
        "engine_zero_share": sum(q == 0 for _, q in pairs) / max(len(pairs), 1),
    }


def line(cat: str, s: dict) -> str:
    return (
        f"{cat:6s} n={s['n']:3d}  engine {s['engine_accepted_per_step']:.3f}  walk {s['walk_accepted_per_step']:.3f}  "
        f"every position {s['every_position_accepted']:.3f} (walk / every {s['walk_over_every']:.2f})  "
        f"walk == engine on {s['walks_equal_engine']}/{s['n']}, steps alike before a parting "
        f"{s['steps_agree']}/{s['steps_compared']}  identical to AR {s['identical_to_ar']}  "
        f"no draft taken {s['walk_zero_share']:.0%} (walk)  engine after a step that took none "
        f"{s['engine_after_zero']:.2f} / after one that took some {s['engine_after_some']:.2f}, "
        f"P(0|0) {s['engine_zero_after_zero']:.2f} P(0) {s['engine_zero_share']:.2f}"
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", type=Path)
    ap.add_argument("--draft", type=Path)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompts", type=Path, help="JSONL with messages and category")
    src.add_argument("--summary", type=Path, help="print the figures of a saved --out JSON again (no run)")
    src.add_argument(
        "--public", action="store_true", help="the public suites (MT-Bench, GSM8K test 100, HumanEval): reporting only"
    )
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--budget", type=int, default=7)
    ap.add_argument("--limit", type=int, default=0, help="first N prompts per category (0: all)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    if a.summary:
        for cat, v in json.loads(a.summary.read_text())["categories"].items():
            print(line(cat, summarize(v["rows"])))
        return 0
    if a.target is None or a.draft is None:
        ap.error("--target and --draft are needed to run (only --summary goes without)")
    os.environ.setdefault("DFLASH_DRAFT_FULL_BLOCK", "1")  # a GPU's whole blocks, as the trainer scores

    import torch

    from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
    from engine_bridge.runtime.config import EngineConfig, GenerationSettings
    from engine_bridge.runtime.engine import Engine

    torch.set_num_threads(a.threads)
    cats = prompts_by_category(None if a.public else a.prompts, a.limit)
    eng = Engine.load(
        EngineConfig(
            target=a.target, draft=a.draft, n_ctx=2048, n_gpu_layers=0, draft_n_gpu_layers=0, n_threads=a.threads
        ),
        check=True,
        preflight=PAIR_PREFLIGHT,
    )
    tgt, dr = torch_pair(a.target, a.draft)
    out: dict = {"target": a.target.name, "draft": a.draft.name, "budget": a.budget, "categories": {}}
    try:
        for cat, its in cats.items():
            rows = []
            for it in its:
                text = eng.format_chat(it["messages"][:1])
                prompt = eng.tokenize(text)
                eng.reset()
                ar = eng.generate(text, GenerationSettings(mode="ar", max_tokens=a.max_tokens))
                eng.reset()
                ch = eng.generate(text, GenerationSettings(mode="chain", budget=a.budget, max_tokens=a.max_tokens))
                spec = [s for s in ch.steps if not s.prefill]
                eng_acc = [s.accepted for s in spec]
                walk, every = torch_scores(tgt, dr, prompt, list(ar.tokens), a.budget)
                same_prefix = 0
                for p, q in zip(eng_acc, walk):
                    if p != q:
                        break
                    same_prefix += 1
                rows.append(
                    {
                        "id": it.get("id"),
                        "identical_to_ar": list(ch.tokens) == list(ar.tokens),
                        "engine": eng_acc,
                        "walk": walk,
                        "steps_agree": same_prefix,
                        "every_mean": statistics.fmean(every) if every else 0.0,
                    }
                )
            summary = summarize(rows)
            out["categories"][cat] = {"summary": summary, "rows": rows}
            print(line(cat, summary), flush=True)
    finally:
        eng.close()
    if a.out:
        a.out.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
