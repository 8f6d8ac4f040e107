"""``train-drafter --gpus N``: the stage ``train`` on N GPUs of this host, from one command.

``train_chat.run`` hands over here when asked for more than one GPU outside ``torchrun``. Its
settings go back to ``train_chat``'s own flags (``flags_from``), and three steps run as child
processes:
1. one ``--stage generate --shard K/N`` process per GPU (``CUDA_VISIBLE_DEVICES=K``), side by side,
   each writing its share of the pool into ``OUT/shard-K``;
2. ``shards.merge_pools`` joining the shares (and earlier sittings' pools, ``--earlier-pool``) into ``OUT/gen``;
3. ``torchrun --nproc_per_node N ... --stage train`` (``multi_gpu``: DDP, rank 0 writes the run).
A pool already in ``OUT/gen`` is trained on as it is. The children's lines reach ``log`` and, read
back into events, ``progress`` (the Train tab's bar and loss plot); a cancel stops them (the training leaves its last checkpoint, from which a second call resumes).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

#: ``train_chat.run``'s keyword -> its command-line flag (``None``: a switch; the value says whether)
FLAGS: dict[str, str] = {
    "device": "--device",
    "gen_seconds": "--gen-seconds",
    "seconds": "--seconds",
    "max_new": "--max-new",
    "gen_batch": "--gen-batch",
    "max_prompts": "--max-prompts",
    "gen_fp32": "--gen-fp32",
    "n_layer": "--layers",
    "n_ff": "--ffn",
    "target_layers": "--target-layers",
    "n_target_layers": "--n-target-layers",
    "block_size": "--block-size",
    "batch": "--batch",
    "anchors": "--anchors",
    "lr": "--lr",
    "max_steps": "--max-steps",
    "weight_decay": "--weight-decay",
    "patience": "--patience",
    "ckpt_every": "--ckpt-every",
    "resume": "--no-resume",
    "threads": "--threads",
    "seed": "--seed",
    "temperatures": "--temperatures",
    "magpie_frac": "--magpie-frac",
    "followup_frac": "--followup-frac",
    "category_weights": "--category-weights",
    "mixed_blocks": "--mixed-blocks",
    "warmup": "--warmup",
    "gamma": "--gamma",
    "kl": "--kl",
    "train_frac": "--train-frac",
    "labels": "--labels",
    "val_seqs": "--val-seqs",
    "walk_frac": "--walk-anchors",
    "select": "--select",
    "every_temperature": "--every-temperature",
    "init": "--init",
    "earlier_pools": "--earlier-pool",
}
SWITCHES = {"gen_fp32", "mixed_blocks", "every_temperature"}

_TRAIN_LINE = re.compile(
    r"train: step\s+(\d+)\s+loss ([\d.]+)\s+val ([\d.]+)\s+val accepted/block\(\d+\) ([\d.]+)"
    r"(?:\s+walk ([\d.]+))?.*?(\d+):(\d\d) elapsed, ETA (\d+):(\d\d)"
)
_GEN_LINE = re.compile(r"generate/([\w -]+): (\d+)/(\d+),.*?(\d+) s left")


def progress_from_line(line: str) -> dict | None:
    """The progress event (``train_chat.run``'s kind) that a child's log line stands for, or None:
    a training log point (step, loss, held-out loss and acceptance, elapsed and ETA) or a generation
    batch (pass, done, total, ETA)."""
    m = _TRAIN_LINE.search(line)
    if m:
        step, loss, vl, va, vw, em, es, tm, ts = m.groups()
        return {
            "stage": "train",
            "step": int(step),
            "loss": float(loss),
            "val_loss": float(vl),
            "val_accepted": float(va),
            "val_walk": float(vw) if vw else None,
            "elapsed_s": 60.0 * int(em) + int(es),
            "eta_s": 60.0 * int(tm) + int(ts),
        }
    m = _GEN_LINE.search(line)
    if m:
        what, done, total, left = m.groups()
        return {"stage": "generate", "pass": what, "done": int(done), "total": int(total), "eta_s": float(left)}
    return None


def flags_from(settings: dict[str, Any]) -> list[str]:
    """``train_chat`` flags that give ``settings`` (keywords of ``train_chat.run``) back."""
    out: list[str] = []
    for key, flag in FLAGS.items():
        v = settings.get(key)
        if key == "resume":
            if v is False:
                out.append(flag)
        elif key in SWITCHES:
            if v:
                out.append(flag)
        elif v is None:
            continue
        elif isinstance(v, (list, tuple)):
            out += [flag, ",".join(str(x) for x in v)]
        else:
            out += [flag, str(v)]
    return out


def _stream(proc: subprocess.Popen, log: Callable[[str], None], prefix: str, progress=None) -> threading.Thread:
    def pump():
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip()
            if line and not line.startswith(("W1", "*****")) and "OMP_NUM_THREADS" not in line:
                log(prefix + line)
                ev = progress_from_line(line) if progress is not None else None
                if ev is not None:
                    progress(ev)

    t = threading.Thread(target=pump, daemon=True)
    t.start()
    return t


def _wait(procs: list[subprocess.Popen], cancel) -> list[int]:
    """Waits for every process; on a cancel, stops them all (SIGTERM, then SIGKILL after 30 s)."""
    while any(p.poll() is None for p in procs):
        if cancel is not None and cancel.is_set():
            for p in procs:
                if p.poll() is None:
                    p.terminate()
            for p in procs:
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
            break
        time.sleep(0.2)
    return [p.wait() for p in procs]


def run_on_gpus(
    target: Path,
    data: Path,
    out: Path,
    *,
    gpus: int,
    stages,
    settings: dict[str, Any],
    log: Callable[[str], None],
    cancel=None,
    progress: Callable[[dict], None] | None = None,
) -> dict:
    """The stages of ``train_chat.run`` over ``gpus`` processes (``progress`` gets the events that the
    children's log lines stand for: ``progress_from_line``); returns the run's summary (its
    ``run-summary.json``, ``generate`` from the joined pool's statistics). A child that fails is a
    RuntimeError naming it and the end of its output."""
    from .shards import merge_pools

    py = sys.executable
    base = ["--target", str(target), "--data", str(data)] + flags_from(settings)
    env = {**os.environ, "NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    summary: dict[str, Any] = {}
    pool = out / "gen" / "responses.npz"
    if "generate" in stages and not pool.exists():
        log(f"generate: {gpus} shares side by side, one process per GPU")
        procs, pumps = [], []
        for k in range(gpus):
            cmd = [py, "-m", "engine_bridge.training.train_chat", *base, "--out", str(out / f"shard-{k}")]
            cmd += ["--stage", "generate", "--shard", f"{k}/{gpus}"]
            e = dict(env)
            if settings.get("device") != "cpu":
                e["CUDA_VISIBLE_DEVICES"] = str(k)
            p = subprocess.Popen(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            procs.append(p)
            # one share's generation batches stand for all (they run side by side at one pace)
            pumps.append(_stream(p, log, f"[gpu {k}] ", progress if k == 0 else None))
        codes = _wait(procs, cancel)
        for t in pumps:
            t.join(timeout=5)
        if cancel is not None and cancel.is_set():
            log("cancelled during generation; nothing merged")
            return {"cancelled": True}
        bad = [k for k, c in enumerate(codes) if c != 0]
        if bad:
            raise RuntimeError(f"generation failed on GPU(s) {bad} (exit {[codes[k] for k in bad]}); see the log above")
        merged = merge_pools(out, [out / f"shard-{k}" for k in range(gpus)], settings.get("earlier_pools") or [])
        log(f"generate: {merged['shards']} shares joined, {merged['n']} responses, {merged['tokens']} tokens")
        summary["generate"] = merged
    if "train" in stages:
        cmd = [py, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(gpus)]
        cmd += ["-m", "engine_bridge.training.train_chat", *base, "--out", str(out), "--stage", "train"]
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        pump = _stream(p, log, "", progress)
        (code,) = _wait([p], cancel)
        pump.join(timeout=5)
        if cancel is not None and cancel.is_set():
            log("cancelled during training; the last checkpoint stays for a resume")
            summary["cancelled"] = True
            return summary
        if code != 0:
            raise RuntimeError(f"training on {gpus} GPUs failed (exit {code}); see the log above")
        # the training stage's own summary (target, layers, train), with the joined pool's statistics
        summary = {**json.loads((out / "run-summary.json").read_text()), **summary}
    return summary
