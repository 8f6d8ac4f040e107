"""Stage ``evaluate``: a trained drafter measured through llama.cpp (our engine) on held-out prompts.

For every held-out prompt (``heldout.jsonl`` of ``chat_data``: chat, code, math; rendered with the
target's chat template exactly as the app renders a chat message) the target's greedy answer
(AR) is the reference; chain at each budget and tree at each budget must reproduce it token for
token (losslessness) and report their mean commit length (tokens committed per target step).
Prints a table and returns / writes JSON.

    python -m engine_bridge.training.evaluate_chat --target T.gguf --draft D.gguf --prompts heldout.jsonl
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Callable


def load_heldout(path: str | Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


#: the public evaluation suites (resources/prompts/public) and the category each one stands for
PUBLIC_SUITES = {"mt_bench.jsonl": "chat", "gsm8k_test.jsonl": "math", "humaneval.jsonl": "code"}


def public_prompts(folder: str | Path | None = None) -> list[dict]:
    """MT-Bench's first turns (chat), the first 100 GSM8K test problems (math) and HumanEval (code) as
    one suite: what acceptance and speed are reported on. Measuring only: never trained on."""
    folder = Path(folder) if folder else Path(__file__).resolve().parents[2] / "resources" / "prompts" / "public"
    items = []
    for name, cat in PUBLIC_SUITES.items():
        for it in load_heldout(folder / name):
            first = next(m for m in it["messages"] if m["role"] == "user")
            items.append({**it, "category": cat, "suite_category": it.get("category"), "messages": [first]})
    return items


def evaluate(
    target: str | Path,
    draft: str | Path,
    prompts,
    *,
    budgets=(7, 15),
    tree_budgets=(7, 15),
    max_tokens: int = 128,
    n_per_category: int | None = None,
    n_gpu_layers: int = -1,
    log: Callable[[str], None] = print,
    cancel=None,
    n_threads: int | None = None,
) -> dict:
    from ..runtime.config import EngineConfig, GenerationSettings
    from ..runtime.engine import Engine
    from ..models.pair_preflight import PAIR_PREFLIGHT

    items = list(prompts) if isinstance(prompts, (list, tuple)) else load_heldout(prompts)
    cats: dict[str, list[dict]] = {}
    for it in items:
        cats.setdefault(it.get("category", "all"), []).append(it)
    if n_per_category:
        cats = {c: v[:n_per_category] for c, v in cats.items()}
    eng = Engine.load(
        EngineConfig(
            target=Path(target),
            draft=Path(draft),
            n_ctx=2048,
            n_gpu_layers=n_gpu_layers,
            draft_n_gpu_layers=n_gpu_layers,
            n_threads=n_threads,
        ),
        check=True,
        preflight=PAIR_PREFLIGHT,
    )
    modes = [("chain", b) for b in budgets]
    if eng.tree_capable:
        modes += [("tree", b) for b in tree_budgets]
    res: dict = {
        "target": Path(target).name,
        "draft": Path(draft).name,
        "max_tokens": max_tokens,
        "prompts": str(prompts) if not isinstance(prompts, (list, tuple)) else f"{len(items)} prompts",
        "categories": {},
        "modes": [f"{m}-{b}" for m, b in modes],
    }
    t0 = time.time()
    try:
        for cat, its in cats.items():
            texts = [eng.format_chat(it["messages"]) for it in its]
            ar, ar_s = [], 0.0
            for t in texts:
                if cancel is not None and cancel.is_set():
                    raise KeyboardInterrupt
                eng.reset()
                t1 = time.perf_counter()
                r = eng.generate(t, GenerationSettings(mode="ar", max_tokens=max_tokens))
                ar_s += time.perf_counter() - t1
                ar.append(list(r.tokens))
            ar_tok = sum(len(a) for a in ar)
            # speed as the user sees it (prefill included, one pass per prompt): a ratio to AR taken
            # in the same run is what means something, not the absolute tok/s
            row: dict = {
                "n": len(its),
                "ar_mean_len": round(statistics.fmean(len(a) for a in ar), 1),
                "ar_tok_s": round(ar_tok / max(ar_s, 1e-9), 1),
            }
            for mode, b in modes:
                commits, lossless, gen, steps, secs = [], 0, 0, 0, 0.0
                for t, ref in zip(texts, ar):
                    if cancel is not None and cancel.is_set():
                        raise KeyboardInterrupt
                    eng.reset()
                    t1 = time.perf_counter()
                    r = eng.generate(t, GenerationSettings(mode=mode, budget=b, max_tokens=max_tokens))
                    secs += time.perf_counter() - t1
                    assert r.summary is not None
                    lossless += list(r.tokens) == ref
                    commits.append(r.summary.mean_commit_len)
                    gen += len(r.tokens)
                    steps += r.summary.n_steps
                row[f"{mode}-{b}"] = {
                    "mean_commit_len": round(statistics.fmean(commits), 3),
                    "pooled_commit_len": round(gen / max(steps, 1), 3),
                    "lossless": lossless,
                    "of": len(texts),
                    "tok_s": round(gen / max(secs, 1e-9), 1),
                    "x_ar": round((gen / max(secs, 1e-9)) / max(row["ar_tok_s"], 1e-9), 3),
                }
            res["categories"][cat] = row
            log(
                f"evaluate: {cat}: "
                + ", ".join(f"{k} {row[k]['mean_commit_len']:.2f}" for k in res["modes"])
                + f" ({time.time() - t0:.0f} s)"
            )
    finally:
        eng.close()
    res["lossless_all"] = all(v[k]["lossless"] == v[k]["of"] for v in res["categories"].values() for k in res["modes"])
    res["seconds"] = round(time.time() - t0, 1)
    return res


def table(res: dict) -> str:
    modes = res["modes"]
    head = "| category | n | " + " | ".join(modes) + " | lossless |"
    sep = "|" + "---|" * (len(modes) + 3)
    lines = [head, sep]
    for cat, row in res["categories"].items():
        ok = sum(row[m]["lossless"] for m in modes)
        tot = sum(row[m]["of"] for m in modes)
        lines.append(
            f"| {cat} | {row['n']} | "
            + " | ".join(f"{row[m]['mean_commit_len']:.2f}" for m in modes)
            + f" | {ok}/{tot} |"
        )
    return "\n".join(lines)


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", required=True)
    ap.add_argument("--draft", required=True)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompts", help="a suite file (JSONL, the bench's format, with a category per line)")
    src.add_argument(
        "--public",
        action="store_true",
        help="the public suites: MT-Bench first turns (chat), GSM8K test 100 (math), HumanEval (code)",
    )
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--n-per-category", type=int, default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--threads", type=int, default=None, help="CPU threads (default: all cores)")
    ap.add_argument("--gpu-layers", type=int, default=-1, help="layers on the GPU (-1: all; 0: CPU only)")
    ap.add_argument(
        "--categories",
        default=None,
        help="only these categories, comma-separated (e.g. chat,math: one process per category)",
    )
    ap.add_argument("--budgets", default="7,15", help="chain budgets, comma-separated (empty: none)")
    ap.add_argument("--tree-budgets", default="7,15", help="tree budgets, comma-separated (empty: none)")
    a = ap.parse_args(argv)
    items = public_prompts() if a.public else load_heldout(a.prompts)
    if a.categories:
        want = {c.strip() for c in a.categories.split(",") if c.strip()}
        have = {it.get("category", "all") for it in items}
        if not want <= have:
            ap.error(f"--categories {a.categories}: the prompts hold {', '.join(sorted(have))}")
        items = [it for it in items if it.get("category", "all") in want]
    res = evaluate(
        a.target,
        a.draft,
        items,
        max_tokens=a.max_tokens,
        budgets=_ints(a.budgets),
        tree_budgets=_ints(a.tree_budgets),
        n_per_category=a.n_per_category,
        n_threads=a.threads,
        n_gpu_layers=a.gpu_layers,
    )
    print(table(res))
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))
    return 0 if res["lossless_all"] else 1


if __name__ == "__main__":
    raise SystemExit(main())


def check_drafter(target: str | Path, draft: str | Path, run_dir: str | Path, texts: list[str], n: int = 7) -> dict:
    """llama.cpp's draft logits against the PyTorch drafter's (f16 shards in ``run_dir``) for the same
    context, the PyTorch side fed by the GGUF target in torch (``gguf_target``). Ties the trained
    weights, the export and ``dflash.cpp`` together: on an f32 target the logits agree to rounding;
    on a quantised one, up to llama.cpp's quantised features."""
    import numpy as np
    import torch

    from ..runtime.config import EngineConfig
    from ..runtime.engine import Engine
    from .gguf_target import load_gguf_target
    from .train_drafter import load_drafter

    tgt = load_gguf_target(target)
    drafter, _ = load_drafter(run_dir)
    eng = Engine.load(
        EngineConfig(
            target=Path(target),
            draft=Path(draft),
            n_ctx=1024,
            n_gpu_layers=0,
            draft_n_gpu_layers=0,
            backend_sampling=False,
        ),
        check=False,
    )
    same, slots, max_diff, scale = 0, 0, 0.0, 0.0
    try:
        for text in texts:
            toks = eng.tokenize(text)
            eng.reset()
            eng._prefill(toks, need_features=True)
            with torch.no_grad():
                logits, feats = tgt(torch.tensor([toks]), layer_inputs=drafter.c.target_layers)
                last = int(logits[0, -1].argmax())
                block = torch.tensor([[[last] + [drafter.c.mask_token_id] * n]])
                head = None if tgt.c.tied else tgt.lm_head.weight
                full = drafter(torch.cat(feats, -1), torch.tensor([[len(toks)]]), block, tgt.embed_tokens.weight, head)[
                    0, 0
                ].numpy()
            assert eng.drafter is not None
            got_tokens, got_logits = eng.drafter.draft(last, len(toks), n)
            ref = full[1:].argmax(-1).tolist()
            same += sum(int(a == b) for a, b in zip(ref, got_tokens))
            slots += n
            if got_logits is not None:
                g = np.asarray(got_logits)[:n]
                max_diff = max(max_diff, float(np.abs(g - full[1:]).max()))
                scale = max(scale, float(np.abs(full[1:]).max()))
    finally:
        eng.close()
    return {
        "texts": len(texts),
        "draft_tokens_equal": same / max(slots, 1),
        "max_abs_logit_diff": max_diff,
        "max_abs_logit": scale,
    }
