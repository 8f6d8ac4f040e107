"""Checks that the exported pair is the trained pair, and measures it in the engine.

* tokenizer: llama.cpp (the target GGUF) tokenizes held-out text exactly as ``tokenizer.json``;
* target: PyTorch greedy continuation == the engine's autoregressive one (f32 export: identical;
  quantised: the fraction of agreeing tokens is reported);
* drafter: for the same context, llama.cpp's draft (the engine's ``Drafter.draft``) == the PyTorch
  drafter's, and their logits agree: this is what validates the PyTorch drafter math against
  ``src/models/dflash.cpp``;
* acceptance: chain speculative vs autoregressive at temperature 0 on held-out prompts: lossless
  (identical tokens) and the mean commit length per budget.

    python -m engine_bridge.training.verify --ckpt DIR --data DIR --target T.gguf --draft D.gguf

Needs torch (the train extra) *and* the engine (llama-cpp-python) in one interpreter.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import numpy as np


def load_prompts(path: str | Path, n: int | None = None) -> list[str]:
    out = [json.loads(line)["prompt"] for line in Path(path).read_text().splitlines() if line.strip()]
    return out[:n] if n else out


def check_tokenizer(target_gguf, tokenizer_json, texts: list[str]) -> dict:
    from ..runtime.native import Model
    from .data import load_tokenizer

    tok = load_tokenizer(tokenizer_json)
    m = Model(Path(target_gguf), 0)
    try:
        bad = 0
        for t in texts:
            ours = [0] + tok.encode(t, add_special_tokens=False).ids
            theirs = m.tokenize(t, add_special=True, parse_special=False)
            bad += ours != list(theirs)
        return {"texts": len(texts), "mismatches": bad}
    finally:
        m.free()


def _engine(target, draft=None, **kw):
    from ..runtime.config import EngineConfig
    from ..runtime.engine import Engine
    from ..models.pair_preflight import PAIR_PREFLIGHT

    return Engine.load(
        EngineConfig(
            target=Path(target),
            draft=Path(draft) if draft else None,
            n_ctx=2048,
            n_gpu_layers=kw.pop("n_gpu_layers", 0),
            draft_n_gpu_layers=kw.pop("draft_n_gpu_layers", 0),
            **kw,
        ),
        preflight=PAIR_PREFLIGHT,
    )


def check_target(ckpt, target_gguf, prompts: list[str], n: int = 48) -> dict:
    import torch

    from ..runtime.config import GenerationSettings
    from .train_target import load_target

    model = load_target(ckpt)
    eng = _engine(target_gguf)
    agree, total, identical = 0, 0, 0
    try:
        for p in prompts:
            toks = eng.tokenize(p)
            ref = model.greedy(torch.tensor([toks]), n)[0, len(toks) :].tolist()
            eng.reset()
            got = list(eng.generate(toks, GenerationSettings(mode="ar", max_tokens=n, stop_at_eog=False)).tokens)
            k = next((i for i, (a, b) in enumerate(zip(ref, got)) if a != b), min(len(ref), len(got)))
            agree += k
            total += len(ref)
            identical += ref == got
    finally:
        eng.close()
    return {"prompts": len(prompts), "identical": identical, "agreeing_prefix_fraction": agree / max(total, 1)}


def check_drafter(ckpt, target_gguf, drafter_gguf, prompts: list[str], n: int = 7) -> dict:
    """llama.cpp's draft logits against the PyTorch drafter's for the same context.

    ``max_abs_logit_diff`` compares the engine's rows with block slots 1..n (where the drafts
    belong); ``shifted_max_abs_logit_diff`` with slots 0..n-1, so a one-slot misalignment in the
    engine shows as a small shifted and a large aligned difference.
    """
    import torch

    from .train_drafter import features, load_drafter
    from .train_target import load_target

    target = load_target(ckpt)
    drafter, _ = load_drafter(ckpt)
    eng = _engine(target_gguf, drafter_gguf, backend_sampling=False)
    same_tokens, slots, max_diff, shifted = 0, 0, 0.0, 0.0
    try:
        for p in prompts:
            toks = eng.tokenize(p)
            eng.reset()
            eng._prefill(toks, need_features=True)
            x = torch.tensor([toks])
            with torch.no_grad():
                logits, _ = target(x)
                last = int(logits[0, -1].argmax())
                feats = features(target, x, drafter.c.target_layers)
                block = torch.tensor([[[last] + [drafter.c.mask_token_id] * n]])
                full = drafter(feats, torch.tensor([[len(toks)]]), block, target.embed_tokens.weight)[0, 0].numpy()
            got_tokens, got_logits = eng.drafter.draft(last, len(toks), n)
            ref_tokens = full[1:].argmax(-1).tolist()
            same_tokens += sum(int(a == b) for a, b in zip(ref_tokens, got_tokens))
            slots += n
            if got_logits is not None:
                g = np.asarray(got_logits)[:n]
                max_diff = max(max_diff, float(np.abs(g - full[1:]).max()))
                shifted = max(shifted, float(np.abs(g - full[:-1]).max()))
    finally:
        eng.close()
    return {
        "prompts": len(prompts),
        "draft_tokens_equal": same_tokens / max(slots, 1),
        "max_abs_logit_diff": max_diff,
        "shifted_max_abs_logit_diff": shifted,
    }


def measure(
    target_gguf, drafter_gguf, prompts: list[str], budgets=(7, 15), max_tokens: int = 128, n_gpu_layers: int = 0
) -> dict:
    """Lossless check and mean commit length (chain, temperature 0) per budget."""
    from ..runtime.config import GenerationSettings

    eng = _engine(target_gguf, drafter_gguf, n_gpu_layers=n_gpu_layers, draft_n_gpu_layers=n_gpu_layers)
    out: dict = {"prompts": len(prompts), "max_tokens": max_tokens, "budgets": {}}
    try:
        ar = []
        for p in prompts:
            eng.reset()
            ar.append(list(eng.generate(p, GenerationSettings(mode="ar", max_tokens=max_tokens)).tokens))
        for b in budgets:
            commits, lossless, drafted, accepted, steps = [], 0, 0, 0, 0
            for p, ref in zip(prompts, ar):
                eng.reset()
                r = eng.generate(p, GenerationSettings(mode="chain", budget=b, max_tokens=max_tokens))
                lossless += list(r.tokens) == ref
                commits.append(r.summary.mean_commit_len)
                drafted += r.summary.n_drafted
                accepted += r.summary.n_accepted
                steps += r.summary.n_steps
            out["budgets"][b] = {
                "lossless": f"{lossless}/{len(prompts)}",
                "mean_commit_len": round(statistics.fmean(commits), 3),
                "mean_commit_len_pooled": round(sum(len(a) for a in ar) / max(steps, 1), 3),
                "acceptance_rate": round(accepted / max(drafted, 1), 3),
            }
    finally:
        eng.close()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--n", type=int, default=8, help="prompts for the PyTorch comparisons")
    ap.add_argument("--measure", type=int, default=0, help="prompts for the acceptance measurement")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args(argv)
    import torch

    torch.set_num_threads(a.threads)
    prompts = load_prompts(Path(a.data) / "prompts.jsonl")
    res = {"tokenizer": check_tokenizer(a.target, Path(a.data) / "tokenizer.json", prompts)}
    print(json.dumps(res), flush=True)
    res["target"] = check_target(a.ckpt, a.target, prompts[: a.n])
    print(json.dumps(res["target"]), flush=True)
    res["drafter"] = check_drafter(a.ckpt, a.target, a.draft, prompts[: a.n])
    print(json.dumps(res["drafter"]), flush=True)
    if a.measure:
        res["measure"] = measure(a.target, a.draft, prompts[: a.measure])
        print(json.dumps(res["measure"]), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
