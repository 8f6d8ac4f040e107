"""How far verify batches' logits drift from one-token decodes on this machine (issue 29).

Decodes each prompt's greedy AR answer again as chain and tree verify batches of each width
(engine_bridge.bench.drift) and prints, per shape, the largest logit difference, the largest shift
of the AR top-2 margin and the flips. The largest margin shift is the near-tie bound for this
device and precision: a divergence from AR with a larger AR top-2 gap is a bug.

Prompts: the validation split of our training sources (resources/prompts/train, split "val"),
``--per-category`` of chat, math and code: a bound is a choice, so it is not made on public
benchmark prompts.

    python benchmarks/bench_drift.py --per-category 4 --tokens 64 --json docs/runs/drift-cpu.json
    python benchmarks/bench_drift.py --target T.gguf --draft D.gguf --gpu-layers 99 --json out.json
    python benchmarks/bench_drift.py ... --gpu-layers 99 --exact     # patch 0016: every row exactly a one-row decode
    python benchmarks/bench_drift.py ... --exact --history 2000       # the same after a 2,000-token chat

``--history N`` puts a chat of at least N tokens before every measured prompt: earlier validation
requests (not among the measured ones) answered by the target alone, greedy, as a long chat holds
them, so that the verify's attention reads thousands of cells (a long chat's later turns).
"""

from __future__ import annotations

import argparse
import sys

from engine_bridge.bench import drift
from engine_bridge.models import registry_models
from engine_bridge.models.demo import smollm2_drafter
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime.config import EngineConfig, GenerationSettings, KVTypes
from engine_bridge.runtime.engine import Engine
from engine_bridge.training import real_prompts


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", help="target GGUF (default: the default pair's, from the models cache)")
    ap.add_argument("--draft", help="drafter GGUF (default: the shipped SmolLM2 drafter)")
    ap.add_argument("--per-category", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--widths", default=",".join(map(str, drift.WIDTHS)))
    ap.add_argument("--gpu-layers", type=int, default=0)
    ap.add_argument("--threads", type=int)
    ap.add_argument("--kv", default="f16", help="KV cache type (k and v)")
    ap.add_argument(
        "--exact", action="store_true", help="the exact verify's batch-invariant kernels: every drift must be 0"
    )
    ap.add_argument("--history", type=int, default=0, help="tokens of earlier chat before each prompt (0: none)")
    ap.add_argument("--json", help="write the report here")
    a = ap.parse_args(argv)
    target = a.target or registry_models.cached()
    draft = a.draft or smollm2_drafter()
    if target is None or draft is None:
        print(
            "the default pair is not here: run `dflash-studio fetch-default` or give --target/--draft", file=sys.stderr
        )
        return 2
    cfg = EngineConfig(
        target=target,
        draft=draft,
        n_ctx=2048 + a.history + 512 * (a.history > 0),
        n_gpu_layers=a.gpu_layers,
        n_threads=a.threads,
        target_kv=KVTypes(a.kv, a.kv),
        exact=a.exact,
    )
    eng = Engine.load(cfg, preflight=PAIR_PREFLIGHT)
    prompts = []
    history = chat_history(eng, a.history, skip=a.per_category) if a.history else []
    for cat in ("chat", "math", "code"):
        for r in real_prompts.load("val", cat)[: a.per_category]:
            prompts.append(eng.tokenize_chat(history + [{"role": "user", "content": r["text"]}]))
    widths = tuple(int(w) for w in a.widths.split(","))
    rep = drift.measure(
        eng, prompts, a.tokens, widths, progress=lambda i, n: print(f"  prompt {i}/{n}", file=sys.stderr, flush=True)
    )
    eng.close()
    shortest = min(len(p) for p in prompts)
    print(f"{rep.device}, {rep.precision}: {rep.prompts} prompts x {rep.tokens} tokens, {rep.seconds} s")
    if history:
        print(f"after a chat of {len(history) // 2} turns: prompts of {shortest}-{max(len(p) for p in prompts)} tokens")
    print(rep.table())
    print(f"near-tie bound (largest margin shift): {rep.bound:.4g}")
    if a.json:
        drift.save(rep, a.json)
    return 0


def chat_history(eng: Engine, n_tokens: int, skip: int) -> list[dict]:
    """A chat of at least ``n_tokens`` tokens: validation requests after the first ``skip`` of each
    category (those are measured), alternating categories, each answered by the target alone
    (greedy, 128 tokens) as a long chat holds it."""
    pool = [
        r["text"] for rows in zip(*(real_prompts.load("val", c)[skip:] for c in ("chat", "math", "code"))) for r in rows
    ]
    settings = GenerationSettings(mode="ar", max_tokens=128)
    messages: list[dict] = []
    for text in pool:
        if messages and len(eng.tokenize_chat(messages, add_generation_prompt=False)) >= n_tokens:
            return messages
        messages.append({"role": "user", "content": text})
        res = eng.generate(eng.tokenize_chat(messages), settings)
        messages.append({"role": "assistant", "content": res.text})
    raise SystemExit(f"--history {n_tokens}: the validation split holds too few requests")


if __name__ == "__main__":
    raise SystemExit(main())
