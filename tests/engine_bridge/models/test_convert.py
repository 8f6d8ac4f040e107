"""HF DFlash folder -> drafter GGUF, and quantised drafter variants (engine_bridge.models.convert*).

The HF folders hold exactly the weights synth writes into a drafter GGUF, so a conversion must
reproduce synth's file tensor for tensor, and the engine must draft identically with both.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import modelfiles as mf
from engine_bridge.models import synth
from engine_bridge.models.convert import ConversionError, convert_hf_drafter
from engine_bridge.models.convert_quant import quantize_drafter, storage_type, variant_path
from engine_bridge.models.gguf_header import read_header
from engine_bridge.models.modelinfo import inspect_model


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("convert")
    with mf.fast_vocab():
        tspec = synth.TargetSpec()
        target = synth.write_target(d / "target.gguf", tspec)
        dspec = synth.DrafterSpec(rope_theta=1e7)
        direct = {dt: synth.write_drafter(d / f"direct-{dt}.gguf", tspec, dspec, dtype=dt) for dt in ("f32", "f16")}
        hf = {
            dt: mf.write_hf_drafter(d / f"hf-{dt}", tspec, dspec, dtype=dt.upper(), rope="nested")
            for dt in ("f32", "f16", "bf16")
        }
    return dict(dir=d, tspec=tspec, dspec=dspec, target=target, direct=direct, hf=hf)


#: Written by the converter as llama.cpp's converter writes them; synth's direct writer omits them.
CONVERTER_ONLY = {"general.type", "general.quantization_version"}


def assert_same_gguf(a_path, b_path):
    a, b = read_header(a_path), read_header(b_path)
    assert set(a.types) - CONVERTER_ONLY == set(b.types) - CONVERTER_ONLY
    for key in a.types:
        if key == "general.name" or key in CONVERTER_ONLY:
            continue
        va, vb = a.value(key), b.value(key)
        if isinstance(va, np.ndarray):
            assert np.array_equal(va, vb), key
        elif isinstance(va, float):
            assert va == pytest.approx(vb), key
        else:
            assert va == vb, key
        assert a.types[key] == b.types[key], key
    assert list(a.tensors) and set(a.tensors) == set(b.tensors)
    for name, t in a.tensors.items():
        assert (t.ne, t.ggml_type) == (b.tensors[name].ne, b.tensors[name].ggml_type), name
        assert a.tensor_bytes(name) == b.tensor_bytes(name), name


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_conversion_equals_direct_write(pair, tmp_path, dtype):
    res = convert_hf_drafter(pair["hf"][dtype], pair["target"], tmp_path / "conv.gguf", dtype)
    assert_same_gguf(pair["direct"][dtype], res.path)
    assert any("rope_parameters" in n for n in res.notes)


def test_bf16_input(pair, tmp_path):
    res = convert_hf_drafter(pair["hf"]["bf16"], pair["target"], tmp_path / "bf.gguf", "f32")
    conv, direct = read_header(res.path), read_header(pair["direct"]["f32"])
    for name in direct.tensors:
        want = mf.from_bf16_bits(mf.to_bf16_bits(np.frombuffer(direct.tensor_bytes(name), np.float32)))
        got = np.frombuffer(conv.tensor_bytes(name), np.float32)
        assert np.array_equal(got, want), name
    # f16 output from bf16 input: norms stay F32, matrices F16.
    res16 = convert_hf_drafter(pair["hf"]["bf16"], pair["target"], tmp_path / "bf16.gguf", "f16")
    types = {n: t.type_name for n, t in read_header(res16.path).tensors.items()}
    assert types["blk.0.attn_norm.weight"] == "F32" and types["blk.0.attn_q.weight"] == "F16"


def test_tokenizer_and_layers_come_from_the_target(pair, tmp_path):
    res = convert_hf_drafter(pair["hf"]["f32"], pair["target"], tmp_path / "c.gguf", "f32")
    info, tinfo = inspect_model(res.path), inspect_model(pair["target"])
    assert info.tokens_hash == tinfo.tokens_hash and info.chat_template_hash == tinfo.chat_template_hash
    assert info.target_layers == synth.default_target_layers(pair["tspec"].n_layer)  # HF ids + 1
    assert info.rope_theta == pytest.approx(1e7) and info.block_size == 16


@pytest.mark.parametrize("rope", ["top", "nested"])
def test_rope_theta_from_top_level_or_nested(pair, tmp_path, rope):
    with mf.fast_vocab():
        hf = mf.write_hf_drafter(tmp_path / "hf", pair["tspec"], synth.DrafterSpec(rope_theta=5e6), rope=rope)
    res = convert_hf_drafter(hf, pair["target"], tmp_path / "o.gguf")
    assert inspect_model(res.path).rope_theta == pytest.approx(5e6)


def test_sliding_window_layers(pair, tmp_path):
    with mf.fast_vocab():
        hf = mf.write_hf_drafter(
            tmp_path / "hf",
            pair["tspec"],
            synth.DrafterSpec(n_layer=3),
            layer_types=["sliding_attention", "sliding_attention", "full_attention"],
            use_sliding_window=True,
            sliding_window=2048,
        )
        off = mf.write_hf_drafter(
            tmp_path / "hf-off",
            pair["tspec"],
            synth.DrafterSpec(n_layer=3),
            layer_types=["sliding_attention"] * 3,
            use_sliding_window=False,
            sliding_window=2048,
        )
    info = inspect_model(convert_hf_drafter(hf, pair["target"], tmp_path / "swa.gguf").path)
    assert info.sliding_window == 2048 and info.sliding_window_pattern == (True, True, False)
    res = convert_hf_drafter(off, pair["target"], tmp_path / "off.gguf")
    assert inspect_model(res.path).sliding_window is None
    assert any("full attention" in n for n in res.notes)


def test_dspark_conversion(pair, tmp_path):
    with mf.fast_vocab():
        spec = synth.DrafterSpec(dspark=True, rope_theta=1e7)
        direct = synth.write_drafter(tmp_path / "direct.gguf", pair["tspec"], spec)
        hf = mf.write_hf_drafter(tmp_path / "hf", pair["tspec"], spec, rope="top")
    res = convert_hf_drafter(hf, pair["target"], tmp_path / "conv.gguf", "f32")
    assert_same_gguf(direct, res.path)
    assert inspect_model(res.path).role == "dspark"


def test_missing_target_layer_ids_follow_the_reference(pair, tmp_path):
    """z-lab dflash/model.py fills them with build_target_layer_ids(num_target_layers, n_draft_layers);
    without num_target_layers the target's block count stands in."""
    spec = synth.DrafterSpec(n_layer=2, target_layers=(2, 2))  # build_target_layer_ids(4, 2) = [1, 1]
    with mf.fast_vocab():
        hf = mf.write_hf_drafter(
            tmp_path / "hf", pair["tspec"], spec, config_overrides={"dflash_config": {"mask_token_id": 5}}
        )
        bare = mf.write_hf_drafter(
            tmp_path / "bare",
            pair["tspec"],
            spec,
            drop_config=["num_target_layers"],
            config_overrides={"dflash_config": {"mask_token_id": 5}},
        )
    for folder, source in ((hf, "num_target_layers"), (bare, "the target's block count")):
        res = convert_hf_drafter(folder, pair["target"], tmp_path / f"{folder.name}.gguf")
        assert inspect_model(res.path).target_layers == (2, 2)
        assert any("build_target_layer_ids" in n and source in n for n in res.notes)


def test_dspark_lm_head_dropped_and_reduced_vocab_refused(pair, tmp_path):
    spec = synth.DrafterSpec(dspark=True)
    with mf.fast_vocab():
        hf = mf.write_hf_drafter(tmp_path / "hf", pair["tspec"], spec)
    n_vocab = inspect_model(pair["target"]).vocab_size
    st = mf.write_safetensors(
        tmp_path / "lm_head.safetensors",
        {"lm_head.weight": (np.zeros((n_vocab, pair["tspec"].n_embd), np.float32), "F32")},
    )
    st.rename(hf / "model-lm_head.safetensors")
    res = convert_hf_drafter(hf, pair["target"], tmp_path / "d.gguf")
    assert "output.weight" not in read_header(res.path).tensors and any("lm_head dropped" in n for n in res.notes)
    cfg = json.loads((hf / "config.json").read_text())
    (hf / "config.json").write_text(json.dumps({**cfg, "draft_vocab_size": 1000}))
    with pytest.raises(ConversionError, match="reduced-vocabulary"):
        convert_hf_drafter(hf, pair["target"], tmp_path / "r.gguf")
    assert not (tmp_path / "r.gguf").exists()


REFUSALS = {
    "missing_rope_theta": (dict(rope="missing"), "rope_theta"),
    "no_mask_token": (dict(config_overrides={"dflash_config": {"target_layer_ids": [0, 2]}}), "mask_token_id"),
    "mask_outside_vocab": (
        dict(config_overrides={"dflash_config": {"target_layer_ids": [0, 2], "mask_token_id": 99999}}),
        "outside the target vocabulary",
    ),
    "layer_ids_out_of_range": (
        dict(config_overrides={"dflash_config": {"target_layer_ids": [0, 3], "mask_token_id": 5}}),
        "do not fit",
    ),
    "layer_count_vs_fc": (
        dict(config_overrides={"dflash_config": {"target_layer_ids": [0, 1, 2], "mask_token_id": 5}}),
        "fc.weight reads 2 layers",
    ),
    "config_disagrees_with_tensors": (dict(config_overrides={"head_dim": 32}), "head_dim: config.json 32, tensors 16"),
    "not_a_dflash_config": (
        dict(config_overrides={"architectures": ["Qwen3ForCausalLM"]}, drop_config=["dflash_config"]),
        "not a DFlash drafter",
    ),
    "unsupported_activation": (dict(config_overrides={"hidden_act": "relu"}), "hidden_act"),
    # issue 32: values llama.cpp cannot run (a NaN or negative epsilon aborts it at the first decode)
    "rms_norm_eps_nan": (
        dict(config_overrides={"rms_norm_eps": float("nan")}),
        "dflash.attention.layer_norm_rms_epsilon = nan is not finite",
    ),
    "rms_norm_eps_negative": (
        dict(config_overrides={"rms_norm_eps": -1e-6}),
        "dflash.attention.layer_norm_rms_epsilon = -1e-06 must be > 0",
    ),
    "rms_norm_eps_string": (dict(config_overrides={"rms_norm_eps": "1e-6"}), "is not a number"),
    "rope_theta_nan": (dict(config_overrides={"rope_theta": float("nan")}), "dflash.rope.freq_base = nan"),
    "rope_theta_negative": (dict(config_overrides={"rope_theta": -1e4}), "dflash.rope.freq_base = -10000 must be > 0"),
    "softcap_infinite": (
        dict(config_overrides={"final_logit_softcapping": float("inf")}),
        "dflash.final_logit_softcapping = inf",
    ),
    "block_size_zero": (dict(config_overrides={"block_size": 0}), "dflash.block_size = 0"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_refusals_write_nothing(pair, tmp_path, case):
    kwargs, message = REFUSALS[case]
    with mf.fast_vocab():
        hf = mf.write_hf_drafter(tmp_path / "hf", pair["tspec"], synth.DrafterSpec(), **kwargs)
    out = tmp_path / "out.gguf"
    with pytest.raises(ConversionError, match=message.replace("(", r"\(")):
        convert_hf_drafter(hf, pair["target"], out)
    assert list(tmp_path.glob("*.gguf*")) == []


def test_hidden_size_mismatch_with_target(pair, tmp_path):
    with mf.fast_vocab():
        other = synth.write_target(tmp_path / "t96.gguf", pair["tspec"], n_embd=96)
    with pytest.raises(ConversionError, match="hidden size 64 != target hidden size 96"):
        convert_hf_drafter(pair["hf"]["f32"], other, tmp_path / "o.gguf")


def test_truncated_safetensors_and_existing_output(pair, tmp_path):
    import shutil

    hf = tmp_path / "hf"
    shutil.copytree(pair["hf"]["f32"], hf)
    st = hf / "model.safetensors"
    good = st.read_bytes()
    st.write_bytes(good[:-64])
    with pytest.raises(ConversionError, match="truncated"):
        convert_hf_drafter(hf, pair["target"], tmp_path / "o.gguf")
    st.write_bytes(good)
    existing = tmp_path / "keep.gguf"
    existing.write_bytes(b"precious")
    with pytest.raises(ConversionError, match="exists"):
        convert_hf_drafter(hf, pair["target"], existing)
    assert existing.read_bytes() == b"precious"
    convert_hf_drafter(hf, pair["target"], existing, overwrite=True)
    assert inspect_model(existing).role == "dflash"


def test_target_must_be_a_target(pair, tmp_path):
    with pytest.raises(ConversionError, match="is a drafter"):
        convert_hf_drafter(pair["hf"]["f32"], pair["direct"]["f32"], tmp_path / "o.gguf")


# --- quantised variants ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("qtype,matrix_type", [("q8_0", "Q8_0"), ("q4_0", "Q4_0"), ("f16", "F16")])
def test_quantised_variants(pair, tmp_path, qtype, matrix_type):
    src = pair["direct"]["f32"]
    out = quantize_drafter(src, tmp_path / f"d-{qtype}.gguf", qtype)
    info, base = inspect_model(out), inspect_model(src)
    types = {n: t.type_name for n, t in read_header(out).tensors.items()}
    assert types["blk.0.attn_q.weight"] == matrix_type and types["fc.weight"] == matrix_type
    assert all(types[n] == "F32" for n in types if n.endswith("norm.weight"))
    assert info.data_complete and info.size_bytes < base.size_bytes
    assert (info.n_embd, info.head_dim, info.target_layers, info.mask_token_id) == (
        base.n_embd,
        base.head_dim,
        base.target_layers,
        base.mask_token_id,
    )
    # The stored values stay close to the source weights.
    from engine_bridge.models.convert_quant import decode

    hdr, src_hdr = read_header(out), read_header(src)
    t = hdr.tensors["blk.0.ffn_gate.weight"]
    got = decode(hdr.tensor_bytes(t.name), t.ggml_type, t.shape)
    want = np.frombuffer(src_hdr.tensor_bytes(t.name), np.float32).reshape(t.shape)
    tol = {"q8_0": 0.01, "q4_0": 0.15, "f16": 1e-3}[qtype]
    assert np.max(np.abs(got - want)) <= tol * np.max(np.abs(want))


def test_q4_0_keeps_dspark_heads_at_q8_0(pair, tmp_path):
    with mf.fast_vocab():
        ds = synth.write_drafter(tmp_path / "ds.gguf", pair["tspec"], synth.DrafterSpec(dspark=True))
    types = {n: t.type_name for n, t in read_header(quantize_drafter(ds, tmp_path / "q4.gguf", "q4_0")).tensors.items()}
    # synth's Markov rank is 16, less than one 32-value block: those rows cannot be quantised.
    assert types["markov_w1.weight"] == types["markov_w2.weight"] == "F16"
    assert types["blk.0.attn_q.weight"] == "Q4_0" and types["conf_proj.bias"] == "F32"
    assert storage_type("markov_w2.weight", (64, 50257), "q4_0").name == "Q8_0"
    assert storage_type("markov_w1.weight", (64, 50257), "q8_0").name == "Q8_0"


def test_storage_policy():
    assert storage_type("blk.0.attn_norm.weight", (64,), "q4_0").name == "F32"
    assert storage_type("blk.0.attn_q.weight", (48, 64), "q8_0").name == "F16"  # 48 is not a whole block
    assert storage_type("conf_proj.weight", (80, 1), "q8_0").name == "F16"  # one row: too small
    assert storage_type("blk.0.attn_q.weight", (64, 64), "q4_0").name == "Q4_0"


def test_quantize_refuses_bad_input(pair, tmp_path):
    with pytest.raises(ConversionError, match="not a DFlash drafter"):
        quantize_drafter(pair["target"], tmp_path / "x.gguf", "q8_0")
    cut = mf.truncate_copy(pair["direct"]["f32"], tmp_path / "cut.gguf", 100)
    with pytest.raises(ConversionError, match="truncated"):
        quantize_drafter(cut, tmp_path / "y.gguf", "q8_0")
    with pytest.raises(ConversionError, match="overwrite the input"):
        quantize_drafter(pair["direct"]["f32"], pair["direct"]["f32"], "q8_0")
    assert not (tmp_path / "x.gguf").exists() and not (tmp_path / "y.gguf").exists()
    assert variant_path("/m/tiny-dflash-f16.gguf", "q4_0").name == "tiny-dflash-q4_0.gguf"


# --- in the engine -------------------------------------------------------------------------------------------------


def _run(target, draft):
    from engine_bridge.runtime.config import EngineConfig, GenerationSettings
    from engine_bridge.runtime.engine import Engine
    from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT

    eng = Engine.load(
        EngineConfig(target=target, draft=draft, n_ctx=512, n_batch=128, n_ubatch=64), preflight=PAIR_PREFLIGHT
    )
    try:
        mode = "chain" if draft is not None else "ar"
        res = eng.generate("The quick brown fox", GenerationSettings(mode=mode, budget=4, max_tokens=16))
    finally:
        eng.close()
    return res


def test_converted_drafter_drafts_like_the_direct_one(pair, tmp_path):
    conv = convert_hf_drafter(pair["hf"]["f32"], pair["target"], tmp_path / "conv.gguf", "f32").path
    a, b = _run(pair["target"], pair["direct"]["f32"]), _run(pair["target"], conv)
    assert a.tokens == b.tokens and a.text == b.text
    assert [(s.drafted, s.accepted) for s in a.steps] == [(s.drafted, s.accepted) for s in b.steps]
    assert sum(s.drafted for s in a.steps) > 0


@pytest.mark.parametrize("qtype", ["f16", "q8_0", "q4_0"])
def test_variants_load_and_draft(pair, tmp_path, qtype):
    variant = quantize_drafter(pair["direct"]["f32"], tmp_path / f"v-{qtype}.gguf", qtype)
    res = _run(pair["target"], variant)
    assert len(res.tokens) == 16 and sum(s.drafted for s in res.steps) > 0
    # Greedy speculative decoding is lossless: the drafter's precision changes speed, not text.
    assert res.tokens == _run(pair["target"], None).tokens
