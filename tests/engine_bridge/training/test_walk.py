"""The drafter's walk (training/walk.py): blocks where the engine opens them.

* ``walk`` steps as a greedy chain verify does: the next block after the accepted drafts and the
  target's token;
* ``span_drafts`` drafts at every anchor of a span what a block decoded alone there drafts, across
  chunk boundaries and spans of different lengths;
* ``walk_anchors`` returns the walk's anchors, filled with random ones of the window when short;
* on the real default pair the PyTorch walk over llama.cpp's answer takes the steps the engine's
  chain 7 takes (the trainer's held-out walk measures what a user gets).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from engine_bridge.training import walk as walk_mod  # noqa: E402
from engine_bridge.training.drafter_model import DFlashDrafter, DrafterConfig  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]


def test_walk_steps_past_the_accepted_drafts_and_the_targets_token():
    x = list(range(100, 130))
    drafts = {a: x[a + 1 : a + 4] for a in range(30)}  # every block right for 3 slots
    drafts[4] = [x[5], 999, x[7]]  # block at 4: one draft, then a miss
    drafts[6] = [999, x[8], x[9]]  # block at 6: a miss at once
    assert walk_mod.walk(drafts, x, 0, 12) == [(0, 3), (4, 1), (6, 0), (7, 3), (11, 3)]
    assert walk_mod.matched([1, 2, 3], [1, 2]) == 2  # the answer's end stops a run
    assert walk_mod.walk({0: [5]}, [1, 5], 0, 10) == [(0, 1)]  # no drafts at 2: the walk ends


def _tiny_drafter(seed=0):
    torch.manual_seed(seed)
    c = DrafterConfig(
        n_embd=32, n_layer=1, n_head=2, n_head_kv=1, head_dim=16, n_ff=48, block_size=8, target_layers=[1, 2]
    )
    return DFlashDrafter(c).eval(), c


def test_span_drafts_equal_one_block_at_a_time():
    dr, c = _tiny_drafter()
    V = 50
    emb = torch.randn(V, c.n_embd)
    B, L = 2, 24
    feats = torch.randn(B, L, 2 * c.n_embd)
    x = torch.randint(0, V, (B, L + c.block_size))
    spans = [(3, 17), (5, 9)]
    got = walk_mod.span_drafts(dr, feats, x, spans, c.block_size, 4, 1, emb, None, chunk=5)
    assert [sorted(g) for g in got] == [list(range(3, 17)), list(range(5, 9))]
    for b, (lo, hi) in enumerate(spans):
        for a in range(lo, hi):
            blk = torch.full((1, 1, c.block_size), 1, dtype=torch.long)
            blk[0, 0, 0] = x[b, a]
            with torch.no_grad():
                one = dr(feats[b : b + 1], torch.tensor([[a]]), blk, emb)[0, 0, 1:5].argmax(-1).tolist()
            assert got[b][a] == one, (b, a)


def test_walk_anchors_follow_the_walk_and_fill_a_short_one():
    dr, c = _tiny_drafter(1)
    V = 40
    emb = torch.randn(V, c.n_embd)
    B, L = 3, 60
    feats = torch.randn(B, L, 2 * c.n_embd)
    x = torch.randint(0, V, (B, L + c.block_size))
    lens = [60, 60, 10]
    lo = [5, 30, 4]
    g = torch.Generator().manual_seed(0)
    K = 6
    anc = walk_mod.walk_anchors(dr, feats, x, lens, lo, K, c.block_size, 7, 1, emb, None, g)
    assert anc.shape == (B, K)
    short = []
    for b in range(B):
        a = anc[b].tolist()
        assert all(lo[b] <= v <= lens[b] - 2 for v in a)
        drafts = walk_mod.span_drafts(dr, feats, x, [(a[0], lens[b] - 1)], c.block_size, 7, 1, emb, None)[0]
        steps = walk_mod.walk(drafts, x[b, : lens[b]].tolist(), a[0], lens[b] - 1)
        n = min(K, len(steps))
        assert a[:n] == [s for s, _ in steps[:n]]  # the walk's anchors, in its order
        short.append(len(steps) < K)
    # the third sequence (anchors 4..8) has room for at most 5 blocks: the rest are random ones of it
    assert short == [False, False, True]


def test_the_torch_walk_takes_the_engines_chain_steps_on_the_default_pair(monkeypatch):
    from engine_bridge.models import registry_models
    from engine_bridge.models.demo import smollm2_drafter
    from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
    from engine_bridge.runtime.config import EngineConfig, GenerationSettings
    from engine_bridge.runtime.engine import Engine
    from engine_bridge.training.drafter_gguf import drafter_from_gguf
    from engine_bridge.training.gguf_target import load_gguf_target

    target, draft = registry_models.cached(), smollm2_drafter()
    if target is None or draft is None:
        pytest.skip("the default pair is not in the models cache: run `dflash-studio fetch-default`")
    monkeypatch.setenv("DFLASH_DRAFT_FULL_BLOCK", "1")  # whole blocks, as the trainer scores them
    item = next(
        json.loads(line)
        for line in (ROOT / "resources" / "models" / "smollm2" / "prompts.jsonl").read_text().splitlines()
        if json.loads(line)["category"] == "code"
    )
    eng = Engine.load(
        EngineConfig(target=target, draft=draft, n_ctx=1024, n_gpu_layers=0, draft_n_gpu_layers=0, n_threads=2),
        preflight=PAIR_PREFLIGHT,
    )
    try:
        text = eng.format_chat(item["messages"][:1])
        prompt = eng.tokenize(text)
        eng.reset()
        ar = list(eng.generate(text, GenerationSettings(mode="ar", max_tokens=40)).tokens)
        eng.reset()
        chain = eng.generate(text, GenerationSettings(mode="chain", budget=7, max_tokens=40))
    finally:
        eng.close()
    engine_steps = [s.accepted for s in chain.steps if not s.prefill]
    tgt = load_gguf_target(target)
    dr = drafter_from_gguf(draft, tgt)
    cfg = dr.c
    x = torch.tensor([prompt + ar])
    with torch.no_grad():
        _, feats = tgt(x, layer_inputs=cfg.target_layers)
    acc, steps = walk_mod.walk_accepted(
        dr,
        torch.cat(feats, -1),
        x,
        [len(prompt)],
        [x.shape[1]],
        cfg.block_size,
        7,
        cfg.mask_token_id,
        tgt.embed_tokens.weight,
        tgt.lm_head_weight,
        40,
    )
    drafts = walk_mod.span_drafts(
        dr,
        torch.cat(feats, -1),
        x,
        [(len(prompt), x.shape[1] - 1)],
        cfg.block_size,
        7,
        cfg.mask_token_id,
        tgt.embed_tokens.weight,
        tgt.lm_head_weight,
    )[0]
    walked = [k for _, k in walk_mod.walk(drafts, x[0].tolist(), len(prompt), x.shape[1] - 1)]
    assert list(chain.tokens) == ar
    assert sum(engine_steps) > 5  # the shipped drafter accepts drafts on code
    # the walk opens its first block at the answer's first token, as the engine does: the same first
    # steps (later ones may part at a near-tie of the quantised target's features against torch's f32)
    assert walked[:4] == engine_steps[:4]
    assert (acc, steps) == (sum(walked), len(walked))
    assert abs(acc / steps - sum(engine_steps) / len(engine_steps)) < 0.35


def test_a_childs_log_line_carries_the_walk_to_the_progress_bar():
    from engine_bridge.training.launch import progress_from_line

    line = (
        "[06:56:06] train: step     93  loss 3.286  val 2.663  val accepted/block(16) 2.67  walk 1.609  first block 0.66"
        "  slot1 0.78  3.8 step/s  0:24 elapsed, ETA 7:35"
    )
    ev = progress_from_line(line)
    assert ev is not None and (ev["step"], ev["val_accepted"], ev["val_walk"], ev["eta_s"]) == (93, 2.67, 1.609, 455.0)
    old = line.replace("  walk 1.609", "")  # a log of before 2026-11-30
    ev = progress_from_line(old)
    assert ev is not None and ev["val_walk"] is None and ev["val_accepted"] == 2.67
