"""Trains the target language model on a tokenized corpus (``data.py``), for a fixed wall time.

    python -m engine_bridge.training.train_target --data DIR --out DIR [--seconds 280] [--preset base]

The learning rate follows the clock (warm-up, then cosine to 10 %), so a run of any length ends
annealed. On CUDA it trains in bf16 autocast; on CPU in float32 (use ``--preset tiny``).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from .ckpt import load_sharded, save_sharded
from .target_model import TargetConfig, TargetLM

PRESETS = {
    # shipped pair: 8 layers, d 384, 15.7 M parameters with an 8k vocabulary
    "base": dict(n_embd=384, n_layer=8, n_head=6, n_head_kv=2, head_dim=64, n_ff=1024, n_ctx=1024),
    # CPU smoke tests
    "tiny": dict(n_embd=128, n_layer=4, n_head=4, n_head_kv=2, head_dim=32, n_ff=384, n_ctx=256),
}


def load_tokens(data: str | Path, split: str) -> np.ndarray:
    return np.fromfile(Path(data) / f"{split}.u16", dtype=np.uint16)


def meta(data: str | Path) -> dict:
    return json.loads((Path(data) / "meta.json").read_text())


def batches(tokens: torch.Tensor, batch: int, length: int, gen: torch.Generator):
    n = tokens.numel() - length - 1
    ar = torch.arange(length + 1, device=tokens.device)
    while True:
        starts = torch.randint(0, n, (batch,), generator=gen, device="cpu").to(tokens.device)
        w = tokens[starts[:, None] + ar].long()
        yield w[:, :-1], w[:, 1:]


def lr_at(progress: float, peak: float, warmup: float = 0.03, floor: float = 0.1) -> float:
    if progress < warmup:
        return peak * max(progress / warmup, 0.01)
    p = min(1.0, (progress - warmup) / (1 - warmup))
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * p)))


@torch.no_grad()
def evaluate(model: TargetLM, val: torch.Tensor, batch: int, length: int, n_batches: int = 4) -> float:
    model.eval()
    g = torch.Generator().manual_seed(1234)
    it = batches(val, batch, length, g)
    losses = []
    cuda = val.is_cuda
    for _ in range(n_batches):
        x, y = next(it)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cuda):
            logits, _ = model(x)
        losses.append(F.cross_entropy(logits.float().flatten(0, 1), y.flatten()).item())
    model.train()
    return float(np.mean(losses))


def train(
    data: str | Path,
    out: str | Path,
    *,
    seconds: float,
    preset: str = "base",
    batch: int = 64,
    lr: float = 2e-3,
    seed: int = 0,
    device: str | None = None,
    log=print,
    max_steps: int | None = None,
) -> TargetLM:
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    cuda = dev.type == "cuda"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    torch.manual_seed(seed)
    m = meta(data)
    cfg = TargetConfig(vocab_size=m["vocab_size"], **PRESETS[preset])
    model = TargetLM(cfg).to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    train_t = torch.from_numpy(load_tokens(data, "train").astype(np.int32)).to(dev)
    val_t = torch.from_numpy(load_tokens(data, "val").astype(np.int32)).to(dev)
    L = cfg.n_ctx
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
        lr=lr,
        betas=(0.9, 0.95),
        eps=1e-8,
        fused=cuda,
    )
    gen = torch.Generator().manual_seed(seed)
    it = batches(train_t, batch, L, gen)
    log(
        f"target: {n_params / 1e6:.2f} M parameters, {train_t.numel() / 1e6:.1f} M train tokens, "
        f"batch {batch} x {L}, device {dev}"
    )
    t0 = time.time()
    step, tokens_seen, next_eval, hist = 0, 0, 0.0, []
    while True:
        el = time.time() - t0
        if el >= seconds or (max_steps and step >= max_steps):
            break
        for gp in opt.param_groups:
            gp["lr"] = lr_at(el / seconds, lr)
        x, y = next(it)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cuda):
            logits, _ = model(x)
        loss = F.cross_entropy(logits.float().flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        tokens_seen += x.numel()
        if el >= next_eval:
            vl = evaluate(model, val_t, batch, L)
            hist.append(
                {"t": round(el, 1), "step": step, "train_loss": round(loss.item(), 4), "val_loss": round(vl, 4)}
            )
            log(
                f"  t={el:6.1f}s step {step:6d} train {loss.item():.3f} val {vl:.3f} "
                f"({tokens_seen / max(el, 1e-9) / 1e3:.0f} k tok/s)"
            )
            next_eval = el + max(seconds / 10, 1.0)
    vl = evaluate(model, val_t, batch, L)
    el = time.time() - t0
    summary = {
        "params": n_params,
        "steps": step,
        "tokens_seen": tokens_seen,
        "seconds": round(el, 1),
        "final_val_loss": round(vl, 4),
        "device": torch.cuda.get_device_name(0) if cuda else "cpu",
        "batch": batch,
        "seq": L,
        "lr": lr,
        "history": hist,
    }
    log(f"target done: {step} steps, {tokens_seen / 1e6:.1f} M tokens in {el:.0f} s, val loss {vl:.3f}")
    save_sharded(
        model.state_dict(), out, "target", dtype=torch.float16, config={"config": cfg.to_dict(), "train": summary}
    )
    return model


def load_target(folder: str | Path, device="cpu") -> TargetLM:
    state, cfg = load_sharded(folder, "target")
    if cfg is None:
        raise FileNotFoundError(f"{folder}: no target.json (not a trained target's folder)")
    model = TargetLM(TargetConfig(**cfg["config"]))
    model.load_state_dict(state)
    return model.to(device).eval()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=280)
    ap.add_argument("--preset", default="base", choices=sorted(PRESETS))
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    train(a.data, a.out, seconds=a.seconds, preset=a.preset, batch=a.batch, lr=a.lr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
