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


def every_drafts(tgt, dr, prompt: list[int], answer: list[int], budget: int) -> dict[int, list[int]]:
    """The drafter's first ``budget`` drafts of a whole block opened at every answer position."""
    import torch

    from engine_bridge.training.walk import span_drafts

    x = torch.tensor([prompt + answer])
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


def torch_scores(tgt, dr, prompt: list[int], answer: list[int], budget: int):
    """(the walk's accepted drafts per step, the accepted drafts of a block at every answer position),
    both over the first ``budget`` slots of a whole block."""
    from engine_bridge.training.walk import matched, walk

    x = prompt + answer
    drafts = every_drafts(tgt, dr, prompt, answer, budget)
    every = [matched(d, x[a + 1 : a + 1 + budget]) for a, d in sorted(drafts.items())]
    return [k for _, k in walk(drafts, x, len(prompt), len(x) - 1)], every


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", type=Path, required=True)
    ap.add_argument("--draft", type=Path, required=True)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompts", type=Path, help="JSONL with messages and category")
    src.add_argument(
        "--public", action="store_true", help="the public suites (MT-Bench, GSM8K test 100, HumanEval): reporting only"
    )
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--budget", type=int, default=7)
    ap.add_argument("--limit", type=int, default=0, help="first N prompts per category (0: all)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    os.environ.setdefault("DFLASH_DRAFT_FULL_BLOCK", "1")  # a GPU's whole blocks, as the trainer scores

    import torch

    from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
    from engine_bridge.runtime.config import EngineConfig, GenerationSettings
    from engine_bridge.runtime.engine import Engine

    torch.set_num_threads(a.threads)
    if a.public:
        from engine_bridge.training.evaluate_chat import public_prompts

        items = public_prompts()
    else:
        items = [json.loads(line) for line in a.prompts.read_text().splitlines() if line.strip()]
    cats: dict[str, list[dict]] = {}
    for it in items:
        cats.setdefault(it.get("category", "all"), []).append(it)
    if a.limit:
        cats = {c: v[: a.limit] for c, v in cats.items()}
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
            n_eng = sum(len(r["engine"]) for r in rows)
            n_walk = sum(len(r["walk"]) for r in rows)
            summary = {
                "n": len(rows),
                "engine_accepted_per_step": sum(sum(r["engine"]) for r in rows) / max(n_eng, 1),
                "walk_accepted_per_step": sum(sum(r["walk"]) for r in rows) / max(n_walk, 1),
                "every_position_accepted": statistics.fmean(r["every_mean"] for r in rows),
                "walks_equal_engine": sum(r["engine"] == r["walk"] for r in rows),
                "identical_to_ar": sum(r["identical_to_ar"] for r in rows),
            }
            out["categories"][cat] = {"summary": summary, "rows": rows}
            print(
                f"{cat:6s} n={summary['n']:3d}  engine {summary['engine_accepted_per_step']:.3f}  "
                f"walk {summary['walk_accepted_per_step']:.3f}  every position {summary['every_position_accepted']:.3f}  "
                f"walk == engine on {summary['walks_equal_engine']}/{summary['n']}",
                flush=True,
            )
    finally:
        eng.close()
    if a.out:
        a.out.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
