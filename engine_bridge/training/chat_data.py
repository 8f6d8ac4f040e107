"""Stage ``prepare``: training prompts rendered through the target's own chat template and tokenized
by llama.cpp (the engine's tokenizer), into a small data folder.

    python -m engine_bridge.training.chat_data --target T.gguf --out DIR [--prompts MINE.jsonl]
        [--prompt-source real|templates]

The prompts: by default the shipped real set (``real_prompts``: public, permissively licensed
sources; its train split, ``--per-category`` drawn per category), or our own templates
(``chat_prompts``); plus a user's JSONL file. Everything is checked against the public evaluation
sets (``decontam``) and refused, with the first hits named, if it overlaps one.

DIR holds ``meta.json`` (target, tokens that end a turn, mask token, sources and licences, counts),
``prompts.npz`` (``ids`` int32 flat, ``offsets`` int64, ``category`` int8: the rendered training
prompts), ``prompts.jsonl.gz`` (their text, category and source; ``load_rows``), ``heldout.jsonl`` (the held-out
prompts in the bench's suite format, with a category: the real set's val split) and ``val.npz`` /
``val.jsonl.gz`` (val-split prompts of every category, for choosing the checkpoint; same layout as
``prompts.npz``). A few MB: it travels to the GPU machine,
which needs neither llama.cpp nor jinja2 (generation and training read only these files and the
target GGUF).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import random
import sys
from pathlib import Path
from typing import Callable

import numpy as np

from . import chat_prompts
from .prompt_files import PromptFileError, read_extra_prompts  # noqa: F401 -- re-exported for callers

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
    reserved = {
        int(C.llama_vocab_bos(v)),
        int(C.llama_vocab_eos(v)),
        int(C.llama_vocab_eot(v)),
        int(C.llama_vocab_pad(v)),
    }
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


PROMPT_SOURCES = ("real", "templates")
HELDOUT_PER_CATEGORY = 16  # held-out (val split) prompts per evaluated category
VAL_PER_CATEGORY = 64  # val-split prompts per category tokenized into val.npz (checkpoint choice)


def _real_prompts(n_per_category: int, seed: int, heldout_per_category: int) -> tuple[list[dict], list[dict], dict]:
    """(training prompts from the train split, held-out prompts from the val split, sources)."""
    from . import real_prompts

    train = [
        {"id": r["id"], "category": r["category"], "text": r["text"], "source": r["source"], "template": r["source"]}
        for r in real_prompts.sample(n_per_category, "train", seed, chat_prompts.CATEGORIES)
    ]
    held = [
        {
            "id": f"val-{r['id']}",
            "category": r["category"],
            "text": r["text"],
            "source": r["source"],
            "template": r["source"],
        }
        for r in real_prompts.sample(heldout_per_category, "val", seed, chat_prompts.EVAL_CATEGORIES)
    ]
    info = real_prompts.sources()
    used = {p["source"] for p in train + held}
    sources = {
        k: f"{v['licence']} ({v['repository']}" + (f" @ {v['commit'][:12]}" if v["commit"] else "") + f": {v['read']})"
        for k, v in info["sources"].items()
        if k in used
    }
    return train, held, sources


def _val_prompts(seed: int) -> list[dict]:
    from . import real_prompts

    return [
        {"id": r["id"], "category": r["category"], "text": r["text"], "source": r["source"]}
        for r in real_prompts.sample(VAL_PER_CATEGORY, "val", seed, chat_prompts.CATEGORIES)
    ]


def prepare(
    target: str | Path,
    out: str | Path,
    *,
    n_per_category: int = 3000,
    variants: int = 2,
    seed: int = 0,
    mask_token_id: int | None = None,
    heldout_copy: str | Path | None = None,
    source: str = "real",
    extra_prompts: str | Path | None = None,
    heldout_per_category: int = HELDOUT_PER_CATEGORY,
    log: Callable[[str], None] = print,
) -> dict:
    """``source``: "real" (the shipped real set's train split, ``n_per_category`` drawn per category,
    held-out prompts from its val split) or "templates" (``chat_prompts.compose``). ``extra_prompts``:
    a user's JSONL file (``read_extra_prompts``), added in full. Everything that is trained on or
    evaluated is checked against the public evaluation sets first (``decontam.require_clean``)."""
    from . import decontam
    from ..runtime.chat_template import render_chat
    from ..runtime.llama_ffi import C
    from ..runtime.native import Model

    if source not in PROMPT_SOURCES:
        raise ValueError(f"unknown prompt source {source!r}: {', '.join(PROMPT_SOURCES)}")
    # the prompts first: a bad or contaminated prompt file is refused before the model loads
    if source == "real":
        composed, held, sources = _real_prompts(n_per_category, seed, heldout_per_category)
        val = _val_prompts(seed)
        heldout_note = (
            f"Held-out prompts (chat, code, math; {heldout_per_category} each) come from the shipped set's "
            "validation split (about 2 % of it, chosen by a hash of the text), never trained on."
        )
    else:
        composed, held = chat_prompts.compose(n_per_category, seed)
        sources = dict(chat_prompts.SOURCES)
        val = []
        heldout_note = "Held-out prompts (chat, code, math) use templates of their own and topics split off by a hash."
    extra = read_extra_prompts(extra_prompts) if extra_prompts else []
    extra_name = Path(extra_prompts).name if extra_prompts else ""
    if extra:
        assert extra_prompts is not None
        seen = {decontam.full_hash(decontam.words(p["text"])) for p in composed}
        held_keys = {decontam.full_hash(decontam.words(p["text"])) for p in held + val}
        clash = [p for p in extra if decontam.full_hash(decontam.words(p["text"])) in held_keys]
        if clash:
            raise PromptFileError(
                f"{extra_name} line {clash[0]['line']}: this prompt is one of the "
                "held-out (validation) prompts, which are never trained on; remove it"
            )
        dup = 0
        for p in extra:
            k = decontam.full_hash(decontam.words(p["text"]))
            if k in seen:
                dup += 1
                continue
            seen.add(k)
            composed.append(p)
        sources[f"user:{extra_name}"] = (
            f"the user's own prompts ({extra_name}, sha256 "
            f"{file_sha256(extra_prompts)[:16]}); licence as the user states"
        )
        log(
            f"prepare: {len(extra) - dup} extra prompts from {extra_prompts}"
            + (f" ({dup} duplicates skipped)" if dup else "")
        )
    labels = [
        f"{extra_name} line {p['line']}" if "line" in p else f"prompt {p['id']} ({p['source']})" for p in composed
    ]
    rep = decontam.require_clean([p["text"] for p in composed], labels, what="the training prompts")
    decontam.require_clean([p["text"] for p in held + val], [p["id"] for p in held + val], what="the held-out prompts")
    fp = decontam.load()

    target = Path(target)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model = Model(target, n_gpu_layers=0)
    template = model.chat_template()
    if not template:
        raise ValueError(
            f"{target.name} has no chat template (tokenizer.chat_template): a base model; "
            "train its drafter on text instead"
        )
    v = model.vocab
    bos = model.token_text(C.llama_vocab_bos(v)) if C.llama_vocab_bos(v) >= 0 else ""
    eos = model.token_text(C.llama_vocab_eos(v)) if C.llama_vocab_eos(v) >= 0 else ""

    def render(text: str, system: str | None) -> str:
        msgs = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": text}]
        return render_chat(template, msgs, bos_token=bos, eos_token=eos, add_generation_prompt=True)

    if source == "real":
        # mixed categories from the first row on (the trainer's own validation slice is the head of the file)
        random.Random(f"order:{seed}").shuffle(composed)
    # each request once with the template's own default (what the app sends) and, for variants > 1,
    # again under one of our system messages
    train = []
    for p in composed:
        train.append({**p, "system": None})
        if variants > 1:
            train.append({**p, "id": p["id"] + "-s", "system": chat_prompts.system_prompt_for(p["text"])})

    def tokenize_all(rows: list[dict], stem: str) -> np.ndarray:
        ids, offsets, cats = [], [0], []
        # the texts gzipped: tens of MB of JSON lines otherwise, and the folder travels to the GPU machine
        (out / f"{stem}.jsonl").unlink(missing_ok=True)
        with gzip.open(out / f"{stem}.jsonl.gz", "wt", encoding="utf-8", compresslevel=6) as f:
            for i, p in enumerate(rows):
                # the engine's own path for a chat message: template -> text -> llama_tokenize(add_special, parse_special)
                toks = model.tokenize(render(p["text"], p.get("system")), add_special=True, parse_special=True)
                ids.extend(toks)
                offsets.append(len(ids))
                cats.append(chat_prompts.CATEGORIES.index(p["category"]))
                f.write(json.dumps({k: v for k, v in p.items() if k != "line"}) + "\n")
                if (i + 1) % 5000 == 0:
                    log(f"prepare: {i + 1}/{len(rows)} {stem} tokenized")
        # uint16 where the vocabulary allows: the folder travels to the GPU machine (64 MiB a call)
        np.savez_compressed(
            out / f"{stem}.npz",
            ids=np.asarray(ids, dtype=np.uint16 if model.n_vocab <= 65535 else np.int32),
            offsets=np.asarray(offsets, dtype=np.int64),
            category=np.asarray(cats, dtype=np.int8),
        )
        return np.diff(np.asarray(offsets))

    lens = tokenize_all(train, "prompts")
    if val:
        tokenize_all([{**p, "system": None} for p in val], "val")
    held_lines = []
    for p in held:
        held_lines.append(
            json.dumps(
                {
                    "id": p["id"],
                    "category": p["category"],
                    "source": p["source"],
                    "template": p["template"],
                    "messages": [{"role": "user", "content": p["text"]}],
                }
            )
        )
    (out / "heldout.jsonl").write_text("\n".join(held_lines) + "\n")
    if heldout_copy:
        Path(heldout_copy).parent.mkdir(parents=True, exist_ok=True)
        Path(heldout_copy).write_text("\n".join(held_lines) + "\n")

    stops = end_tokens(model)
    mask = int(mask_token_id) if mask_token_id is not None else pick_mask_token(model, template)
    meta = {
        "format": FORMAT,
        "kind": "chat-prompts",
        "target": {
            "file": target.name,
            "sha256": file_sha256(target),
            "arch": model.meta("general.architecture"),
            "name": model.meta("general.name"),
            "n_vocab": model.n_vocab,
            "n_layer": model.n_layer,
            "n_embd": model.n_embd,
            "chat_template_sha256": hashlib.sha256(template.encode()).hexdigest(),
        },
        "vocab_size": model.n_vocab,
        "stop_ids": stops,
        "mask_id": mask,
        "mask_token": model.token_text(mask),
        "eos_id": int(C.llama_vocab_eos(v)),
        "pad_id": int(C.llama_vocab_eos(v)),
        "categories": list(chat_prompts.CATEGORIES),
        "counts": {c: int(sum(1 for p in train if p["category"] == c)) for c in chat_prompts.CATEGORIES},
        "counts_by_source": _counts_by_source(composed),
        "heldout_counts": {c: int(sum(1 for p in held if p["category"] == c)) for c in chat_prompts.EVAL_CATEGORIES},
        "heldout_split": "val" if source == "real" else "templates",
        "heldout_note": heldout_note,
        "val": {
            "file": "val.npz",
            "n": len(val),
            "split": "val",
            "counts": {c: int(sum(1 for p in val if p["category"] == c)) for c in chat_prompts.CATEGORIES},
        }
        if val
        else None,
        "n_prompts": len(train),
        "prompt_tokens": int(lens.sum()),
        "prompt_len_max": int(lens.max()),
        "prompt_len_mean": round(float(lens.mean()), 1),
        "prompt_source": source,
        "extra_prompts": (
            {"file": str(extra_prompts), "sha256": file_sha256(extra_prompts), "n": len(extra)}
            if extra_prompts
            else None
        ),
        "sources": sources,
        "seed": seed,
        "n_per_category": n_per_category,
        "variants": variants,
        "distinct_requests": len(composed),
        "python": sys.version.split()[0],
        "benchmarks_excluded": ["MT-Bench", "AlpacaEval", "Vicuna-80", "HumanEval", "MBPP", "GSM8K test", "MATH test"],
        "decontamination": {
            "rule": f"{decontam.N}-gram overlap on normalised words; whole short items; exact copies",
            "fingerprints": list(fp.sets),
            "checked": rep["n"] + len(held) + len(val),
            "hits": 0,
        },
    }
    meta["turns"] = turn_fragments(model, template, bos, eos, stops, log)
    (out / "meta.json").write_text(json.dumps(meta, indent=1))
    log(
        f"prepare: {len(train)} training prompts ({meta['prompt_tokens']} tokens, mean {meta['prompt_len_mean']}), "
        f"{len(held)} held-out, {len(val)} validation; mask token {mask} {meta['mask_token']!r}; stop ids {stops} -> {out}"
    )
    return meta


def turn_fragments(model, template: str, bos: str, eos: str, stops: list[int], log) -> dict | None:
    """The template's turn boundaries as ids (``chat_turns``), for Magpie prompts and follow-up
    turns on the GPU machine; None (said) when the template cannot express them."""
    from ..runtime.chat_template import render_chat
    from .chat_turns import TemplateTurnsError, fragments

    try:
        return fragments(
            lambda msgs, gen: render_chat(template, msgs, bos_token=bos, eos_token=eos, add_generation_prompt=gen),
            lambda text, special: model.tokenize(text, add_special=special, parse_special=True),
            stops,
        )
    except (TemplateTurnsError, ValueError) as e:
        log(f"prepare: no multi-turn fragments ({e}): single-turn data only")
        return None


def _counts_by_source(rows: list[dict]) -> dict:
    t: dict = {}
    for p in rows:
        t.setdefault(p["source"], {}).setdefault(p["category"], 0)
        t[p["source"]][p["category"]] += 1
    return t


def load_rows(folder: str | Path, stem: str = "prompts") -> list[dict]:
    """The prompt records (id, category, text, source, system) of a prepared folder, in ``{stem}.npz``'s order."""
    folder = Path(folder)
    gz = folder / f"{stem}.jsonl.gz"
    if gz.is_file():
        with gzip.open(gz, "rt", encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    return [json.loads(line) for line in (folder / f"{stem}.jsonl").read_text().splitlines() if line.strip()]


def load_prompts(folder: str | Path, stem: str = "prompts") -> tuple[list[np.ndarray], np.ndarray, dict]:
    """(token ids per prompt, category index per prompt, meta) of a prepared folder (numpy only);
    ``stem="val"``: the validation prompts (val.npz), when the folder has them."""
    folder = Path(folder)
    meta = json.loads((folder / "meta.json").read_text())
    z = np.load(folder / f"{stem}.npz")
    ids, off = z["ids"], z["offsets"]
    return [ids[off[i] : off[i + 1]] for i in range(len(off) - 1)], z["category"], meta


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--per-category", type=int, default=3000)
    ap.add_argument("--variants", type=int, default=2, help="renderings per request (2: also under a system message)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mask-token-id", type=int, default=None)
    ap.add_argument("--prompt-source", choices=PROMPT_SOURCES, default="real")
    ap.add_argument("--prompts", default=None, metavar="FILE.jsonl", help="extra prompts of your own (JSONL)")
    a = ap.parse_args(argv)
    try:
        prepare(
            a.target,
            a.out,
            n_per_category=a.per_category,
            variants=a.variants,
            seed=a.seed,
            mask_token_id=a.mask_token_id,
            source=a.prompt_source,
            extra_prompts=a.prompts,
        )
    except (ValueError, FileNotFoundError) as e:
        print(f"prepare: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
