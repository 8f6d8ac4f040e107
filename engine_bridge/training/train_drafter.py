"""Trains a DFlash drafter for a trained target (``train_target.py``), for a fixed wall time.

    python -m engine_bridge.training.train_drafter --data DIR --target DIR --out DIR [--seconds 180]

1. Data: real prefixes from the training corpus continued greedily by the target (temperature 0,
   the setting every acceptance figure is measured at), so the labels are the target's own
   choices, conditioned on its own earlier choices, as at inference.
2. Each step: the frozen target computes the inputs of the drafter's target layers for a batch of
   those sequences; K random anchors per sequence (inside the generated part) each open a block
   ``[token at anchor, mask x (S-1)]`` that sees the context strictly before the anchor; S is 8 or
   16 at random so budgets below the block size are trained too.
3. Loss: cross-entropy of block slot j against the token at anchor + j, weighted
   ``exp(-(j-1)/gamma)`` (early slots decide most of the accepted length); the target's
   embeddings and lm_head are shared and frozen.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from .ckpt import load_sharded, save_sharded
from .drafter_model import DFlashDrafter, DrafterConfig, position_weights
from .target_model import TargetLM
from .train_target import load_target, load_tokens, lr_at, meta


def default_target_layers(n_layer: int, n: int = 3) -> list[int]:
    """GGUF ids (input of layer k), spread from the second layer to the last one's input."""
    ids = np.linspace(2, n_layer - 1, n).round().astype(int)
    return sorted({int(i) for i in ids})


@torch.no_grad()
def generate_data(
    target: TargetLM,
    tokens: np.ndarray,
    *,
    n_seq: int,
    length: int,
    batch: int,
    prefix_range=(16, 192),
    seconds: float | None = None,
    seed: int = 0,
    log=print,
):
    """(N, length) sequences: a real prefix then the target's greedy continuation; and prefix lengths."""
    dev = next(target.parameters()).device
    rng = np.random.default_rng(seed)
    seqs: list = []
    prefs: list = []
    t0 = time.time()
    done = 0
    while done < n_seq:
        if seconds is not None and time.time() - t0 > seconds and seqs:
            break
        b = min(batch, n_seq - done)
        p = int(rng.integers(min(prefix_range[0], length // 4), min(prefix_range[1], length // 2) + 1))
        starts = rng.integers(0, tokens.size - p - 1, b)
        prompt = torch.from_numpy(np.stack([tokens[s : s + p] for s in starts]).astype(np.int64)).to(dev)
        seqs.append(target.greedy(prompt, length - p).cpu())
        prefs.append(torch.full((b,), p, dtype=torch.long))
        done += b
    log(f"generated {done} sequences x {length} tokens in {time.time() - t0:.0f} s")
    return torch.cat(seqs), torch.cat(prefs)


def features(target: TargetLM, x: torch.Tensor, layers: list[int]) -> torch.Tensor:
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16, enabled=x.is_cuda):
        _, feats = target(x, layer_inputs=layers, logits=False)
    return torch.cat(feats, dim=-1)


def sample_blocks(seqs: torch.Tensor, prefix: torch.Tensor, K: int, S: int, mask_id: int, gen: torch.Generator):
    """Anchors (B, K) inside the generated part, block tokens (B, K, S) and labels (B, K, S)."""
    B, L = seqs.shape
    lo = (prefix - 1).clamp(min=1).float()
    hi = float(L - S)
    u = torch.rand(B, K, generator=gen)
    anchors = (lo[:, None] + u * (hi - lo[:, None] + 1)).floor().long().clamp(max=L - S)
    idx = anchors[:, :, None] + torch.arange(S)
    labels = torch.gather(seqs[:, None, :].expand(B, K, L), 2, idx)
    block = torch.full_like(labels, mask_id)
    block[:, :, 0] = labels[:, :, 0]
    return anchors, block, labels


def block_loss(logits, labels, weights):
    """Weighted CE over slots 1..S-1, slot accuracies and the expected accepted length per block."""
    B, K, S, V = logits.shape
    ce = F.cross_entropy(logits[:, :, 1:].float().reshape(-1, V), labels[:, :, 1:].reshape(-1), reduction="none").view(
        B, K, S - 1
    )
    w = weights[1:]
    loss = (ce * w).sum(-1).mean() / w.sum()
    with torch.no_grad():
        ok = (logits[:, :, 1:].argmax(-1) == labels[:, :, 1:]).float()
        accepted = torch.cumprod(ok, dim=-1).sum(-1)  # drafts accepted before the first miss
    return loss, ok.mean((0, 1)), accepted.mean()


def train(
    data: str | Path,
    target_dir: str | Path,
    out: str | Path,
    *,
    seconds: float,
    n_layer: int = 2,
    batch: int = 64,
    K: int = 24,
    length: int = 512,
    n_seq: int = 16384,
    gen_seconds: float = 60.0,
    gen_batch: int = 2048,
    lr: float = 1.5e-3,
    gamma: float = 5.0,
    target_layers: list[int] | None = None,
    seed: int = 0,
    device: str | None = None,
    log=print,
    max_steps: int | None = None,
    target: TargetLM | None = None,
) -> DFlashDrafter:
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    cuda = dev.type == "cuda"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
    torch.manual_seed(seed)
    m = meta(data)
    if target is None:
        target = load_target(target_dir, dev)
    target = target.to(dev).eval()
    for p in target.parameters():
        p.requires_grad_(False)
    tc = target.c
    layers = target_layers or default_target_layers(tc.n_layer)
    cfg = DrafterConfig(
        n_embd=tc.n_embd,
        n_layer=n_layer,
        n_head=tc.n_head,
        n_head_kv=tc.n_head_kv,
        head_dim=tc.head_dim,
        n_ff=tc.n_ff,
        block_size=16,
        target_layers=layers,
        mask_token_id=m["mask_id"],
        rope_theta=tc.rope_theta,
        rms_eps=tc.rms_eps,
        n_ctx=tc.n_ctx,
    )
    drafter = DFlashDrafter(cfg).to(dev)
    n_params = sum(p.numel() for p in drafter.parameters())
    log(f"drafter: {n_params / 1e6:.2f} M parameters, {n_layer} layers, target layers (GGUF ids) {layers}")

    t_start = time.time()
    seqs, prefix = generate_data(
        target,
        load_tokens(data, "train"),
        n_seq=n_seq,
        length=length,
        batch=gen_batch,
        seconds=gen_seconds,
        seed=seed,
        log=log,
    )
    vseqs, vprefix = generate_data(
        target,
        load_tokens(data, "val"),
        n_seq=min(256, gen_batch),
        length=length,
        batch=min(256, gen_batch),
        seed=seed + 1,
        log=log,
    )
    gen_time = time.time() - t_start
    embed_w = target.embed_tokens.weight.detach()
    opt = torch.optim.AdamW(drafter.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.01, fused=cuda)
    g = torch.Generator().manual_seed(seed)
    weights = {S: position_weights(S, gamma, dev) for S in (8, 16)}
    N = seqs.shape[0]

    def run(sq, pf, S, train_mode=True):
        anchors, block, labels = sample_blocks(sq, pf, K, S, cfg.mask_token_id, g)
        sq, anchors, block, labels = sq.to(dev), anchors.to(dev), block.to(dev), labels.to(dev)
        feats = features(target, sq, layers)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cuda):
            logits = drafter(feats, anchors, block, embed_w)
        return block_loss(logits, labels, weights[S])

    def validate(n_val: int = 256):
        drafter.eval()
        parts = []
        with torch.no_grad():
            for i in range(0, min(n_val, vseqs.shape[0]), batch):
                parts.append(run(vseqs[i : i + batch], vprefix[i : i + batch], 16))
        drafter.train()
        return (
            torch.stack([p[0] for p in parts]).mean(),
            torch.stack([p[1] for p in parts]).mean(0),
            torch.stack([p[2] for p in parts]).mean(),
        )

    t0 = time.time()
    step, next_log, hist = 0, 0.0, []
    best: tuple[float, dict | None, int] = (-1.0, None, 0)  # (held-out accepted per block, state, step): early stopping
    while True:
        el = time.time() - t0
        if el >= seconds or (max_steps and step >= max_steps):
            break
        for gp in opt.param_groups:
            gp["lr"] = lr_at(el / seconds, lr, warmup=0.05)
        S = 16 if torch.rand(1, generator=g).item() < 0.5 else 8
        ix = torch.randint(0, N, (batch,), generator=g)
        loss, acc, accepted = run(seqs[ix], prefix[ix], S)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(drafter.parameters(), 1.0)
        opt.step()
        step += 1
        if el >= next_log:
            vl, vacc, vacc_len = validate()
            if vacc_len.item() > best[0]:
                best = (vacc_len.item(), {k: v.detach().clone() for k, v in drafter.state_dict().items()}, step)
            hist.append(
                {
                    "t": round(el, 1),
                    "step": step,
                    "loss": round(loss.item(), 4),
                    "val_loss": round(vl.item(), 4),
                    "val_accepted_per_block_16": round(vacc_len.item(), 3),
                    "val_slot_acc": [round(a, 3) for a in vacc.tolist()],
                }
            )
            log(
                f"  t={el:6.1f}s step {step:5d} loss {loss.item():.3f} val {vl.item():.3f} "
                f"val accepted/block(16) {vacc_len.item():.2f} slot1 {vacc[0].item():.2f} slot2 {vacc[1].item():.2f}"
            )
            next_log = el + max(seconds / 20, 1.0)
    vl, vacc, vacc_len = validate()
    if best[1] is not None and vacc_len.item() < best[0]:
        log(f"early stopping: keeping step {best[2]} (held-out accepted/block {best[0]:.2f} > {vacc_len.item():.2f})")
        drafter.load_state_dict(best[1])
    drafter.eval()
    with torch.no_grad():
        parts16, parts8 = [], []
        for i in range(0, vseqs.shape[0], batch):
            parts16.append(run(vseqs[i : i + batch], vprefix[i : i + batch], 16))
            parts8.append(run(vseqs[i : i + batch], vprefix[i : i + batch], 8))
        vl = torch.stack([p[0] for p in parts16]).mean()
        vacc = torch.stack([p[1] for p in parts16]).mean(0)
        vlen16 = torch.stack([p[2] for p in parts16]).mean()
        vlen8 = torch.stack([p[2] for p in parts8]).mean()
    el = time.time() - t0
    summary = {
        "params": n_params,
        "steps": step,
        "kept_step": best[2] if vacc_len.item() < best[0] else step,
        "seconds": round(el, 1),
        "gen_seconds": round(gen_time, 1),
        "gen_sequences": int(N),
        "gen_length": length,
        "batch": batch,
        "anchors_per_seq": K,
        "lr": lr,
        "gamma": gamma,
        "val_loss": round(vl.item(), 4),
        "val_accepted_per_block_16": round(vlen16.item(), 3),
        "val_accepted_per_block_8": round(vlen8.item(), 3),
        "val_slot_acc": [round(a, 3) for a in vacc.tolist()],
        "history": hist,
        "device": torch.cuda.get_device_name(0) if cuda else "cpu",
    }
    log(
        f"drafter done: {step} steps in {el:.0f} s; held-out accepted drafts per block: "
        f"{vlen8.item():.2f} (block 8), {vlen16.item():.2f} (block 16)"
    )
    save_sharded(
        drafter.state_dict(),
        out,
        "drafter",
        dtype=torch.float16,
        config={
            "config": cfg.to_dict(),
            "vocab_size": m["vocab_size"],
            "n_target_layers": tc.n_layer,
            "train": summary,
        },
    )
    return drafter


def load_drafter(folder: str | Path, device="cpu") -> tuple[DFlashDrafter, dict]:
    state, cfg = load_sharded(folder, "drafter")
    if cfg is None:
        raise FileNotFoundError(f"{folder}: no drafter.json (not a trained drafter's folder)")
    model = DFlashDrafter(DrafterConfig(**cfg["config"]))
    model.load_state_dict(state)
    return model.to(device).eval(), cfg


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=180)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--length", type=int, default=512)
    ap.add_argument("--n-seq", type=int, default=65536)
    ap.add_argument("--gen-seconds", type=float, default=150)
    ap.add_argument("--gen-batch", type=int, default=2048)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    train(
        a.data,
        a.target,
        a.out,
        seconds=a.seconds,
        n_layer=a.layers,
        batch=a.batch,
        length=a.length,
        n_seq=a.n_seq,
        gen_seconds=a.gen_seconds,
        gen_batch=a.gen_batch,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
