"""Stage ``prepare``: the prompts of ``chat_prompts`` rendered through the target's own chat template
and tokenized by llama.cpp (the engine's tokenizer), into a small data folder.

    python -m engine_bridge.training.chat_data --target T.gguf --out DIR

DIR holds ``meta.json`` (target, tokens that end a turn, mask token, sources and licences, counts),
``prompts.npz`` (``ids`` int32 flat, ``offsets`` int64, ``category`` int8: the rendered training
prompts), ``prompts.jsonl`` (their text, category and source) and ``heldout.jsonl`` (the held-out
prompts in the bench's suite format, with a category). A few MB: it travels to the GPU machine,
which needs neither llama.cpp nor jinja2 (generation and training read only these files and the
target GGUF).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Callable

import numpy as np

from . import chat_prompts

FORMAT = 1


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def pick_mask_token(model, template: str) -> int:
    """The drafter's mask token when the target's vocabulary has none (SmolLM2 has none).

    llama.cpp's DFlash feeds ``tokenizer.ggml.mask_token_id`` of the drafter GGUF into the block
    (``common/speculative.cpp``: ``llama_vocab_mask``); the token only has to be a valid id whose
    embedding the drafter learns to read as "to be drafted". A control token that never occurs in a
    conversation suits: the highest-id control token that is not BOS/EOS/end-of-generation and does
    not appear in the chat template. An explicit ``<mask>``-like token wins when the vocab has one.
    A vocabulary without a spare control token (GPT-2's) gets its highest-id ordinary token, the
    last BPE merge, about the rarest piece of text there is."""
    from ..runtime.llama_ffi import C

    v = model.vocab
    own = int(C.llama_vocab_mask(v))
    if own >= 0:
        return own
    reserved = {int(C.llama_vocab_bos(v)), int(C.llama_vocab_eos(v)), int(C.llama_vocab_eot(v)),
                int(C.llama_vocab_pad(v))}
    best = -1
    for tid in range(model.n_vocab):
        if not C.llama_vocab_is_control(v, tid) or tid in reserved or model.is_eog(tid):
            continue
        text = model.token_text(tid)
        if text and text in (template or ""):
            continue
        best = tid
    if best >= 0:
        return best
    for tid in range(model.n_vocab - 1, -1, -1):
        if tid not in reserved and not model.is_eog(tid) and not C.llama_vocab_is_control(v, tid):
            return tid
    raise ValueError("the target's vocabulary has no usable mask token; give --mask-token-id")


def end_tokens(model) -> list[int]:
    """Every token llama.cpp treats as end of generation (generation stops at any of them)."""
    return [t for t in range(model.n_vocab) if model.is_eog(t)]


def prepare(target: str | Path, out: str | Path, *, n_per_category: int = 3000, variants: int = 2, seed: int = 0,
            mask_token_id: int | None = None, heldout_copy: str | Path | None = None,
            log: Callable[[str], None] = print) -> dict:
    from ..runtime.chat_template import render_chat
    from ..runtime.llama_ffi import C
    from ..runtime.native import Model

    target = Path(target)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model = Model(target, n_gpu_layers=0)
    template = model.chat_template()
    if not template:
        raise ValueError(f"{target.name} has no chat template (tokenizer.chat_template): a base model; "
                         "train its drafter on text instead")
    v = model.vocab
    bos = model.token_text(C.llama_vocab_bos(v)) if C.llama_vocab_bos(v) >= 0 else ""
    eos = model.token_text(C.llama_vocab_eos(v)) if C.llama_vocab_eos(v) >= 0 else ""

    def render(text: str, system: str | None) -> str:
        msgs = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": text}]
        return render_chat(template, msgs, bos_token=bos, eos_token=eos, add_generation_prompt=True)

    composed, held = chat_prompts.compose(n_per_category, seed)
    # each request once with the template's own default (what the app sends) and, for variants > 1,
    # again under one of our system messages
    train = []
    for p in composed:
        train.append({**p, "system": None})
        if variants > 1:
            train.append({**p, "id": p["id"] + "-s", "system": chat_prompts.system_prompt_for(p["text"])})
    ids, offsets, cats = [], [0], []
    with open(out / "prompts.jsonl", "w") as f:
        for i, p in enumerate(train):
            # the engine's own path for a chat message: template -> text -> llama_tokenize(add_special, parse_special)
            toks = model.tokenize(render(p["text"], p["system"]), add_special=True, parse_special=True)
            ids.extend(toks)
            offsets.append(len(ids))
            cats.append(chat_prompts.CATEGORIES.index(p["category"]))
            f.write(json.dumps(p) + "\n")
            if (i + 1) % 5000 == 0:
                log(f"prepare: {i + 1}/{len(train)} prompts tokenized")
    # uint16 where the vocabulary allows: the folder travels to the GPU machine (64 MiB a call)
    np.savez_compressed(out / "prompts.npz", ids=np.asarray(ids, dtype=np.uint16 if model.n_vocab <= 65535 else np.int32),
                        offsets=np.asarray(offsets, dtype=np.int64), category=np.asarray(cats, dtype=np.int8))
    held_lines = []
    for p in held:
        held_lines.append(json.dumps({"id": p["id"], "category": p["category"], "source": p["source"],
                                      "template": p["template"],
                                      "messages": [{"role": "user", "content": p["text"]}]}))
    (out / "heldout.jsonl").write_text("\n".join(held_lines) + "\n")
    if heldout_copy:
        Path(heldout_copy).parent.mkdir(parents=True, exist_ok=True)
        Path(heldout_copy).write_text("\n".join(held_lines) + "\n")

    lens = np.diff(np.asarray(offsets))
    stops = end_tokens(model)
    mask = int(mask_token_id) if mask_token_id is not None else pick_mask_token(model, template)
    meta = {
        "format": FORMAT, "kind": "chat-prompts",
        "target": {"file": target.name, "sha256": file_sha256(target), "arch": model.meta("general.architecture"),
                   "name": model.meta("general.name"), "n_vocab": model.n_vocab, "n_layer": model.n_layer,
                   "n_embd": model.n_embd,
                   "chat_template_sha256": hashlib.sha256(template.encode()).hexdigest()},
        "vocab_size": model.n_vocab, "stop_ids": stops, "mask_id": mask, "mask_token": model.token_text(mask),
        "eos_id": int(C.llama_vocab_eos(v)), "pad_id": int(C.llama_vocab_eos(v)),
        "categories": list(chat_prompts.CATEGORIES),
        "counts": {c: int(sum(1 for p in train if p["category"] == c)) for c in chat_prompts.CATEGORIES},
        "heldout_counts": {c: int(sum(1 for p in held if p["category"] == c)) for c in chat_prompts.EVAL_CATEGORIES},
        "n_prompts": len(train), "prompt_tokens": int(lens.sum()), "prompt_len_max": int(lens.max()),
        "prompt_len_mean": round(float(lens.mean()), 1),
        "sources": chat_prompts.SOURCES, "seed": seed, "n_per_category": n_per_category, "variants": variants,
        "distinct_requests": len(composed),
        "python": sys.version.split()[0],
        "benchmarks_excluded": ["MT-Bench", "AlpacaEval", "HumanEval", "MBPP", "GSM8K", "MATH"],
    }
    meta["turns"] = turn_fragments(model, template, bos, eos, stops, log)
    (out / "meta.json").write_text(json.dumps(meta, indent=1))
    log(f"prepare: {len(train)} training prompts ({meta['prompt_tokens']} tokens, mean {meta['prompt_len_mean']}), "
        f"{len(held)} held-out; mask token {mask} {meta['mask_token']!r}; stop ids {stops} -> {out}")
    return meta


def turn_fragments(model, template: str, bos: str, eos: str, stops: list[int], log) -> dict | None:
    """The template's turn boundaries as ids (``chat_turns``), for Magpie prompts and follow-up
    turns on the GPU machine; None (said) when the template cannot express them."""
    from ..runtime.chat_template import render_chat
    from .chat_turns import TemplateTurnsError, fragments

    try:
        return fragments(lambda msgs, gen: render_chat(template, msgs, bos_token=bos, eos_token=eos,
                                                       add_generation_prompt=gen),
                         lambda text, special: model.tokenize(text, add_special=special, parse_special=True), stops)
    except (TemplateTurnsError, ValueError) as e:
        log(f"prepare: no multi-turn fragments ({e}): single-turn data only")
        return None


def load_prompts(folder: str | Path) -> tuple[list[np.ndarray], np.ndarray, dict]:
    """(token ids per prompt, category index per prompt, meta) of a prepared folder (numpy only)."""
    folder = Path(folder)
    meta = json.loads((folder / "meta.json").read_text())
    z = np.load(folder / "prompts.npz")
    ids, off = z["ids"], z["offsets"]
    return [ids[off[i]:off[i + 1]] for i in range(len(off) - 1)], z["category"], meta


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--per-category", type=int, default=3000)
    ap.add_argument("--variants", type=int, default=2, help="renderings per request (2: also under a system message)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mask-token-id", type=int, default=None)
    a = ap.parse_args(argv)
    prepare(a.target, a.out, n_per_category=a.per_category, variants=a.variants, seed=a.seed,
            mask_token_id=a.mask_token_id)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
