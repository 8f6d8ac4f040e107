"""Drafter training over several GPUs (engine_bridge/training: multi_gpu, shards, the ``shard`` of
gen_conversations), on the CPU: real GGUF files, real processes, gloo in place of NCCL.

* shares of the prompts written by several processes are disjoint, cover what one process would
  have answered, and join into one pool that training reads; a bad join names what is wrong and
  writes nothing;
* ``gpus=2`` (``train-drafter --gpus 2``): two generating processes, one pool, then two ranks under
  torchrun train one drafter: the same steps, the gradient averaged (their weights stay equal, which
  rank-distinct batches would break without it), rank 0 alone writes the run; the flags handed to the
  children give the same settings back.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from engine_bridge.models import synth

torch = pytest.importorskip("torch")

from engine_bridge.training import chat_data, gen_conversations, shards, train_chat  # noqa: E402
from engine_bridge.training.multi_gpu import shard_of  # noqa: E402


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("mg")
    target = synth.write_target(
        root / "tiny-llama.gguf", synth.TargetSpec(arch="llama", vocab="gpt2", n_ctx=1024, seed=7)
    )
    data = root / "data"
    chat_data.prepare(target, data, n_per_category=2, variants=1, log=lambda s: None)
    from engine_bridge.training.gguf_target import load_gguf_target

    return target, data, load_gguf_target(target), root


def _generate(tiny, out: Path, shard=(0, 1)):
    target, data, model, _ = tiny
    return gen_conversations.generate(
        model,
        target,
        data,
        out,
        seconds=600,
        max_new=8,
        batch=8,
        max_prompts=8,
        log=lambda s: None,
        progress=None,
        cancel=None,
        magpie_n=4,
        query_min_tokens=1,
        shard=shard,
    )


@pytest.fixture(scope="module")
def pool(tiny):
    root = tiny[3]
    for k in range(2):
        _generate(tiny, root / f"shard-{k}", (k, 2))
    merged = shards.merge_pools(root / "run", [root / "shard-0", root / "shard-1"])
    return root, merged


def _firsts(run: Path) -> list[int]:
    z = np.load(run / "gen" / "responses.npz")
    keep = (z["kind"] != gen_conversations.KIND_VAL) & (z["kind"] != gen_conversations.KIND_FOLLOWUP)
    return z["prompt_index"][keep].tolist()


def test_shares_are_disjoint_and_join_into_one_pool(tiny, pool):
    root, merged = pool
    one = root / "single"
    _generate(tiny, one)
    a, b = _firsts(root / "shard-0"), _firsts(root / "shard-1")
    real_a, real_b = {p for p in a if p >= 0}, {p for p in b if p >= 0}
    assert real_a and real_b and not real_a & real_b
    assert real_a | real_b == {p for p in _firsts(one) if p >= 0}
    magpie_a, magpie_b = {p for p in a if p < 0}, {p for p in b if p < 0}
    assert not magpie_a & magpie_b  # the target's own requests are numbered apart
    kinds = [np.load(root / f"shard-{k}" / "gen" / "responses.npz")["kind"] for k in range(2)]
    has_val = (tiny[1] / "val.npz").exists()
    assert (kinds[0] == gen_conversations.KIND_VAL).any() == has_val
    assert not (kinds[1] == gen_conversations.KIND_VAL).any()  # validation answers come once
    seqs, plen, pidx, kd = gen_conversations.load_sequences(root / "run")
    parts = [gen_conversations.load_sequences(root / f"shard-{k}") for k in range(2)]
    assert len(seqs) == sum(len(p[0]) for p in parts) == merged["n"]
    joined = parts[0][0] + parts[1][0]
    assert all(np.array_equal(x, y) for x, y in zip(seqs, joined))
    assert plen.tolist() == parts[0][1].tolist() + parts[1][1].tolist()
    assert merged["shards"] == 2 and merged["tokens"] == sum(
        json.loads((root / f"shard-{k}" / "gen" / "gen-stats.json").read_text())["tokens"] for k in range(2)
    )


def test_a_bad_join_names_the_problem_and_writes_nothing(pool, tmp_path):
    root, _ = pool
    with pytest.raises(ValueError, match="exists already"):
        shards.merge_pools(root / "run", [root / "shard-0", root / "shard-1"])
    with pytest.raises(ValueError, match="one split"):
        shards.merge_pools(tmp_path / "a", [root / "shard-0"])
    with pytest.raises(ValueError, match="no generated pool"):
        shards.merge_pools(tmp_path / "b", [root / "shard-0", tmp_path / "nothing"])
    assert not (tmp_path / "a" / "gen").exists() and not (tmp_path / "b" / "gen").exists()
    assert shards.main(["--out", str(tmp_path / "c"), str(root / "shard-1")]) == 2


def test_an_earlier_pool_joins_after_the_shares_without_its_validation_answers(tiny, pool, tmp_path):
    """``--earlier RUN``: an earlier sitting's pool of the same data follows the shares; its
    validation answers stay out (shard 0 brings this pool's), its own requests keep apart."""
    root, _ = pool
    old = tmp_path / "old"
    _generate(tiny, old)
    zo = np.load(old / "gen" / "responses.npz")
    val = gen_conversations.KIND_VAL
    has_val = (tiny[1] / "val.npz").exists()
    assert has_val and (zo["kind"] == val).any()  # the test needs validation answers to leave out
    out = tmp_path / "run"
    assert shards.main(["--out", str(out), str(root / "shard-0"), str(root / "shard-1"), "--earlier", str(old)]) == 0
    merged = json.loads((out / "gen" / "gen-stats.json").read_text())
    seqs, _, pidx, kinds = gen_conversations.load_sequences(out)
    parts = [gen_conversations.load_sequences(root / f"shard-{k}") for k in range(2)]
    oseqs, _, opidx, okinds = gen_conversations.load_sequences(old)
    n_new = sum(len(p[0]) for p in parts)
    keep = [i for i, k in enumerate(okinds) if k != val]
    assert len(seqs) == n_new + len(keep) == merged["n"] and merged["earlier"][0]["n"] == len(keep)
    assert all(np.array_equal(seqs[n_new + j], oseqs[i]) for j, i in enumerate(keep))
    assert (np.asarray(kinds) == val).sum() == (np.asarray(parts[0][3]) == val).sum()
    tail = np.asarray(pidx[n_new:])
    assert tail[tail >= 0].tolist() == [opidx[i] for i in keep if opidx[i] >= 0]
    neg_new = {p for p in pidx[:n_new] if p < 0}
    assert not neg_new & {p for p in tail if p < 0}  # the target's own requests stay apart
    z = np.load(out / "gen" / "responses.npz")
    assert merged["tokens"] == int(z["resp_offsets"][-1])  # response tokens, the earlier ones counted
    with pytest.raises(ValueError, match="no generated pool"):
        shards.merge_pools(tmp_path / "x", [root / "shard-0", root / "shard-1"], [tmp_path / "nothing"])
    other = json.loads((old / "gen" / "gen-stats.json").read_text())
    other["of"] += 1
    (old / "gen" / "gen-stats.json").write_text(json.dumps(other))
    with pytest.raises(ValueError, match="other prepared data"):
        shards.merge_pools(tmp_path / "y", [root / "shard-0", root / "shard-1"], [old])
    assert not (tmp_path / "x" / "gen").exists() and not (tmp_path / "y" / "gen").exists()


def test_a_sitting_joins_its_pool_with_an_earlier_one_and_trains_on_both(tiny, tmp_path):
    """``train-drafter --earlier-pool OLD`` on one process: this sitting's pool is generated beside
    the run and joined with the earlier one before training."""
    target, data, _, _ = tiny
    old = tmp_path / "old"
    _generate(tiny, old)
    run = tmp_path / "run"
    ap = __import__("argparse").ArgumentParser()
    train_chat.add_arguments(ap)
    a = ap.parse_args(["--earlier-pool", str(old), "--device", "cpu"])
    kw = {k: v for k, v in train_chat.kwargs_from(a).items() if k in ("earlier_pools", "device")}
    assert kw["earlier_pools"] == [str(old)]
    lines: list[str] = []
    s = train_chat.run(
        target, data, run, max_prompts=8, gen_batch=8, max_new=8, n_layer=1, batch=2, anchors=4, max_steps=2,
        ckpt_every=0.0, val_seqs=8, log=lines.append, seed=5, **kw,
    )  # fmt: skip
    g = json.loads((run / "gen" / "gen-stats.json").read_text())
    mine = json.loads((run / "shard-0" / "gen" / "gen-stats.json").read_text())
    assert g["earlier"][0]["n"] > 0 and g["n"] == mine["n"] + g["earlier"][0]["n"] == s["generate"]["n"]
    seqs = gen_conversations.load_sequences(run)[0]
    assert len(seqs) == g["n"] and s["train"]["steps"] == 2
    assert any("joined with 1 earlier pool" in ln for ln in lines)


def test_shard_flag_is_checked():
    assert shard_of("1/4") == (1, 4) and shard_of(None) == (0, 1)
    for bad in ("4/4", "x", "1/0", "-1/2"):
        with pytest.raises(ValueError):
            shard_of(bad)


def test_two_gpus_from_one_call_generate_join_and_train(tiny, tmp_path):
    """``train_chat.run(gpus=2)`` (``train-drafter --gpus 2``): a share of the prompts per process,
    one pool, then torchrun on two ranks whose replicas agree; rank 0 alone writes the run."""
    target, data, _, _ = tiny
    run = tmp_path / "run"
    lines: list[str] = []
    events: list[dict] = []
    s = train_chat.run(
        target,
        data,
        run,
        device="cpu",
        gpus=2,
        progress=events.append,
        max_prompts=8,
        gen_batch=8,
        max_new=8,
        n_layer=1,
        batch=2,
        anchors=4,
        max_steps=4,
        ckpt_every=0.0,
        val_seqs=8,
        log=lines.append,
    )
    assert s["generate"]["shards"] == 2 and s["generate"]["n"] > 0
    assert sorted(p.name for p in run.glob("shard-*")) == ["shard-0", "shard-1"]
    t = json.loads((run / "drafter.json").read_text())["train"]
    assert t["world"] == 2 and t["global_batch"] == 4 and t["steps"] == 4
    assert t["replicas_agree"] is True
    assert s["train"]["world"] == 2
    log = (run / "train-log.txt").read_text()
    assert "2 ranks (batch 2 each)" in log
    assert log.count("train: done") == 1  # rank 0 alone writes the run
    assert any(ln.startswith("[gpu 1] ") for ln in lines)  # the children's lines reach the caller
    # ...and the events they stand for (the Train tab's bar and loss plot)
    steps = [e for e in events if e["stage"] == "train"]
    assert steps and steps[-1]["step"] == 4 and all("loss" in e and "eta_s" in e for e in steps)
    assert any(e["stage"] == "generate" and e["total"] > 0 for e in events)


def test_flags_give_the_settings_back():
    """What ``--gpus`` hands its children: train_chat's flags, parsed again, give the same settings."""
    import argparse

    from engine_bridge.training.launch import FLAGS, flags_from

    ap = argparse.ArgumentParser()
    train_chat.add_arguments(ap)
    argv = [
        "--device",
        "cpu",
        "--layers",
        "2",
        "--target-layers",
        "2,5",
        "--temperatures",
        "0,0.7",
        "--every-temperature",
        "--no-resume",
        "--init",
        "x.gguf",
        "--lr",
        "3e-4",
        "--ffn",
        "512",
        "--labels",
        "rollout",
        "--category-weights",
        "code=3,math=1.5",
    ]
    first = {k: v for k, v in train_chat.kwargs_from(ap.parse_args(argv)).items() if k in FLAGS}
    again = {k: v for k, v in train_chat.kwargs_from(ap.parse_args(flags_from(first))).items() if k in FLAGS}
    assert again == first
    assert first["resume"] is False and first["every_temperature"] and first["target_layers"] == [2, 5]
    assert first["labels"] == "rollout"
    assert first["category_weights"] == "code=3,math=1.5"
    defaults = {k: v for k, v in train_chat.kwargs_from(ap.parse_args([])).items() if k in FLAGS}
    assert {
        k: v for k, v in train_chat.kwargs_from(ap.parse_args(flags_from(defaults))).items() if k in FLAGS
    } == defaults


def test_a_group_of_one_changes_nothing(tiny, pool, tmp_path):
    """Without torchrun the trainer runs as before: one rank, its own batch."""
    target, data, _, _ = tiny
    root, _ = pool
    run = tmp_path / "run"
    (run / "gen").mkdir(parents=True)
    for f in ("responses.npz", "gen-stats.json"):
        (run / "gen" / f).write_bytes((root / "run" / "gen" / f).read_bytes())
    s = train_chat.run(
        target,
        data,
        run,
        stages=("train",),
        device="cpu",
        n_layer=1,
        batch=2,
        anchors=4,
        max_steps=2,
        ckpt_every=0.0,
        val_seqs=8,
        log=lambda s: None,
    )
    assert s["train"]["world"] == 1 and s["train"]["global_batch"] == 2 and s["train"]["replicas_agree"]
