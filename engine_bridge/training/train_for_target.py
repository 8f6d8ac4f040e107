"""``dflash-studio train-drafter``: a DFlash drafter for any llama/qwen2/qwen3 GGUF target, in stages
that can run on different machines.

    prepare   (CPU; llama.cpp tokenizer + the target's chat template)  -> WORK/data
    train     (GPU; torch + gguf only: generation, then training)       -> WORK/run
    export    (CPU; our converter)                                      -> OUT (q8_0) and OUT-f16.gguf
    evaluate  (llama.cpp: held-out commit lengths, losslessness)       -> WORK/eval.json, the card

``all`` runs every stage (training needs a CUDA device unless ``device="cpu"``). WORK defaults to
``OUT`` with ``.train`` appended to its stem (data in WORK/data, the run in WORK/run);
``data_dir`` and ``run_dir`` point export/evaluate at a run folder
brought back from another machine (drafter-NN.safetensors + drafter.json, gen-stats.json ...).

Entry point: ``run(target, out, stages=..., progress=..., cancel=...)``.
"""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path
from typing import Callable

STAGES = ("prepare", "train", "export", "evaluate")


def work_dir_for(out: str | Path) -> Path:
    out = Path(out)
    return out.with_name(out.stem + ".train")


def run(
    target: str | Path,
    out: str | Path,
    *,
    stages=STAGES,
    work: str | Path | None = None,
    run_dir: str | Path | None = None,
    data_dir: str | Path | None = None,
    card: str | Path | None = None,
    heldout_copy: str | Path | None = None,
    n_per_category: int = 3000,
    mask_token_id: int | None = None,
    eval_max_tokens: int = 128,
    eval_n_per_category: int | None = None,
    eval_gpu_layers: int = -1,
    command: str | None = None,
    prompt_source: str = "real",
    extra_prompts: str | Path | None = None,
    progress: Callable[[dict], None] | None = None,
    cancel=None,
    log: Callable[[str], None] = print,
    **train_kwargs,
) -> dict:
    """Runs the given stages; returns {"data": meta, "train": summary, "export": paths, "evaluate": results}.

    ``train_kwargs`` go to ``train_chat.run`` (device, seconds, gen_seconds, n_layer, target_layers,
    block_size, batch, max_steps ...). ``progress(dict)`` gets {"stage": ...} events from every stage
    (training's carry step/loss/eta_s); ``cancel.is_set()`` stops between and inside stages.
    """
    target, out = Path(target), Path(out)
    work = Path(work) if work else work_dir_for(out)
    data = Path(data_dir) if data_dir else work / "data"
    rdir = Path(run_dir) if run_dir else work / "run"
    result: dict = {"work": str(work)}
    say = progress or (lambda e: None)

    def cancelled() -> bool:
        return cancel is not None and cancel.is_set()

    if "prepare" in stages and not cancelled():
        say({"stage": "prepare"})
        from .chat_data import prepare

        result["data"] = prepare(
            target,
            data,
            n_per_category=n_per_category,
            mask_token_id=mask_token_id,
            heldout_copy=heldout_copy,
            source=prompt_source,
            extra_prompts=extra_prompts,
            log=log,
        )
    if "train" in stages and not cancelled():
        from . import train_chat

        result["train"] = train_chat.run(target, data, rdir, progress=progress, cancel=cancel, log=log, **train_kwargs)
    if "export" in stages and not cancelled():
        say({"stage": "export"})
        result["export"] = export(target, rdir, out, work, log=log)
    if "evaluate" in stages and not cancelled():
        say({"stage": "evaluate"})
        from .evaluate_chat import evaluate, table

        heldout = data / "heldout.jsonl"
        res = evaluate(
            target,
            out,
            heldout,
            max_tokens=eval_max_tokens,
            n_per_category=eval_n_per_category,
            n_gpu_layers=eval_gpu_layers,
            log=log,
            cancel=cancel,
        )
        (work / "eval.json").write_text(json.dumps(res, indent=1))
        log(table(res))
        result["evaluate"] = res
        cpath = Path(card) if card else out.with_name("card.md")
        write_card(cpath, target, out, data, rdir, res, command=command)
        log(f"card -> {cpath}")
    return result


def export(target: Path, rdir: Path, out: Path, work: Path, log: Callable[[str], None] = print) -> dict:
    """The drafter as GGUF, q8_0 at ``out`` and f16 next to it, through ``convert_hf_drafter``."""
    from .export import export_drafter

    if not (rdir / "drafter.json").exists() and (rdir / "state.json").exists():
        rdir = _run_from_checkpoint(target, rdir, work / "run-from-ckpt")
        log(f"export: no final drafter in the run folder; using its resumable checkpoint ({rdir})")
    meta = json.loads((rdir / "drafter.json").read_text())
    name = f"DFlash drafter for {meta.get('target', {}).get('name') or target.stem} (DFlash Studio)"
    q8 = export_drafter(rdir, target, out, work / "hf-drafter", "q8_0", name=name)
    f16_path = out.with_name(out.stem + "-f16.gguf")
    f16 = export_drafter(rdir, target, f16_path, work / "hf-drafter", "f16", name=name)
    for r in (q8, f16):
        log(f"export: {r.path} ({r.path.stat().st_size / 1e6:.1f} MB, {r.tensors} tensors)")
    return {"q8_0": str(q8.path), "f16": str(f16.path)}


def _run_from_checkpoint(target: Path, ckdir: Path, dest: Path) -> Path:
    """A resumable checkpoint folder (drafter-NN f32 shards + state.json, e.g. a run stopped early)
    as a run folder export can read (the shards linked, drafter.json written)."""
    from .gguf_target import read_config

    st = json.loads((ckdir / "state.json").read_text())
    tc, _ = read_config(target)
    dest.mkdir(parents=True, exist_ok=True)
    for old in dest.glob("drafter-*.safetensors"):
        old.unlink()
    for p in sorted(ckdir.glob("drafter-*.safetensors")):
        (dest / p.name).symlink_to(p.resolve())
    hist = st["state"].get("hist", [])
    (dest / "drafter.json").write_text(
        json.dumps(
            {
                "config": st["config"],
                "vocab_size": tc.vocab_size,
                "n_target_layers": tc.n_layer,
                "train": {
                    "steps": st["state"]["step"],
                    "kept_step": st["state"]["step"],
                    "seconds": round(st["state"]["elapsed"], 1),
                    "val_accepted_per_block": hist[-1]["val_accepted_per_block"] if hist else None,
                    "val_walk_accepted": hist[-1].get("val_walk_accepted") if hist else None,
                    "history": hist,
                    "note": "exported from a resumable checkpoint (the run was stopped)",
                },
            },
            indent=1,
        )
    )
    return dest


def write_card(path: Path, target: Path, out: Path, data: Path, rdir: Path, res: dict, command: str | None) -> Path:
    """A markdown card: target, data and licences, drafter, training, held-out figures, the command."""
    from .evaluate_chat import table

    dmeta = json.loads((data / "meta.json").read_text())
    dj = json.loads((rdir / "drafter.json").read_text())
    cfg, tr = dj["config"], dj.get("train", {})
    gen_stats = {}
    for p in (rdir / "gen" / "gen-stats.json", rdir / "gen-stats.json"):
        if p.exists():
            gen_stats = json.loads(p.read_text())
            break
    t = dmeta["target"]
    L = [
        f"# DFlash drafter for {t.get('name') or t['file']}",
        "",
        f"Made by `dflash-studio train-drafter` on {time.strftime('%Y-%m-%d', time.gmtime())}.",
        "",
        "## Target",
        "",
        f"- file `{t['file']}` (sha256 `{t['sha256']}`), arch `{t['arch']}`, {t['n_layer']} layers, n_embd {t['n_embd']}, "
        f"vocab {t['n_vocab']}",
        "- the drafter shares the target's token embeddings and output head and carries its tokenizer; "
        f"mask token id {cfg['mask_token_id']} (`{dmeta.get('mask_token', '')}`)",
        "",
        "## Data",
        "",
        f"{dmeta['n_prompts']} training prompts, rendered with the target's own chat template and tokenized by llama.cpp; "
        f"the target's greedy responses are the labels.",
        "",
        "| category | prompts |",
        "|---|---|",
    ]
    L += [f"| {c} | {n} |" for c, n in dmeta["counts"].items()]
    L += ["", "Sources and licences:", ""]
    L += [f"- `{k}`: {v}" for k, v in dmeta["sources"].items()]
    L += [
        "",
        f"No public benchmark set was used ({', '.join(dmeta['benchmarks_excluded'])} excluded"
        + ("; every prompt passed the 13-gram decontamination check" if dmeta.get("decontamination") else "")
        + "). "
        + dmeta.get(
            "heldout_note",
            "Held-out prompts (chat, code, math) use templates of their own and topics split off by a hash.",
        ),
        "",
    ]
    if gen_stats:
        L += [
            f"Generation: {gen_stats['n']} responses, {gen_stats['tokens']} tokens (mean {gen_stats['mean_len']}, "
            f"{100 * gen_stats['ended_with_stop']:.0f}% ended with a stop token; cap {gen_stats['max_new']}) in "
            f"{gen_stats['seconds']} s.",
            "",
        ]
    L += [
        "## Drafter",
        "",
        f"DFlash, {cfg['n_layer']} layers, hidden {cfg['n_embd']}, heads {cfg['n_head']}/{cfg['n_head_kv']}, FFN {cfg['n_ff']}, "
        f"block size {cfg['block_size']}, target layers (GGUF ids) {cfg['target_layers']}; "
        f"{tr.get('params', 0) / 1e6:.2f} M parameters.",
        "",
        f"Training: {tr.get('steps')} steps in {tr.get('seconds')} s on {tr.get('device')} (kept step {tr.get('kept_step')}), "
        f"batch {tr.get('batch')} x {tr.get('anchors_per_seq')} blocks, lr {tr.get('lr')}, gamma {tr.get('gamma')}"
        + (f", + {tr['kl']} x KL to the target's softmax" if tr.get("kl") else "")
        + (f", {tr['train_frac']:.0%} of the training prompts" if tr.get("train_frac", 1.0) < 1.0 else "")
        + (f", labels: the target's {tr['labels']}" if tr.get("labels", "tokens") != "tokens" else "")
        + (
            f"; held-out accepted drafts per chain-7 step (the engine's walk) {tr['val_walk_accepted']}"
            if tr.get("val_walk_accepted") is not None
            else ""
        )
        + f"; held-out accepted drafts per block at random positions {tr.get('val_accepted_per_block')}.",
        "",
        "## Held-out mean commit length (llama.cpp, greedy)",
        "",
        f"Tokens committed per target step, {res['max_tokens']} new tokens per prompt; lossless = identical to AR.",
        "",
        table(res),
        "",
        "## Command",
        "",
        "```",
        command or f"dflash-studio train-drafter --target {target} --out {out}",
        "```",
        "",
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(L))
    return path


def command_line(argv: list[str]) -> str:
    return "dflash-studio " + " ".join(shlex.quote(a) for a in argv)
