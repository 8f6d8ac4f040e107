"""Stages ``generate`` and ``train`` for a GGUF target: its greedy responses to the prepared chat
prompts, then a DFlash drafter trained on them. Imports torch, numpy, gguf and our code only (no
llama.cpp): this is what runs on the GPU machine.

    python -m engine_bridge.training.train_chat --target T.gguf --data DATA --out RUN \\
        [--gen-seconds 180] [--seconds 540] [--device cuda|cpu]

1. Generate: prompts (rendered with the target's chat template and tokenized by llama.cpp in
   ``chat_data``) answered greedily by the target read from its GGUF (``gguf_target``: llama.cpp's
   math on the dequantised weights), in length-sorted batches with one KV cache, until a stop token
   or ``max_new`` tokens. Saved to RUN/gen/responses.npz (kept: a resumed run does not regenerate).
2. Train: the DFlash drafter of ``drafter_model`` (layers, block size, target layers given or
   chosen), fed the inputs of the chosen target layers over prompt + response; random anchors in
   the response open blocks ``[token, mask x (S-1)]`` (S = 8 or 16) whose slot ``j`` is scored
   against the response token at anchor + j, weighted ``exp(-(j-1)/gamma)``; padding carries no
   loss. bf16 autocast on CUDA, AdamW, cosine schedule on the clock (``--seconds`` is the budget).
   Checkpoints (weights + optimiser, sharded safetensors <= 15 MB a file) every ``ckpt_every``
   seconds in RUN/ckpt; a new call resumes from there. The final drafter (f16 shards +
   drafter.json) goes to RUN/, where ``export`` reads it.

Entry point for other code: ``run(...)`` (a progress callback and a cancel flag; see its doc).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .gen_conversations import Cancelled  # one exception for a cancelled generation or training
from .multi_gpu import shard_of
from .walk import walk_accepted, walk_anchors

# The published DFlash recipe (SpecForge's defaults) where it fits a small target; where ours differs,
# the card and docs/benchmarks.md say why: 3 drafter layers (not 5: the step of a 135M target is
# launch-bound and every drafter layer is paid at every step), 32 anchors per sequence (not 512: our
# sequences are ~400 tokens, not 3k), the clock rather than epochs as the budget.
#: Validation sequences scored at each check (the first ones of the held-out split, the same every
#: time): the selection of the kept step reads them. Tests and quick runs pass fewer (val_seqs).
VAL_SEQS = 256

DEFAULTS: dict[str, Any] = dict(
    gen_seconds=180.0,
    seconds=540.0,
    max_new=384,
    gen_batch=1024,
    n_layer=3,
    n_target_layers=5,
    block_size=16,
    batch=32,
    anchors=32,
    lr=6e-4,
    gamma=7.0,
    ckpt_every=120.0,
    val_frac=0.03,
    weight_decay=0.1,
    patience=12,
    warmup=0.04,
    temperatures=(0.0, 0.8),
    magpie_frac=0.1,
    followup_frac=0.2,
)


class NoCudaError(RuntimeError):
    """Training was asked for on CUDA (the default) and there is no CUDA device."""


def lr_at(progress: float, peak: float, warmup: float = 0.04, floor: float = 0.05) -> float:
    if progress < warmup:
        return peak * max(progress / warmup, 0.01)
    p = min(1.0, (progress - warmup) / (1 - warmup))
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * p)))


def load_init(drafter, init: Path, log: Callable[[str], None]) -> int:
    """Loads ``init`` into ``drafter`` and returns how many layers it held: a drafter as users have it
    (q8_0 GGUF) or another sitting's f16 shards + drafter.json (<= 16 MB a file). Its configuration
    must be the drafter's; one with fewer layers or a narrower FFN, and otherwise the same, grows into
    it (``grow_state``: added layers start as the identity, added FFN units add nothing), so the grown
    drafter drafts what ``init`` did. Anything else is a ValueError naming what differs."""
    import torch

    from .ckpt import load_sharded
    from .drafter_model import grow_state

    run_cfg = drafter.c.to_dict()

    def want(c: Any) -> dict:
        """The run's configuration, with the init's layer count and FFN width where those grow."""
        out = dict(run_cfg)
        if not isinstance(c, dict):
            return out
        for key in ("n_layer", "n_ff"):
            n = c.get(key)
            if isinstance(n, int) and 0 < n < run_cfg[key]:
                out[key] = n
        return out

    if init.suffix == ".gguf":
        from .drafter_gguf import config_mismatch, read_drafter_gguf

        arrays, hdr = read_drafter_gguf(init)
        expect = want(hdr)
        bad = config_mismatch(hdr, expect)
        if bad:
            raise ValueError(f"{init} holds a drafter of another configuration than this run's ({'; '.join(bad)})")
        w = {k: torch.from_numpy(v) for k, v in arrays.items()}
    else:
        w, c0 = load_sharded(init, "drafter")
        c = (c0 or {}).get("config")
        expect = want(c)
        if c != expect:
            raise ValueError(f"{init} holds a drafter of another configuration than this run's")
    n_init, n_layer = expect["n_layer"], run_cfg["n_layer"]
    state = grow_state(drafter.state_dict(), w, n_init)
    if state is None:
        raise ValueError(f"{init} holds a drafter of another configuration than this run's (its tensors differ)")
    drafter.load_state_dict(state)
    if n_init < n_layer:
        log(f"train: deepened {init}: {n_init} layers loaded, {n_layer - n_init} added as identity")
    if expect["n_ff"] < run_cfg["n_ff"]:
        log(f"train: widened {init}: FFN {expect['n_ff']} -> {run_cfg['n_ff']}, the added units start silent")
    return n_init


def init_history(init: Path | None) -> dict | None:
    """What an ``--init`` drafter's training recorded, for the log and this run's drafter.json: the
    step it kept, the steps over every sitting it descends from, how many sittings, and its held-out
    walk then (on that sitting's held-out answers). None for a GGUF (users' drafters keep no such
    record) or a folder without drafter.json. A drafter.json written before ``steps_total`` existed
    counts its own sitting only."""
    if init is None or init.suffix == ".gguf" or not (init / "drafter.json").is_file():
        return None
    t = json.loads((init / "drafter.json").read_text()).get("train") or {}
    kept = int(t.get("kept_step", t.get("steps", 0)))
    return {
        "kept_step": kept,
        "steps_total": int(t.get("steps_total", kept)),
        "sittings": int(t.get("sittings", 1)),
        "val_walk_accepted": t.get("val_walk_accepted"),
    }


def default_target_layers(n_layer: int, n: int = 5) -> list[int]:
    """GGUF ids (input of layer k), spread evenly from layer 2 to layer L-2: the recipe's Hugging Face
    hidden states 1 .. L-3 (the output of layer k is the input of layer k + 1)."""
    ids = np.linspace(2, max(2, n_layer - 2), n).round().astype(int)
    return sorted({int(i) for i in ids})


def pick_device(device: str | None):
    import torch

    if device in (None, "", "cuda", "auto"):
        if not torch.cuda.is_available():
            raise NoCudaError(
                "no CUDA device: drafter training needs a GPU (torch sees none). "
                "Give --device cpu to run on the CPU anyway (tiny test configurations only)."
            )
        return torch.device("cuda")
    return torch.device(device)


def check_gpus(device: str | None, gpus: int) -> None:
    """A ValueError when ``gpus`` CUDA devices are asked for and torch sees fewer (said before any
    preparation runs). On the CPU several processes stand in for GPUs (the tests)."""
    if gpus <= 1 or device == "cpu":
        return
    import torch

    n = torch.cuda.device_count()
    if n < gpus:
        raise ValueError(f"{gpus} GPUs asked for, but torch sees {n} on this machine")


class _Logger:
    def __init__(self, out: Path, log: Callable[[str], None] | None):
        out.mkdir(parents=True, exist_ok=True)
        self.f = open(out / "train-log.txt", "a")
        self.echo = log or (lambda s: print(s, flush=True))

    def __call__(self, msg: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')}] {msg}"
        self.echo(line)
        self.f.write(line + "\n")
        self.f.flush()


def _fmt(s: float) -> str:
    s = max(0, int(s))
    return f"{s // 60}:{s % 60:02d}"


# -- 1. generation: gen_conversations (Magpie prompts, greedy + sampled first turns, follow-ups) ---------------
def val_split(prompt_index: np.ndarray, frac: float) -> np.ndarray:
    """Boolean mask of the validation sequences: whole prompts (every answer and follow-up of a
    prompt on one side), chosen by a hash of the prompt index, so a sampled answer never
    validates the drafter that trained on its greedy twin."""
    k = max(2, int(round(1 / max(frac, 1e-6))))
    h = (prompt_index.astype(np.int64) * 2654435761) % (1 << 32)
    return (h % k) == 0


# -- 2. training ---------------------------------------------------------------------------------------------
def make_batch(seqs, plen, idx, K: int, S: int, mask_id: int, pad_id: int, gen, first_block: bool = False):
    """Right-padded tokens (B, L), anchors (B, K), block tokens (B, K, S), labels (B, K, S) and
    label weights (B, K, S) (0 past a sequence's end). ``first_block``: one anchor per sequence, at
    the prompt's last token (a request's first block, scored on its own by validation)."""
    import torch

    B = len(idx)
    lens = [len(seqs[i]) for i in idx]
    L = max(lens)
    x = torch.full((B, L + S), pad_id, dtype=torch.long)
    for b, i in enumerate(idx):
        x[b, : lens[b]] = torch.from_numpy(seqs[i])
    # the first anchor is the prompt's last token: a request's first step drafts from there (the
    # engine prefills prompt[:-1] and opens the block at prompt[-1]), so its slots predict the first
    # response tokens. Anchors from the first response token on, as before 2026-11-29, never trained
    # that block: on an H200 the first step committed 1 token on 155 of 164 HumanEval prompts.
    lo = torch.tensor([int(plen[i]) - 1 for i in idx], dtype=torch.float32)
    hi = torch.tensor(lens, dtype=torch.float32) - 2  # last anchor with a label
    lo = torch.minimum(lo, hi)
    if first_block:
        anchors = lo[:, None].long()
    else:
        u = torch.rand(B, K, generator=gen)
        anchors = (lo[:, None] + u * (hi - lo + 1)[:, None]).floor().long()
    block, labels, valid = blocks_at(x, lens, anchors, S, mask_id)
    return x[:, :L], anchors, block, labels, valid


def blocks_at(x, lens, anchors, S: int, mask_id: int):
    """Block tokens, labels and label weights (B, K, S) of blocks opened at ``anchors`` (B, K) of the
    right-padded tokens ``x`` (B, >= max anchor + S); weights 0 past a sequence's end."""
    import torch

    B, K = anchors.shape
    pos = anchors[:, :, None] + torch.arange(S)
    labels = torch.gather(x[:, None, :].expand(B, K, x.shape[1]), 2, pos)
    valid = (pos < torch.tensor(lens)[:, None, None]).float()
    block = torch.full_like(labels, mask_id)
    block[:, :, 0] = labels[:, :, 0]
    return block, labels, valid


def block_loss(logits, labels, valid, weights, target_logits=None, kl: float = 0.0):
    """Weighted CE over slots 1..S-1 (padding excluded), slot accuracies, accepted drafts per block,
    and accepted drafts within the first 7 slots (what a chain-7 step can take; comparable between
    block sizes). With ``target_logits`` (B, K, S-1, V: the target's own distribution for each
    slot's token) and ``kl`` > 0, ``kl`` x KL(target || drafter) is added on the same weights: a
    sampled answer's label is one draw, the target's softmax says what else it would have taken."""
    import torch
    import torch.nn.functional as F

    B, K, S, V = logits.shape
    ce = F.cross_entropy(logits[:, :, 1:].float().reshape(-1, V), labels[:, :, 1:].reshape(-1), reduction="none").view(
        B, K, S - 1
    )
    if target_logits is not None and kl > 0:
        lp_d = F.log_softmax(logits[:, :, 1:].float(), dim=-1)
        lp_t = F.log_softmax(target_logits.float(), dim=-1)
        ce = ce + kl * (lp_t.exp() * (lp_t - lp_d)).sum(-1)
    w = weights[1:] * valid[:, :, 1:]
    loss = (ce * w).sum() / w.sum().clamp(min=1e-6)
    with torch.no_grad():
        ok = (logits[:, :, 1:].argmax(-1) == labels[:, :, 1:]).float() * valid[:, :, 1:]
        run = torch.cumprod(ok, dim=-1)
        accepted = run.sum(-1)
        acc = ok.sum((0, 1)) / valid[:, :, 1:].sum((0, 1)).clamp(min=1)
    return loss, acc, accepted.mean(), run[:, :, :7].sum(-1).mean()


def target_slot_logits(target, hidden, anchors, S: int):
    """The target's logits for slots 1..S-1 of each block: its final hidden state at anchor + j - 1
    (which predicts the token at anchor + j) through its output head; (B, K, S-1, V)."""
    import torch
    import torch.nn.functional as F

    B, L, D = hidden.shape
    pos = (anchors[:, :, None] + torch.arange(S - 1, device=anchors.device)).clamp(max=L - 1)
    h = torch.gather(hidden, 1, pos.reshape(B, -1, 1).expand(B, pos.shape[1] * (S - 1), D))
    return F.linear(h, target.lm_head_weight).view(B, anchors.shape[1], S - 1, -1)


LABEL_MODES = ("tokens", "argmax", "rollout")
#: what the kept step is chosen on: "walk", the held-out accepted drafts per step of the engine's own
#: walk (blocks where a chain step opens them, walk.py), or "block", per block at random anchors (the
#: choice before 2026-11-30; it reads 18-26 % above what the engine takes, walk.py)
SELECT_MODES = ("walk", "block")
#: the walk's verify budget (chain 7, the GPU default) and how far into each held-out answer it goes
#: (the bench's 128 tokens)
WALK_BUDGET = 7
WALK_LEN = 128


def target_labels(t_next, anchors, labels, valid, mode: str):
    """Labels for a block's slots 1..S-1 from the target's own argmax rather than the response.

    ``t_next`` (B, L): the target's argmax after each position of the sequence (what it would
    decode next there). ``mode``:
    - "tokens": the response's own tokens (sampled answers carry one draw each);
    - "argmax": slot j's label is the target's argmax after the response up to anchor + j - 1;
    - "rollout": those labels, and slot j counts only while the response's tokens at slots
      1..j-1 are the target's argmax too, so that every label is the target's greedy continuation
      from the anchor, which is what a greedy verify accepts.
    Returns (labels, valid)."""
    import torch

    if mode == "tokens":
        return labels, valid
    if mode not in LABEL_MODES:
        raise ValueError(f"label mode {mode!r}: one of {', '.join(LABEL_MODES)}")
    B, L = t_next.shape
    S = labels.shape[2]
    prev = (anchors[:, :, None] + torch.arange(S, device=anchors.device) - 1).clamp(0, L - 1)
    greedy = torch.gather(t_next, 1, prev.reshape(B, -1)).view_as(labels)
    out = labels.clone()
    out[:, :, 1:] = greedy[:, :, 1:]
    if mode == "argmax":
        return out, valid
    same = (labels[:, :, 1:] == greedy[:, :, 1:]).to(valid.dtype)
    # slot j (j >= 2) keeps its weight only if slots 1..j-1 were the target's greedy tokens
    before = torch.cumprod(torch.cat([torch.ones_like(same[:, :, :1]), same[:, :, :-1]], dim=-1), dim=-1)
    valid = valid.clone()
    valid[:, :, 1:] = valid[:, :, 1:] * before
    return out, valid


def train_subset(tr_idx: np.ndarray, pidx: np.ndarray, frac: float) -> np.ndarray:
    """The training sequences of a ``frac`` share of the training prompts (whole prompts, by a hash
    of the prompt index, so every answer and follow-up of a kept prompt stays): the data-scale
    ablation trains on less data of the same pool."""
    if frac >= 1.0:
        return tr_idx
    h = (pidx[tr_idx].astype(np.int64) * 40503 + 12345) % 10007
    keep = tr_idx[h < frac * 10007]
    return keep if len(keep) else tr_idx[:1]


def train(
    target,
    data: Path,
    out: Path,
    *,
    dev,
    seconds: float,
    n_layer: int,
    target_layers: list[int],
    block_size: int,
    batch: int,
    anchors: int,
    lr: float,
    gamma: float,
    ckpt_every: float,
    val_frac: float,
    max_steps: int | None,
    seed: int,
    resume: bool,
    log,
    progress,
    cancel,
    weight_decay: float = 0.1,
    patience: int = 0,
    mixed_blocks: bool = False,
    warmup: float = 0.04,
    init: Path | None = None,
    kl: float = 0.0,
    train_frac: float = 1.0,
    n_ff: int | None = None,
    labels: str = "tokens",
    group=None,
    val_seqs: int = VAL_SEQS,
    walk_frac: float = 0.0,
    select: str = "walk",
) -> dict:
    import torch
    import torch.nn.functional as F

    from .multi_gpu import Group, summary_fields

    from .ckpt import load_sharded, save_sharded
    from .drafter_model import DFlashDrafter, DrafterConfig, position_weights

    from .gen_conversations import load_sequences as load_conversations

    meta = json.loads((data / "meta.json").read_text())
    from .gen_conversations import KIND_VAL

    seqs, plen, pidx, kinds = load_conversations(out, data)
    if not seqs:
        raise ValueError("no generated responses to train on")
    # the answers to the val split's prompts when the run has them; else whole prompts by a hash
    is_val = kinds == KIND_VAL if (kinds == KIND_VAL).any() else val_split(pidx, val_frac)
    if len(seqs) <= 4 or is_val.all() or not is_val.any():
        is_val = np.zeros(len(seqs), bool)
        is_val[0] = True
    tr_idx = train_subset(np.flatnonzero(~is_val), pidx, train_frac)
    va_idx = np.flatnonzero(is_val)
    if len(tr_idx) == 0:
        tr_idx = va_idx
    tc = target.c
    cuda = dev.type == "cuda"
    ckdir = out / "ckpt"
    cfg = DrafterConfig(
        n_embd=tc.n_embd,
        n_layer=n_layer,
        n_head=tc.n_head,
        n_head_kv=tc.n_head_kv,
        head_dim=tc.head_dim,
        n_ff=n_ff or tc.n_ff,
        block_size=block_size,
        target_layers=target_layers,
        mask_token_id=int(meta["mask_id"]),
        rope_theta=tc.rope_theta,
        rms_eps=tc.rms_eps,
        n_ctx=min(int(tc.n_ctx), 32768),
    )
    torch.manual_seed(seed)
    drafter = DFlashDrafter(cfg).to(dev)
    with torch.no_grad():
        # The drafter reads the target's lm_head through its own final norm. A unit norm weight makes
        # logits of std |e| (SmolLM2: a start loss near 90, AdamW's first steps wasted on the scale);
        # 1/rms|e| starts them at std ~1 (loss ~ log V).
        head = target.lm_head_weight.float()
        drafter.norm.weight.fill_(float(head.pow(2).sum(-1).mean().rsqrt()))
    opt = torch.optim.AdamW(drafter.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=weight_decay, fused=cuda)
    state: dict[str, Any] = {"step": 0, "elapsed": 0.0, "hist": [], "best": -1.0, "best_step": 0}
    group = group or Group()
    # each rank draws its own batches (and anchors) from the one pool
    rank_seed = seed + 1_000_003 * group.rank
    gen = torch.Generator().manual_seed(rank_seed)
    before = init_history(init)
    if init is not None and not (resume and (ckdir / "state.json").exists()):
        # a warm start from another sitting's exported weights: the optimiser state stays behind, so
        # this run warms up again
        load_init(drafter, init, log)
        log(f"train: warm start from {init} (its optimiser state is not carried; {warmup:.0%} warm-up)")
        if before is not None:
            # which drafter this is, said where a wrong folder shows: sitting s65 carried s61's
            # shards where s63's were meant, and only its held-out walk at step 1 told
            log(
                f"train: {init} kept step {before['kept_step']} of its sitting, {before['steps_total']} steps over "
                f"{before['sittings']} sitting(s); its held-out walk then {before['val_walk_accepted']}"
            )
    if resume and (ckdir / "state.json").exists():
        st = json.loads((ckdir / "state.json").read_text())
        if st["config"] != cfg.to_dict():
            raise ValueError(f"{ckdir} holds a checkpoint of another configuration; remove it or give another --out")
        w, _ = load_sharded(ckdir, "drafter")
        drafter.load_state_dict(w)
        o, _ = load_sharded(ckdir, "optim")
        osd = opt.state_dict()
        for i, pid in enumerate(sorted(osd["state"]) or range(len(list(drafter.parameters())))):
            if f"{i}.exp_avg" in o:
                osd["state"][pid] = {
                    "step": o[f"{i}.step"].float().reshape(()) if f"{i}.step" in o else torch.tensor(float(st["step"])),
                    "exp_avg": o[f"{i}.exp_avg"].to(dev),
                    "exp_avg_sq": o[f"{i}.exp_avg_sq"].to(dev),
                }
        opt.load_state_dict(osd)
        state = st["state"]
        gen.manual_seed(rank_seed + state["step"])
        log(f"train: resumed at step {state['step']} ({_fmt(state['elapsed'])} of {_fmt(seconds)} done)")
    n_params = sum(p.numel() for p in drafter.parameters())
    log(
        f"train: drafter {n_params / 1e6:.2f} M parameters, {n_layer} layers, block {block_size}, target layers "
        f"(GGUF ids) {target_layers}, mask token {cfg.mask_token_id}; {len(tr_idx)} train / {len(va_idx)} held-out "
        f"sequences; device {dev}" + (f", {group.world} ranks (batch {batch} each)" if group.multi else "")
    )
    embed_w = target.embed_tokens.weight
    head_w = None if tc.tied else target.lm_head.weight
    weights = {S: position_weights(S, gamma, dev) for S in {8, block_size}}
    pad = int(meta["pad_id"])

    # the training forward goes through DDP (its backward averages the gradient over the ranks);
    # validation, on rank 0 alone, through the drafter itself
    net = group.wrap(drafter)

    if labels not in LABEL_MODES:
        raise ValueError(f"label mode {labels!r}: one of {', '.join(LABEL_MODES)}")
    if select not in SELECT_MODES:
        raise ValueError(f"checkpoint selection {select!r}: one of {', '.join(SELECT_MODES)}")
    if not 0.0 <= walk_frac <= 1.0:
        raise ValueError(f"walk_frac {walk_frac}: a share of each sequence's anchors, 0..1")
    walk_n = round(anchors * walk_frac)

    def step_loss(idx, S, g, model=drafter, mode=labels, first_block=False):
        """block_loss of a batch; ``first_block``: (that, each answer's first block's accepted
        drafts, and the engine's walk over each answer (accepted drafts, steps), all from the same
        target forward) -- validation's scores."""
        x, anc, blk, lab, val = make_batch(seqs, plen, idx, anchors, S, cfg.mask_token_id, pad, g)
        lens = [len(seqs[i]) for i in idx]
        x, anc, blk, lab, val = (t.to(dev, non_blocking=True) for t in (x, anc, blk, lab, val))
        # the target's head is read (KL, argmax labels) only from its final hidden state: without
        # full=True the forward stops at the last feature layer
        need_head = kl > 0 or mode != "tokens"
        with torch.no_grad(), torch.autocast(dev.type, dtype=torch.bfloat16, enabled=cuda):
            hidden, feats = target(x, layer_inputs=target_layers, logits=False, full=need_head)
            feats = torch.cat(feats, dim=-1)
            if walk_n and not first_block:
                # part of the blocks where the engine would open them: along the drafter's own walk
                lo = [min(int(plen[i]) - 1, n - 2) for i, n in zip(idx, lens)]
                aw = walk_anchors(
                    drafter, feats, x, lens, lo, walk_n, S, WALK_BUDGET, cfg.mask_token_id, embed_w, head_w, g
                )
                anc_c = torch.cat([aw, anc.cpu()[:, walk_n:]], dim=1)
                blk, lab, val = blocks_at(F.pad(x.cpu(), (0, S), value=pad), lens, anc_c, S, cfg.mask_token_id)
                anc, blk, lab, val = (t.to(dev, non_blocking=True) for t in (anc_c, blk, lab, val))
            t_logits = target_slot_logits(target, hidden, anc, S) if kl > 0 else None
            if mode != "tokens":
                t_next = F.linear(hidden, target.lm_head_weight).argmax(-1)
                lab, val = target_labels(t_next, anc, lab, val, mode)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=cuda):
            logits = model(feats, anc, blk, embed_w, head_w)
        out = block_loss(logits, lab, val, weights[S], t_logits, kl)
        if not first_block:
            return out
        _, anc1, blk1, lab1, val1 = make_batch(seqs, plen, idx, 1, S, cfg.mask_token_id, pad, g, first_block=True)
        anc1, blk1, lab1, val1 = (t.to(dev, non_blocking=True) for t in (anc1, blk1, lab1, val1))
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=cuda):
            logits1 = model(feats, anc1, blk1, embed_w, head_w)
            pl = [int(plen[i]) for i in idx]
            walked = walk_accepted(
                model, feats, x, pl, lens, S, WALK_BUDGET, cfg.mask_token_id, embed_w, head_w, WALK_LEN
            )
        return out, block_loss(logits1, lab1, val1, weights[S])[2], walked

    val_first = float("nan")  # the last validation's first-block accepted drafts
    val_walk = float("nan")  # the last validation's accepted drafts per step of the engine's walk

    def score(vlen: float) -> float:
        """What the kept step is chosen on (``select``)."""
        return val_walk if select == "walk" else vlen

    def validate():
        drafter.eval()
        g = torch.Generator().manual_seed(seed + 1)
        parts, firsts = [], []
        w_acc = w_steps = 0
        with torch.no_grad():
            for i in range(0, min(len(va_idx), max(1, val_seqs)), batch):
                # the blocks and, from the same target forward, each answer's first block alone (what a
                # request's first step drafts: reported) and the engine's walk over each answer
                part, first, (a_, n_) = step_loss(
                    va_idx[i : i + batch].tolist(), block_size, g, mode="tokens", first_block=True
                )
                parts.append(part)
                firsts.append(first)
                w_acc, w_steps = w_acc + a_, w_steps + n_
        drafter.train()
        nonlocal val_first, val_walk
        val_first = torch.stack(firsts).mean().item()
        val_walk = w_acc / max(w_steps, 1)
        return (
            torch.stack([p[0] for p in parts]).mean().item(),
            torch.stack([p[1] for p in parts]).mean(0).tolist(),
            torch.stack([p[2] for p in parts]).mean().item(),
            torch.stack([p[3] for p in parts]).mean().item(),
        )

    def checkpoint():
        save_sharded(drafter.state_dict(), ckdir, "drafter")
        osd = opt.state_dict()["state"]
        flat = {}
        for i, pid in enumerate(sorted(osd)):
            for k in ("exp_avg", "exp_avg_sq"):
                flat[f"{i}.{k}"] = osd[pid][k]
            flat[f"{i}.step"] = torch.as_tensor(osd[pid]["step"]).float().reshape(1)
        save_sharded(flat, ckdir, "optim")
        (ckdir / "state.json").write_text(json.dumps({"config": cfg.to_dict(), "state": state}))

    def save_drafter(summary: dict) -> None:
        """The drafter for export: f16 shards (<= 15 MB each) + drafter.json, in the run folder."""
        save_sharded(
            drafter.state_dict(),
            out,
            "drafter",
            dtype=torch.float16,
            config={
                "config": cfg.to_dict(),
                "vocab_size": int(tc.vocab_size),
                "n_target_layers": tc.n_layer,
                "target": meta["target"],
                "train": summary,
            },
        )

    t_start = time.time() - state["elapsed"]
    last_ckpt = time.time()
    next_log = state["elapsed"]
    best_state = None
    cancelled = False
    stale = 0  # evaluations since the held-out acceptance last improved
    drafter.train()
    while True:
        el = time.time() - t_start
        halt = 0  # 1: the budget is spent or patience ran out; 2: cancelled
        if el >= seconds or (max_steps is not None and state["step"] >= max_steps):
            halt = 1
        elif patience and stale >= patience:
            log(
                f"train: stopping early: no held-out improvement in {stale} evaluations (best {state['best']:.2f} "
                f"at step {state['best_step']})"
            )
            halt = 1
        elif cancel is not None and cancel.is_set():
            halt = 2
        # the schedule follows the clock, or the steps when a step budget is given (runs sharing a
        # GPU, as an ablation's do, then see the same schedule at the same step)
        done = state["step"] / max_steps if max_steps else el / seconds
        S = block_size if not mixed_blocks or torch.rand(1, generator=gen).item() < 0.5 else min(8, block_size)
        # rank 0's clock, patience and block size rule every rank: all take the same steps
        halt_f, done, S_f = group.decide([halt, done, S], dev)
        halt, S = int(halt_f), int(S_f)
        if halt:
            cancelled = halt == 2
            break
        for gp in opt.param_groups:
            gp["lr"] = lr_at(min(done, 1.0), lr, warmup=warmup)
        idx = tr_idx[torch.randint(0, len(tr_idx), (batch,), generator=gen).numpy()].tolist()
        loss, acc, accepted, _ = step_loss(idx, S, gen, net)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(drafter.parameters(), 1.0)
        opt.step()
        state["step"] += 1
        state["elapsed"] = time.time() - t_start
        if group.main and (el >= next_log or (max_steps is not None and state["step"] >= max_steps)):
            vl, vacc, vlen, v7 = validate()
            if score(vlen) > state["best"]:
                state["best"], state["best_step"] = score(vlen), state["step"]
                best_state = {k: v.detach().clone() for k, v in drafter.state_dict().items()}
                # a run stopped from outside still leaves its best drafter ready for export
                save_drafter(
                    {
                        "steps": state["step"],
                        "kept_step": state["step"],
                        "seconds": round(el, 1),
                        "val_accepted_per_block": round(vlen, 3),
                        "val_walk_accepted": round(val_walk, 3),
                        "select": select,
                        "history": state["hist"],
                        "partial": True,
                    }
                )
                stale = 0
            else:
                stale += 1
            rate = state["step"] / max(state["elapsed"], 1e-9)  # el is the time before this step
            eta = max(0.0, seconds - el)
            if max_steps is not None:
                eta = min(eta, (max_steps - state["step"]) / max(rate, 1e-9))
            rec = {
                "t": round(el, 1),
                "step": state["step"],
                "loss": round(loss.item(), 4),
                "val_loss": round(vl, 4),
                "val_accepted_per_block": round(vlen, 3),
                "val_accepted_first7": round(v7, 3),
                "val_first_block_accepted": round(val_first, 3),
                "val_walk_accepted": round(val_walk, 3),
                "val_slot_acc": [round(a, 3) for a in vacc[:8]],
                "lr": opt.param_groups[0]["lr"],
            }
            state["hist"].append(rec)
            log(
                f"train: step {state['step']:6d}  loss {loss.item():.3f}  val {vl:.3f}  val accepted/block({block_size}) "
                f"{vlen:.2f}  walk {val_walk:.3f}  first block {val_first:.2f}  slot1 {vacc[0]:.2f}  {rate:.1f} step/s  {_fmt(el)} elapsed, ETA {_fmt(eta)}"
            )
            if progress:
                progress(
                    {
                        "stage": "train",
                        "step": state["step"],
                        "elapsed_s": el,
                        "eta_s": eta,
                        "loss": rec["loss"],
                        "val_loss": rec["val_loss"],
                        "val_accepted": rec["val_accepted_per_block"],
                        "val_walk": rec["val_walk_accepted"],
                    }
                )
            next_log = el + max(min(seconds / 40, 30.0), 1.0)
        if group.main and time.time() - last_ckpt > ckpt_every:
            checkpoint()
            last_ckpt = time.time()
    agree = group.replicas_agree(drafter, dev)
    if not group.main:
        group.barrier()
        return {"rank": group.rank, "steps": state["step"], "replicas_agree": agree}
    vl, vacc, vlen, v7 = validate()
    kept = state["step"]
    if score(vlen) < state["best"] and (best_state is not None or list(out.glob("drafter-*.safetensors"))):
        log(
            f"train: keeping step {state['best_step']} (held-out {select} score {state['best']:.3f} > {score(vlen):.3f})"
        )
        if best_state is None:  # resumed: the best so far is the one saved in the run folder
            best_state = {k: v.to(dev) for k, v in load_sharded(out, "drafter")[0].items()}
        drafter.load_state_dict(best_state)
        kept = state["best_step"]
        vl, vacc, vlen, v7 = validate()
    checkpoint()
    summary = {
        "params": n_params,
        "steps": state["step"],
        "kept_step": kept,
        # the drafter's lineage: the warm start it came from, and the steps and sittings of all of it
        "init": None if init is None else {"path": str(init), **(before or {})},
        "steps_total": (before["steps_total"] if before else 0) + kept,
        "sittings": (before["sittings"] if before else 0) + 1,
        "seconds": round(state["elapsed"], 1),
        "batch": batch,
        "anchors_per_seq": anchors,
        "lr": lr,
        "gamma": gamma,
        "kl": kl,
        "train_frac": train_frac,
        "labels": labels,
        "walk_frac": walk_frac,
        "select": select,
        "weight_decay": weight_decay,
        "best_step": state["best_step"],
        "val_loss": round(vl, 4),
        "val_accepted_per_block": round(vlen, 3),
        "val_accepted_first7": round(v7, 3),
        "val_first_block_accepted": round(val_first, 3),
        "val_walk_accepted": round(val_walk, 3),
        "val_slot_acc": [round(a, 3) for a in vacc],
        "train_sequences": int(len(tr_idx)),
        "val_sequences": int(len(va_idx)),
        "cancelled": cancelled,
        **summary_fields(group, batch),
        "replicas_agree": agree,
        "history": state["hist"],
        "device": torch.cuda.get_device_name(dev) if cuda else str(dev),
    }
    save_drafter(summary)
    log(
        f"train: {'cancelled' if cancelled else 'done'}: {state['step']} steps in {_fmt(state['elapsed'])}; held-out "
        f"accepted drafts per block ({block_size}) {vlen:.2f}, per step of the engine's walk {val_walk:.3f}; drafter -> {out}/drafter-*.safetensors"
    )
    group.barrier()
    return summary


def run(
    target: str | Path,
    data: str | Path,
    out: str | Path,
    *,
    stages=("generate", "train"),
    device: str | None = None,
    gen_seconds: float = DEFAULTS["gen_seconds"],
    seconds: float = DEFAULTS["seconds"],
    max_new: int = DEFAULTS["max_new"],
    gen_batch: int = DEFAULTS["gen_batch"],
    max_prompts: int | None = None,
    gen_fp32: bool = False,
    n_layer: int = DEFAULTS["n_layer"],
    target_layers: list[int] | None = None,
    n_target_layers: int = DEFAULTS["n_target_layers"],
    block_size: int = DEFAULTS["block_size"],
    batch: int = DEFAULTS["batch"],
    anchors: int = DEFAULTS["anchors"],
    lr: float = DEFAULTS["lr"],
    gamma: float = DEFAULTS["gamma"],
    ckpt_every: float = DEFAULTS["ckpt_every"],
    val_frac: float = DEFAULTS["val_frac"],
    weight_decay: float = DEFAULTS["weight_decay"],
    patience: int = DEFAULTS["patience"],
    max_steps: int | None = None,
    seed: int = 0,
    resume: bool = True,
    temperatures=DEFAULTS["temperatures"],
    magpie_frac: float = DEFAULTS["magpie_frac"],
    followup_frac: float = DEFAULTS["followup_frac"],
    mixed_blocks: bool = False,
    warmup: float = DEFAULTS["warmup"],
    every_temperature: bool = False,
    init: str | Path | None = None,
    kl: float = 0.0,
    train_frac: float = 1.0,
    n_ff: int | None = None,
    labels: str = "tokens",
    val_seqs: int = VAL_SEQS,
    walk_frac: float = 0.0,
    select: str = "walk",
    threads: int | None = None,
    shard: tuple[int, int] = (0, 1),
    gpus: int = 1,
    earlier_pools: list[str] | None = None,
    category_weights: str | None = None,
    progress: Callable[[dict], None] | None = None,
    cancel=None,
    log: Callable[[str], None] | None = None,
) -> dict:
    """Generate the target's responses and train its drafter; returns a summary dict.

    ``target``: the target GGUF (llama or qwen3); ``data``: a folder from ``chat_data.prepare``;
    ``out``: the run folder (gen/, ckpt/, drafter-*.safetensors, drafter.json, train-log.txt).
    ``device``: None / "cuda" need CUDA (NoCudaError otherwise); "cpu" runs on the CPU (tests).
    ``progress(dict)``: called after each generation batch (stage "generate": done, total, eta_s)
    and at each log point of training (stage "train": step, loss, val_loss, val_accepted, eta_s).
    ``cancel``: anything with ``is_set()`` (a threading.Event): generation stops (nothing saved),
    training checkpoints and writes the drafter so far (summary["train"]["cancelled"] is True).
    ``shard`` (K, N): generate the K-th of N shares of the prompts (one process per GPU, each with
    its own ``out``; ``shards.merge_pools`` joins them). Under ``torchrun`` (WORLD_SIZE > 1) the
    training runs on every rank in DistributedDataParallel (``multi_gpu``); rank 0 writes the run.
    ``gpus`` > 1 outside torchrun: both stages on that many GPUs of this host, as child processes
    (``launch``; their lines reach ``log``, and ``progress`` the events they stand for).
    ``earlier_pools``: run folders of earlier sittings on the same prepared data; a pool generated
    here is joined with theirs (``shards.merge_pools``: without their validation answers), so that a
    warm start trains on every sitting's conversations.
    ``category_weights`` ("code=3,math=1.5"): the prompts of those categories are answered ahead of
    the others in that proportion (``gen_conversations.prompt_order``), so a budget that ends
    part-way leaves a pool with that mix; the categories not named weigh 1.
    """
    from .launch import FLAGS

    settings = {k: v for k, v in locals().items() if k in FLAGS}  # first: only the arguments so far
    if gpus > 1 and "WORLD_SIZE" not in os.environ:
        from .launch import run_on_gpus

        check_gpus(device, gpus)

        return run_on_gpus(
            Path(target),
            Path(data),
            Path(out),
            gpus=gpus,
            stages=stages,
            settings=settings,
            log=log or (lambda s: print(s, flush=True)),
            cancel=cancel,
            progress=progress,
        )
    import torch

    from .gguf_target import load_gguf_target
    from .multi_gpu import from_env

    group = from_env(device)
    if group.multi and "generate" in stages and not (Path(out) / "gen" / "responses.npz").exists():
        group.close()
        raise ValueError(
            "several ranks train on one pool, they do not write it: generate with --shard K/N, one process "
            "per GPU, and join the shares with engine_bridge.training.shards first"
        )
    dev = pick_device(device)
    if group.multi and dev.type == "cuda":
        dev = torch.device("cuda", group.local_rank)
    if dev.type == "cpu":
        torch.set_num_threads(threads or 1)  # a shared CPU: more threads than cores spin and crawl
    elif threads:
        torch.set_num_threads(threads)
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    data, out = Path(data), Path(out)
    log_: Callable[[str], None] = _Logger(out, log) if group.main else (lambda s: None)
    meta = json.loads((data / "meta.json").read_text())
    from .gen_conversations import parse_category_weights

    # checked before the target loads (a minute for a 1.5B): a misspelt category fails at once
    weights = parse_category_weights(category_weights, meta.get("categories", []))
    t0 = time.time()
    model = load_gguf_target(target, device=dev)
    c = model.c
    if c.vocab_size != meta["vocab_size"]:
        raise ValueError(
            f"the data was prepared for a vocabulary of {meta['vocab_size']} tokens, the target has {c.vocab_size}"
        )
    layers = target_layers or default_target_layers(c.n_layer, n_target_layers)
    if any(not 0 < k <= c.n_layer for k in layers):
        raise ValueError(f"target layers {layers} must lie in 1..{c.n_layer}")
    log_(
        f"target {Path(target).name}: {c.arch}, {c.n_layer} layers, n_embd {c.n_embd}, heads {c.n_head}/{c.n_head_kv}, "
        f"vocab {c.vocab_size}, {'tied' if c.tied else 'separate'} output; loaded in {time.time() - t0:.0f} s"
    )
    summary = {"target": meta["target"], "target_layers": layers}
    try:
        if "generate" in stages:
            from . import gen_conversations

            # with earlier pools, this sitting's pool is written beside the run and joined into it
            join = bool(earlier_pools) and shard == (0, 1) and not (out / "gen" / "responses.npz").exists()
            summary["generate"] = gen_conversations.generate(
                model,
                target,
                data,
                out / "shard-0" if join else out,
                seconds=gen_seconds,
                max_new=max_new,
                batch=gen_batch,
                max_prompts=max_prompts,
                log=log_,
                progress=progress,
                cancel=cancel,
                exact=gen_fp32,
                temperatures=temperatures,
                magpie_frac=magpie_frac,
                followup_frac=followup_frac,
                seed=seed,
                every_temperature=every_temperature,
                shard=shard,
                category_weights=weights,
            )
            if join:
                from .shards import merge_pools

                summary["generate"] = merge_pools(out, [out / "shard-0"], list(earlier_pools or []))
                log_(
                    f"generate: joined with {len(earlier_pools or [])} earlier pool(s): {summary['generate']['n']} "
                    f"responses, {summary['generate']['tokens']} tokens"
                )
        if "train" in stages:
            summary["train"] = train(
                model,
                data,
                out,
                dev=dev,
                seconds=seconds,
                n_layer=n_layer,
                target_layers=layers,
                block_size=block_size,
                batch=batch,
                anchors=anchors,
                lr=lr,
                gamma=gamma,
                ckpt_every=ckpt_every,
                val_frac=val_frac,
                max_steps=max_steps,
                seed=seed,
                weight_decay=weight_decay,
                patience=patience,
                mixed_blocks=mixed_blocks,
                warmup=warmup,
                init=Path(init) if init else None,
                kl=kl,
                train_frac=train_frac,
                n_ff=n_ff,
                labels=labels,
                val_seqs=val_seqs,
                walk_frac=walk_frac,
                select=select,
                resume=resume,
                log=log_,
                progress=progress,
                cancel=cancel,
                group=group,
            )
    except Cancelled:
        log_("cancelled during generation; nothing saved")
        summary["cancelled"] = True
    finally:
        group.close()
    if group.main:
        (out / "run-summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--device", default=None, help="cuda (default; an error when there is none) or cpu (tests)")
    ap.add_argument(
        "--gpus",
        type=_checked(int, lambda v: 1 <= v <= 64, "a GPU count in [1, 64]"),
        default=1,
        help="GPUs of this host to generate and train on (one process each, then torchrun; default 1)",
    )
    ap.add_argument(
        "--shard",
        type=_shard,
        default=(0, 1),
        help="generate the K-th of N shares of the prompts (K/N; one process per GPU, then engine_bridge.training.shards)",
    )
    ap.add_argument(
        "--earlier-pool",
        default=None,
        metavar="RUN[,RUN]",
        help="run folders of earlier sittings (same prepared data) whose conversations join this sitting's pool",
    )
    ap.add_argument("--gen-seconds", type=float, default=DEFAULTS["gen_seconds"], help="generation time budget")
    ap.add_argument("--seconds", type=float, default=DEFAULTS["seconds"], help="training time budget")
    ap.add_argument("--max-new", type=int, default=DEFAULTS["max_new"], help="response length cap (tokens)")
    ap.add_argument("--gen-batch", type=int, default=DEFAULTS["gen_batch"], help="prompts generated at once")
    ap.add_argument("--gen-fp32", action="store_true", help="generate in float32, TF32 off (default: bf16 on CUDA)")
    ap.add_argument("--max-prompts", type=int, default=None, help="use at most this many prompts (default all)")
    ap.add_argument("--layers", type=int, default=DEFAULTS["n_layer"], help="drafter layers")
    ap.add_argument(
        "--ffn",
        type=_width,
        default=None,
        help="the drafter's FFN width (default: the target's; narrower makes a smaller file, e.g. for a 1.5B target)",
    )
    ap.add_argument("--target-layers", default=None, help="GGUF ids (input of layer k), comma-separated")
    ap.add_argument(
        "--n-target-layers",
        type=int,
        default=DEFAULTS["n_target_layers"],
        help="how many target layers the drafter reads features from (without --target-layers)",
    )
    ap.add_argument("--block-size", type=int, default=DEFAULTS["block_size"], help="tokens drafted per block")
    ap.add_argument("--batch", type=int, default=DEFAULTS["batch"], help="sequences per training step")
    ap.add_argument("--anchors", type=int, default=DEFAULTS["anchors"], help="blocks per sequence per step")
    ap.add_argument("--lr", type=float, default=DEFAULTS["lr"], help="peak learning rate")
    ap.add_argument("--max-steps", type=int, default=None, help="stop after this many steps (default: the time budget)")
    ap.add_argument("--weight-decay", type=float, default=DEFAULTS["weight_decay"], help="AdamW weight decay")
    ap.add_argument(
        "--patience",
        type=int,
        default=DEFAULTS["patience"],
        help="stop after this many held-out evaluations without improvement (0: never)",
    )
    ap.add_argument("--ckpt-every", type=float, default=DEFAULTS["ckpt_every"], help="seconds between checkpoints")
    ap.add_argument("--no-resume", action="store_true", help="start afresh instead of from the last checkpoint")
    ap.add_argument(
        "--threads", type=int, default=None, help="torch CPU threads (default: 1 on a CPU device, torch's own on CUDA)"
    )
    ap.add_argument("--seed", type=int, default=0, help="seed for the data split and initialisation")
    ap.add_argument(
        "--temperatures",
        default=",".join(str(t) for t in DEFAULTS["temperatures"]),
        help="one response per prompt at each temperature (0 = greedy), comma-separated",
    )
    ap.add_argument(
        "--magpie-frac",
        type=float,
        default=DEFAULTS["magpie_frac"],
        help="share of the generation budget in which the target writes requests itself (0: none)",
    )
    ap.add_argument(
        "--followup-frac",
        type=float,
        default=DEFAULTS["followup_frac"],
        help="share of the generation budget for second turns (the target asks and answers; 0: none)",
    )
    ap.add_argument(
        "--category-weights",
        default=None,
        metavar="NAME=W[,NAME=W]",
        help="answer these categories' prompts ahead of the others in this proportion (e.g. code=3 for a "
        "code pair; the rest weigh 1): a generation budget that ends part-way leaves that mix",
    )
    ap.add_argument(
        "--init",
        default=None,
        metavar="RUN_DIR|DRAFTER.gguf",
        help="start from the drafter of another run (its drafter-*.safetensors + drafter.json) "
        "or from a drafter GGUF of this configuration (e.g. the shipped one)",
    )
    ap.add_argument(
        "--every-temperature",
        action="store_true",
        help="answer each prompt at every temperature (default: once, the temperatures taking turns)",
    )
    ap.add_argument(
        "--mixed-blocks", action="store_true", help="train on blocks of 8 half the time (before 2026-11-25)"
    )
    ap.add_argument("--warmup", type=float, default=DEFAULTS["warmup"], help="share of the budget spent warming up")
    ap.add_argument(
        "--gamma",
        type=float,
        default=DEFAULTS["gamma"],
        help="position weights exp(-(j-1)/gamma) of block slot j (a large value: every slot alike)",
    )
    ap.add_argument(
        "--kl",
        type=_weight,
        default=0.0,
        help="weight of KL(target softmax || drafter) added to the hard-label loss (0: hard labels only)",
    )
    ap.add_argument(
        "--walk-anchors",
        type=_unit,
        default=0.0,
        help="share of each sequence's blocks opened along the drafter's own walk, where the engine opens "
        "them (after a miss); the rest at random positions (0: all random, as before)",
    )
    ap.add_argument(
        "--select",
        choices=SELECT_MODES,
        default="walk",
        help="keep the step with the most held-out accepted drafts per step of the engine's walk (walk, "
        "the default) or per block at random anchors (block, before 2026-11-30)",
    )
    ap.add_argument(
        "--train-frac",
        type=_share,
        default=1.0,
        help="train on this share of the training prompts (whole prompts; the data-scale ablation)",
    )
    ap.add_argument(
        "--labels",
        choices=LABEL_MODES,
        default="tokens",
        help="slot labels: the responses' own tokens (default), the target's argmax after each prefix, "
        "or that argmax only along the target's greedy continuation from the anchor (rollout)",
    )
    ap.add_argument(
        "--val-seqs",
        type=_checked(int, lambda v: v >= 1, "a positive integer"),
        default=VAL_SEQS,
        help=f"held-out sequences scored at each check (default {VAL_SEQS}; fewer: a quicker, noisier choice)",
    )


def _checked(cast, ok: Callable[[Any], bool], what: str):
    """An argparse type: ``cast`` of the text, refused with ``what`` unless ``ok`` holds."""

    def parse(text: str):
        try:
            v = cast(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a {'whole number' if cast is int else 'number'}"
            ) from None
        if not ok(v):
            raise argparse.ArgumentTypeError(f"{text!r}: {what}")
        return v

    return parse


_width = _checked(int, lambda v: 8 <= v <= 65536, "an FFN width in [8, 65536]")
_share = _checked(float, lambda v: 0 < v <= 1, "a share in (0, 1]")
_unit = _checked(float, lambda v: 0 <= v <= 1, "a share in [0, 1]")
_weight = _checked(float, lambda v: 0 <= v <= 100, "a weight in [0, 100]")


def _shard(text: str) -> tuple[int, int]:
    try:
        return shard_of(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _temperatures(text: str) -> tuple[float, ...]:
    try:
        t = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"--temperatures {text!r}: numbers separated by commas") from None
    if not t or any(not 0 <= x <= 2 for x in t):
        raise argparse.ArgumentTypeError(f"--temperatures {text!r}: one or more values in [0, 2]")
    return t


def kwargs_from(a) -> dict:
    return dict(
        device=a.device,
        gen_seconds=a.gen_seconds,
        seconds=a.seconds,
        max_new=a.max_new,
        gen_batch=a.gen_batch,
        max_prompts=a.max_prompts,
        gen_fp32=a.gen_fp32,
        n_layer=a.layers,
        n_ff=a.ffn,
        target_layers=[int(x) for x in a.target_layers.split(",")] if a.target_layers else None,
        n_target_layers=a.n_target_layers,
        block_size=a.block_size,
        batch=a.batch,
        anchors=a.anchors,
        lr=a.lr,
        max_steps=a.max_steps,
        weight_decay=a.weight_decay,
        patience=a.patience,
        ckpt_every=a.ckpt_every,
        resume=not a.no_resume,
        threads=a.threads,
        seed=a.seed,
        temperatures=_temperatures(a.temperatures),
        magpie_frac=a.magpie_frac,
        followup_frac=a.followup_frac,
        mixed_blocks=a.mixed_blocks,
        warmup=a.warmup,
        gamma=a.gamma,
        kl=a.kl,
        train_frac=a.train_frac,
        labels=a.labels,
        val_seqs=a.val_seqs,
        walk_frac=a.walk_anchors,
        select=a.select,
        every_temperature=a.every_temperature,
        init=a.init,
        shard=a.shard,
        gpus=a.gpus,
        earlier_pools=[x for x in a.earlier_pool.split(",") if x] if a.earlier_pool else None,
        category_weights=a.category_weights,
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--stage", choices=["all", "generate", "train"], default="all")
    add_arguments(ap)
    a = ap.parse_args(argv)
    stages = ("generate", "train") if a.stage == "all" else (a.stage,)
    try:
        run(a.target, a.data, a.out, stages=stages, **kwargs_from(a))
    except (NoCudaError, ValueError) as e:
        # bad input (a category weight, a pool of other data, a checkpoint of another shape): said
        # in one line, as the other commands do, not as a traceback
        print(f"error: {e}", flush=True)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
