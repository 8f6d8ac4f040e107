"""Pairing checks on a corpus of broken and mismatched files generated here (engine_bridge.models.compat).

Each corpus entry is a real file (or folder) made from one good pair, and must produce its named
FAIL without an exception escaping. The good pair must pass every check.
"""

from __future__ import annotations

import dataclasses

import pytest

import modelfiles as mf
from engine_bridge.models import compat, synth
from engine_bridge.models.compat import FAIL, PASS, WARN
from engine_bridge.runtime.config import KVTypes
from engine_bridge.common.errors import UnreadableModelError
from engine_bridge.models.modelinfo import inspect_model

CPU = {"backend": "cpu"}


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    d = tmp_path_factory.mktemp("compat")
    with mf.fast_vocab():
        tspec = synth.TargetSpec(head_dim=32, n_head=2, n_head_kv=1)  # head_dim 32: quantised KV fits
        target, drafter = synth.write_pair(d, tspec, synth.DrafterSpec(), stem="good")
        swa = synth.write_drafter(d / "swa.gguf", tspec, synth.DrafterSpec(n_layer=2, sliding_window=128))
        extra = dict(
            hidden_off=synth.write_drafter(d / "hidden65.gguf", tspec, synth.DrafterSpec(n_embd=65)),
            layer_oob=synth.write_drafter(d / "layer_oob.gguf", tspec, synth.DrafterSpec(target_layers=(1, 4))),
            layer_eq=synth.write_drafter(d / "layer_eq.gguf", tspec, synth.DrafterSpec(target_layers=(1, 3, 4))),
            no_mask=synth.write_drafter(d / "nomask.gguf", tspec, synth.DrafterSpec(with_mask_token=False)),
            block1=synth.write_drafter(d / "block1.gguf", tspec, synth.DrafterSpec(block_size=1)),
            phi3_target=synth.write_target(
                d / "phi3-target.gguf", synth.TargetSpec(vocab="phi3", head_dim=32, n_head=2, n_head_kv=1)
            ),
            base_target=synth.write_target(d / "base-target.gguf", tspec, chat_template=None),
            dspark=synth.write_drafter(d / "dspark.gguf", tspec, synth.DrafterSpec(dspark=True)),
            hf=mf.write_hf_drafter(d / "hf", tspec, synth.DrafterSpec(), rope="nested"),
            hf_no_rope=mf.write_hf_drafter(d / "hf-norope", tspec, synth.DrafterSpec(), rope="missing"),
            hf_swa_off=mf.write_hf_drafter(
                d / "hf-swaoff",
                tspec,
                synth.DrafterSpec(n_layer=2),
                layer_types=["sliding_attention", "full_attention"],
                use_sliding_window=False,
                sliding_window=64,
            ),
        )
    return dict(dir=d, target=target, drafter=drafter, swa=swa, tspec=tspec, **extra)


def test_good_pair_passes_everything(base):
    report = compat.check(base["target"], base["drafter"], build=CPU, budget=8)
    assert report.ok and not report.warnings, [c.line() for c in report.checks]
    names = [c.name for c in report.checks]
    for expected in (
        "drafter_role",
        "target_arch_feeds_drafter",
        "hidden_size",
        "captured_layers",
        "target_layer_ids",
        "tokenizer",
        "mask_token",
        "block_size",
        "rope_theta",
        "sliding_window",
        "gguf_complete_target",
        "gguf_complete_drafter",
        "chat_template",
        "kv_types_target",
        "kv_types_drafter",
    ):
        assert expected in names
    assert report.summary() == ""
    assert report.to_dict()["ok"] is True


def test_target_alone(base):
    report = compat.check(base["target"], build=CPU)
    assert report.ok
    assert {c.name for c in report.checks} >= {
        "target_role",
        "gguf_complete_target",
        "target_arch_known",
        "kv_types_target",
    }


def test_accepts_modelinfo_and_tuple_adapters(base, tmp_path):
    lora = mf.write_lora(tmp_path / "ok-lora.gguf", base["drafter"])
    report = compat.check(
        inspect_model(base["target"]), inspect_model(base["drafter"]), adapters=[(lora, 0.5)], build=CPU
    )
    assert report.ok and report.get("lora_adapter").status == PASS


# --- the broken corpus: (case, builder(base, tmp) -> kwargs for check, expected FAIL) -------------------------


def _drafter(path):
    return lambda b, t: dict(target=b["target"], drafter=path(b, t) if callable(path) else b[path])


CORPUS = {
    "truncated_drafter": (
        _drafter(lambda b, t: mf.truncate_copy(b["drafter"], t / "cut.gguf", 2048)),
        "gguf_complete_drafter",
    ),
    "truncated_target": (
        lambda b, t: dict(target=mf.truncate_copy(b["target"], t / "cut.gguf", 10), drafter=b["drafter"]),
        "gguf_complete_target",
    ),
    "drafter_header_cut": (
        _drafter(lambda b, t: mf.truncate_copy(b["drafter"], t / "h.gguf", b["drafter"].stat().st_size - 300)),
        "drafter_readable",
    ),
    "target_not_gguf": (lambda b, t: dict(target=_text(t / "t.gguf"), drafter=b["drafter"]), "target_readable"),
    "drafter_missing": (_drafter(lambda b, t: t / "missing.gguf"), "drafter_readable"),
    "wrong_drafter_arch": (
        _drafter(lambda b, t: mf.rewrite_gguf(b["drafter"], t / "a.gguf", arch="qwen3")),
        "drafter_role",
    ),
    "target_as_drafter": (_drafter("target"), "drafter_role"),
    "drafter_as_target": (lambda b, t: dict(target=b["drafter"], drafter=b["drafter"]), "target_role"),
    "hf_folder_as_drafter": (_drafter("hf"), "drafter_role"),
    "hidden_size_off_by_one": (_drafter("hidden_off"), "hidden_size"),
    "layer_id_out_of_range": (_drafter("layer_oob"), "target_layer_ids"),
    "layer_id_equal_to_layer_count": (_drafter("layer_eq"), "target_layer_ids"),
    "no_target_layers": (
        _drafter(lambda b, t: mf.rewrite_gguf(b["drafter"], t / "nl.gguf", drop_kv=["dflash.target_layers"])),
        "target_layer_ids",
    ),
    "captured_layers_mismatch": (
        _drafter(
            lambda b, t: mf.rewrite_gguf(b["drafter"], t / "c.gguf", set_arrays={"dflash.target_layers": [1, 2, 3]})
        ),
        "captured_layers",
    ),
    "no_fc_tensor": (
        _drafter(lambda b, t: mf.rewrite_gguf(b["drafter"], t / "nofc.gguf", drop_tensors=["fc.weight"])),
        "captured_layers",
    ),
    "no_mask_token": (_drafter("no_mask"), "mask_token"),
    "mask_outside_vocab": (
        _drafter(
            lambda b, t: mf.rewrite_gguf(b["drafter"], t / "m.gguf", set_kv={"tokenizer.ggml.mask_token_id": 60000})
        ),
        "mask_token",
    ),
    "unsupported_target_gemma3": (
        lambda b, t: dict(target=mf.rewrite_gguf(b["target"], t / "g3.gguf", arch="gemma3"), drafter=b["drafter"]),
        "target_arch_feeds_drafter",
    ),
    "unsupported_target_qwen2": (
        lambda b, t: dict(target=mf.rewrite_gguf(b["target"], t / "q2.gguf", arch="qwen2"), drafter=b["drafter"]),
        "target_arch_feeds_drafter",
    ),
    "unsupported_target_gemma2": (
        lambda b, t: dict(target=mf.rewrite_gguf(b["target"], t / "g2.gguf", arch="gemma2"), drafter=b["drafter"]),
        "target_arch_feeds_drafter",
    ),
    "unknown_target_arch": (
        lambda b, t: dict(target=mf.rewrite_gguf(b["target"], t / "x.gguf", arch="nosuchmodel"), drafter=b["drafter"]),
        "target_arch_known",
    ),
    "different_vocabulary": (lambda b, t: dict(target=b["phi3_target"], drafter=b["drafter"]), "tokenizer"),
    "same_size_different_tokens": (_drafter(lambda b, t: _edit_token(b["drafter"], t / "tok.gguf")), "tokenizer"),
    "rope_theta_missing": (
        _drafter(lambda b, t: mf.rewrite_gguf(b["drafter"], t / "r.gguf", drop_kv=["dflash.rope.freq_base"])),
        "rope_theta",
    ),
    "hf_nested_rope_missing": (_drafter("hf_no_rope"), "rope_theta"),
    "sliding_window_without_pattern": (
        _drafter(
            lambda b, t: mf.rewrite_gguf(b["swa"], t / "s.gguf", drop_kv=["dflash.attention.sliding_window_pattern"])
        ),
        "sliding_window",
    ),
    "sliding_pattern_wrong_length": (
        _drafter(
            lambda b, t: mf.rewrite_gguf(
                b["swa"], t / "s2.gguf", set_arrays={"dflash.attention.sliding_window_pattern": [True, False, True]}
            )
        ),
        "sliding_window",
    ),
    "metadata_disagrees_with_shapes": (
        _drafter(lambda b, t: mf.rewrite_gguf(b["drafter"], t / "d.gguf", set_kv={"dflash.attention.head_count": 8})),
        "drafter_dimensions",
    ),
    "block_size_one": (_drafter("block1"), "block_size"),
    "dspark_markov_vocab_mismatch": (lambda b, t: dict(target=b["phi3_target"], drafter=b["dspark"]), "dspark_heads"),
    "lora_for_another_arch": (
        lambda b, t: dict(
            target=b["target"], drafter=b["drafter"], adapters=[mf.write_lora(t / "l.gguf", b["drafter"], arch="qwen3")]
        ),
        "lora_adapter",
    ),
    "lora_wrong_shape": (
        lambda b, t: dict(
            target=b["target"],
            drafter=b["drafter"],
            adapters=[mf.write_lora(t / "l.gguf", b["drafter"], wrong_shape=True)],
        ),
        "lora_adapter",
    ),
    "lora_tensor_not_in_drafter": (
        lambda b, t: dict(
            target=b["target"],
            drafter=b["drafter"],
            adapters=[mf.write_lora(t / "l.gguf", b["drafter"], tensors=("blk.7.attn_q.weight",))],
        ),
        "lora_adapter",
    ),
    "lora_without_alpha": (
        lambda b, t: dict(
            target=b["target"], drafter=b["drafter"], adapters=[mf.write_lora(t / "l.gguf", b["drafter"], alpha=None)]
        ),
        "lora_adapter",
    ),
    "model_given_as_lora": (
        lambda b, t: dict(target=b["target"], drafter=b["drafter"], adapters=[b["drafter"]]),
        "lora_adapter",
    ),
    "quantised_v_flash_attn_off": (
        lambda b, t: dict(target=b["target"], drafter=b["drafter"], kv=KVTypes("f16", "q8_0"), flash_attn="off"),
        "kv_types_target",
    ),
    "quantised_k_block_does_not_divide_head_dim": (
        lambda b, t: dict(
            target=b["target"],
            drafter=synth.write_drafter(t / "hd16.gguf", b["tspec"], synth.DrafterSpec(head_dim=16)),
            draft_kv=KVTypes("q4_0", "q4_0"),
            flash_attn="on",
        ),
        "kv_types_drafter",
    ),
    "mla_k_v_types_differ": (
        lambda b, t: dict(
            target=mf.rewrite_gguf(b["target"], t / "ds4.gguf", arch="deepseek4"), kv=KVTypes("q8_0", "f16")
        ),
        "kv_types_target",
    ),
}


def _text(path):
    path.write_text("this is a README, not a model\n" * 20)
    return path


def _edit_token(src, dst):
    from engine_bridge.models.gguf_header import read_header

    tokens = read_header(src).value("tokenizer.ggml.tokens")
    tokens[100] = tokens[100] + "x"
    return mf.rewrite_gguf(src, dst, set_arrays={"tokenizer.ggml.tokens": tokens})


def test_corpus_is_large_enough():
    assert len(CORPUS) >= 20


@pytest.mark.parametrize("case", sorted(CORPUS))
def test_broken_corpus(base, tmp_path, case):
    build, expected = CORPUS[case]
    with mf.fast_vocab():
        kwargs = build(base, tmp_path)
    report = compat.check(build=CPU, **kwargs)
    failed = {c.name for c in report.failures}
    assert expected in failed, f"{case}: " + "\n".join(c.line() for c in report.checks)
    assert not report.ok
    named = (
        report.get(expected) if expected != "lora_adapter" else next(c for c in report.failures if c.name == expected)
    )
    assert named.reason and "\n" not in named.reason
    assert expected in report.summary()
    # Every file of the corpus is also inspectable or refused with the typed error, nothing else.
    for value in kwargs.values():
        for p in value if isinstance(value, list) else [value]:
            if not isinstance(p, KVTypes) and not isinstance(p, str):
                try:
                    inspect_model(p)
                except UnreadableModelError:
                    pass


def test_warnings(base, tmp_path):
    r = compat.check(base["base_target"], base["drafter"], build=CPU)
    assert r.get("chat_template").status == WARN and r.ok
    r = compat.check(base["target"], base["drafter"], budget=40, build=CPU)
    assert r.get("block_size").status == WARN and "clamped to 15" in r.get("block_size").reason
    r = compat.check(base["target"], base["hf_swa_off"], build=CPU)
    assert r.get("sliding_window").status == WARN
    other_theta = mf.rewrite_gguf(base["drafter"], tmp_path / "theta.gguf", set_kv={"dflash.rope.freq_base": 1e6})
    assert compat.check(base["target"], other_theta, build=CPU).get("rope_theta").status == WARN


def test_sliding_window_drafter_passes(base):
    r = compat.check(base["target"], base["swa"], build=CPU)
    assert r.ok and r.get("sliding_window").status == PASS and "1/2 layers slide" in r.get("sliding_window").reason


def test_final_layer_input_architectures_allow_id_n_layer(base, tmp_path):
    nem = mf.rewrite_gguf(base["target"], tmp_path / "nemotron.gguf", arch="nemotron_h")
    r = compat.check(nem, base["layer_eq"], build=CPU)
    assert r.get("target_layer_ids").status == PASS


@pytest.mark.parametrize("fa,status", [("auto", PASS), ("on", PASS), ("off", FAIL)])
def test_quantised_v_and_flash_attention(base, fa, status):
    c = compat.check(base["target"], kv=KVTypes("q8_0", "q8_0"), flash_attn=fa, build=CPU).get("kv_types_target")
    assert c.status == status
    if fa == "auto":
        assert "switches it on" in c.reason


def test_quantised_k_without_flash_attention_is_fine(base, tmp_path):
    hd16 = synth.write_target(tmp_path / "hd16.gguf", base["tspec"], head_dim=16)
    assert compat.check(hd16, kv=KVTypes("q8_0", "f16"), flash_attn="off", build=CPU).ok
    assert not compat.check(hd16, kv=KVTypes("q8_0", "f16"), flash_attn="auto", build=CPU).ok


@pytest.mark.parametrize(
    "cmake,pair,status",
    [
        ("", ("q8_0", "q8_0"), PASS),
        ("", ("q8_0", "q4_0"), WARN),
        ("-DGGML_CUDA=on -DGGML_CUDA_FA_ALL_QUANTS=ON", ("q8_0", "q4_0"), PASS),
        ("-DGGML_CUDA_FA_QUANTS=q8_0-q4_0", ("q8_0", "q4_0"), PASS),
        ("", ("iq4_nl", "iq4_nl"), WARN),
    ],
)
def test_cuda_fast_kernel_pairs(base, cmake, pair, status):
    build = {"backend": "cuda", "cmake_args": cmake}
    assert compat.check(base["target"], kv=KVTypes(*pair), build=build).get("kv_types_target").status == status


def test_default_build_works_without_arguments(base):
    # build=None asks llama_ffi (or falls back to CPU when llama_cpp is absent).
    assert compat.check(base["target"], base["drafter"]).ok


def test_bad_flash_attn_value(base):
    with pytest.raises(ValueError):
        compat.check(base["target"], flash_attn="maybe")


PATCHED = {"backend": "cpu", "patches": [{"name": "0001-cuda-graph-stats.patch"}, {"name": "0003-gemma3-dflash.patch"}]}


@pytest.fixture(scope="module")
def gemma(tmp_path_factory):
    """A gemma3-architecture target (header facts are all the checks read) and drafters for it."""
    d = tmp_path_factory.mktemp("gemma")
    with mf.fast_vocab():
        tspec = synth.TargetSpec(
            arch="gemma3",
            head_dim=32,
            n_head=2,
            n_head_kv=1,
            n_layer=6,
            extra_kv={"gemma3.attention.sliding_window": 512},
        )
        target = synth.write_target(d / "gemma3.gguf", tspec)
        capped = synth.write_target(
            d / "gemma3-capped.gguf", tspec, extra_kv={**tspec.extra_kv, "gemma3.final_logit_softcapping": 30.0}
        )
        plain = synth.write_drafter(d / "plain.gguf", tspec, synth.DrafterSpec())
        scaled = synth.write_drafter(
            d / "scaled.gguf", tspec, synth.DrafterSpec(extra_kv={"dflash.embedding_scale": 8.0})
        )
        wrong = synth.write_drafter(
            d / "wrong.gguf", tspec, synth.DrafterSpec(extra_kv={"dflash.embedding_scale": 1.0})
        )
    # header facts a synthetic file does not carry, set on the inspected drafter (compat takes ModelInfo)
    info = inspect_model(plain)
    dflash2 = dataclasses.replace(info, dflash2=True)
    dflash2_cap20 = dataclasses.replace(info, dflash2=True, final_logit_softcapping=20.0)
    own_tables = dataclasses.replace(info, tensor_names=info.tensor_names + ("token_embd.weight", "output.weight"))
    return dict(
        target=target,
        capped=capped,
        plain=plain,
        scaled=scaled,
        wrong=wrong,
        dflash2=dflash2,
        dflash2_cap20=dflash2_cap20,
        own_tables=own_tables,
    )


def test_a_gemma3_target_needs_the_engine_patch(gemma):
    # an engine built without packaging/patches/0003: refused, the reason names the patch and the fix
    r = compat.check(gemma["target"], gemma["plain"], build=CPU)
    feeds = r.get("target_arch_feeds_drafter")
    assert feeds.status == FAIL and "0003-gemma3-dflash.patch" in feeds.reason and "make engine" in feeds.fix
    assert r.get("gemma_embedding_scale").status == FAIL and "25" not in r.get("gemma_embedding_scale").reason
    # the patched engine: every check passes, the Gemma checks are named and say who scales
    r = compat.check(gemma["target"], gemma["plain"], build=PATCHED)
    assert r.ok, r.summary()
    scale = r.get("gemma_embedding_scale")
    assert scale.status == PASS and "sqrt(64) = 8.000" in scale.reason and "once" in scale.reason
    assert (
        r.get("gemma_logit_softcap").status == PASS and "no final logit softcap" in r.get("gemma_logit_softcap").reason
    )


def test_a_qwen2_target_needs_the_engine_patch(base, tmp_path):
    # qwen2 records layer inputs only with packaging/patches/0004: without it refused, naming the patch
    q2 = mf.rewrite_gguf(base["target"], tmp_path / "qwen2.gguf", arch="qwen2")
    feeds = compat.check(q2, base["drafter"], build=PATCHED).get("target_arch_feeds_drafter")
    assert feeds.status == FAIL and "0004-qwen2-dflash.patch" in feeds.reason and "make engine" in feeds.fix
    with_0004 = {**PATCHED, "patches": PATCHED["patches"] + [{"name": "0004-qwen2-dflash.patch"}]}
    r = compat.check(q2, base["drafter"], build=with_0004)
    assert r.ok, r.summary()
    assert "0004-qwen2-dflash.patch" in r.get("target_arch_feeds_drafter").reason
    # the patch list is per architecture: 0004 does not make gemma2 (no patch) or gemma3 (0003) feed a drafter
    for arch, patch in (("gemma2", None), ("gemma3", "0003-gemma3-dflash.patch")):
        other = mf.rewrite_gguf(base["target"], tmp_path / f"{arch}.gguf", arch=arch)
        c = compat.check(
            other, base["drafter"], build={"backend": "cpu", "patches": [{"name": "0004-qwen2-dflash.patch"}]}
        ).get("target_arch_feeds_drafter")
        assert c.status == FAIL and (patch is None or patch in c.reason), c.line()


def test_a_drafter_that_states_the_scale_is_not_scaled_twice(gemma):
    r = compat.check(gemma["target"], gemma["scaled"], build=PATCHED)
    assert r.ok and "dflash.embedding_scale" in r.get("gemma_embedding_scale").reason
    wrong = compat.check(gemma["target"], gemma["wrong"], build=PATCHED).get("gemma_embedding_scale")
    assert wrong.status == WARN and "by 1," in wrong.reason and "wins" in wrong.reason


def test_the_final_logit_softcap_follows_the_target(gemma):
    # a DFlash drafter's logits are read uncapped by llama.cpp: said, not failed (greedy is the same)
    r = compat.check(gemma["capped"], gemma["plain"], build=PATCHED).get("gemma_logit_softcap")
    assert r.status == PASS and "30" in r.reason and "uncapped" in r.reason
    # a DFlash2 drafter's selector scores are capped: by the target's cap (0003) or its own key
    r = compat.check(gemma["capped"], gemma["dflash2"], build=PATCHED).get("gemma_logit_softcap")
    assert r.status == PASS and "engine applies" in r.reason
    r = compat.check(gemma["capped"], gemma["dflash2_cap20"], build=PATCHED).get("gemma_logit_softcap")
    assert r.status == WARN and "20" in r.reason and "30" in r.reason


def test_a_drafter_with_its_own_tables_gets_no_scale_from_the_target(gemma):
    r = compat.check(gemma["target"], gemma["own_tables"], build=PATCHED).get("gemma_embedding_scale")
    assert r.status == FAIL and "own token_embd" in r.reason and "input_embedding_scale" in r.fix
    assert inspect_model(gemma["capped"]).final_logit_softcapping == 30.0


def test_other_targets_get_no_gemma_checks(base):
    r = compat.check(base["target"], base["drafter"], build=PATCHED)
    assert r.get("gemma_embedding_scale") is None and r.get("gemma_logit_softcap") is None
