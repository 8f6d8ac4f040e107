"""The public prompts rendered through a target's chat template, for upstream's drivers.

Upstream's `llama-completion` and `llama-speculative-simple` take a raw prompt; ours take the
conversation. This writes the first N prompts of each category (MT-Bench first turns = chat, GSM8K
test = math, HumanEval = code; the order `dflash-studio bench --suite ... --limit N` reads them in)
as DIR/CAT-rendered.jsonl, one {"id", "prompt"} a line, which gpu_upstream.py --prompt-file reads.

    python gpu/gpu_render_prompts.py TARGET.gguf DIR N [--cats chat,math,code]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine_bridge.runtime.chat_template import render_chat  # noqa: E402
from engine_bridge.runtime.native import Model  # noqa: E402
from engine_bridge.training.evaluate_chat import public_prompts  # noqa: E402


def render(target: str, out: Path, n: int, cats=("chat", "math", "code")) -> dict[str, int]:
    """Writes out/CAT-rendered.jsonl for each category; returns how many prompts each holds."""
    tmpl = Model(target, n_gpu_layers=0).chat_template()
    items = public_prompts()
    out.mkdir(parents=True, exist_ok=True)
    counts = {}
    for cat in cats:
        sel = [r for r in items if r["category"] == cat][:n]
        with open(out / f"{cat}-rendered.jsonl", "w") as g:
            for r in sel:
                prompt = render_chat(tmpl, r["messages"], add_generation_prompt=True)
                g.write(json.dumps({"id": r.get("id"), "prompt": prompt}) + "\n")
        counts[cat] = len(sel)
    return counts


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("target")
    ap.add_argument("out", type=Path)
    ap.add_argument("n", type=int)
    ap.add_argument("--cats", default="chat,math,code")
    a = ap.parse_args(argv)
    for cat, k in render(a.target, a.out, a.n, tuple(a.cats.split(","))).items():
        print(cat, k, "prompts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
