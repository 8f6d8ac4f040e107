"""Headers-only inspection of real GGUF files and HF folders (engine_bridge.models.modelinfo)."""

from __future__ import annotations

import json

import pytest
from gguf import GGUFReader

import modelfiles as mf
from engine_bridge.models import synth
from engine_bridge.common.errors import UnreadableModelError
from engine_bridge.models.gguf_header import read_header
from engine_bridge.models.modelinfo import ROLE_DFLASH, ROLE_DSPARK, ROLE_LORA, ROLE_TARGET, ROLE_UNKNOWN, inspect_model


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Odd drafters next to a plain target: other head counts than the target, DSpark, SWA."""
    d = tmp_path_factory.mktemp("modelinfo")
    with mf.fast_vocab():
        tspec = synth.TargetSpec(n_embd=64, n_head=4, n_head_kv=2, head_dim=16, n_ff=128, n_layer=6)
        target = synth.write_target(d / "target.gguf", tspec)
        # Field report 000: the drafter's attention shape differs from its target's.
        odd = synth.write_drafter(
            d / "odd.gguf",
            tspec,
            synth.DrafterSpec(
                n_head=8, n_head_kv=4, head_dim=8, n_ff=96, n_layer=2, target_layers=(1, 3, 5), block_size=8
            ),
        )
        dspark = synth.write_drafter(d / "dspark.gguf", tspec, synth.DrafterSpec(dspark=True))
        swa = synth.write_drafter(
            d / "swa.gguf",
            tspec,
            synth.DrafterSpec(n_layer=3, sliding_window=256, sliding_window_pattern=(True, True, False)),
        )
        hf = mf.write_hf_drafter(
            d / "hf",
            tspec,
            synth.DrafterSpec(n_layer=2),
            dtype="BF16",
            rope="nested",
            layer_types=["sliding_attention", "full_attention"],
            use_sliding_window=True,
            sliding_window=512,
        )
        base = synth.write_target(d / "base.gguf", tspec, chat_template=None)
    return dict(dir=d, target=target, odd=odd, dspark=dspark, swa=swa, hf=hf, base=base, tspec=tspec)


def test_target_report(files):
    info = inspect_model(files["target"])
    assert info.role == ROLE_TARGET and info.arch == "qwen3" and info.format == "gguf"
    assert (info.n_layer, info.n_embd, info.n_head, info.n_head_kv, info.head_dim, info.n_ff) == (6, 64, 4, 2, 16, 128)
    assert info.context_length == 4096 and info.rope_theta == pytest.approx(10000.0)
    assert info.vocab_size == 50257 and info.tokenizer_model == "gpt2"
    assert info.bos_token_id == info.eos_token_id == 50256
    assert info.has_chat_template and not inspect_model(files["base"]).has_chat_template
    assert info.quant_types == {"F32": len(info.tensor_names)}
    assert info.n_params == sum(_prod(s) for s in info.tensor_shapes.values()) > 0
    assert info.data_complete and not info.dim_mismatches
    assert info.tokens_hash and len(info.tokens_hash) == 64


def test_header_reader_agrees_with_gguf_reader(files):
    """Our fast reader and the gguf package must see the same fields and tensors."""
    ours = read_header(files["odd"])
    ref = GGUFReader(files["odd"])
    for key, fld in ref.fields.items():
        if key.startswith("GGUF."):
            continue
        value = ours.value(key)
        expected = fld.contents()
        got = value.tolist() if hasattr(value, "tolist") else value
        if isinstance(expected, float):
            assert got == pytest.approx(expected), key
        else:
            assert got == expected, key
    assert list(ours.tensors) == [t.name for t in ref.tensors]
    for t in ref.tensors:
        mine = ours.tensors[t.name]
        assert mine.ne == tuple(int(x) for x in t.shape), t.name
        assert mine.ggml_type == int(t.tensor_type) and mine.n_bytes == int(t.n_bytes)
        assert ours.data_start + mine.offset == int(t.data_offset)


def test_drafter_dimensions_come_from_its_tensors(files):
    info = inspect_model(files["odd"])
    assert info.role == ROLE_DFLASH
    assert (info.n_head, info.n_head_kv, info.head_dim, info.n_ff, info.n_layer) == (8, 4, 8, 96, 2)
    assert info.dims_from_tensors["head_dim"] == 8 and info.dims_from_tensors["n_head"] == 8
    assert info.fc_in == 3 * 64 and info.captured_layers == 3
    assert info.target_layers == (1, 3, 5) and info.block_size == 8
    assert info.mask_token_id == synth.default_mask_token(50257) and info.mask_token
    assert not info.dim_mismatches


def test_metadata_disagreeing_with_shapes_is_reported(files, tmp_path):
    bad = mf.rewrite_gguf(
        files["odd"],
        tmp_path / "bad.gguf",
        set_kv={"dflash.attention.key_length": 16, "dflash.feed_forward_length": 128},
    )
    info = inspect_model(bad)
    assert info.head_dim == 8 and info.n_ff == 96  # the shapes win
    text = " ".join(info.dim_mismatches)
    assert "head_dim: metadata says 16, tensor shapes say 8" in text and "n_ff" in text


def test_dspark_heads(files):
    info = inspect_model(files["dspark"])
    assert info.role == ROLE_DSPARK and info.dspark
    assert info.markov_rank == 16 and info.markov_vocab == 50257
    assert info.has_confidence_head and info.sample_from_anchor is True


def test_sliding_window_pattern(files):
    info = inspect_model(files["swa"])
    assert info.sliding_window == 256 and info.sliding_window_pattern == (True, True, False)
    assert inspect_model(files["target"]).sliding_window is None


@pytest.mark.parametrize(
    "arch, extra, slides, note",
    [
        # gemma3 names only the window: llama.cpp's gemma3 loader slides 5 of every 6 layers
        ("gemma3", {}, [il % 6 < 5 for il in range(12)], None),
        # an integer pattern key replaces the architecture's n; cohere2moe keeps its dense-first layout
        ("gemma3", {"gemma3.attention.sliding_window_pattern": 3}, [il % 3 < 2 for il in range(12)], None),
        ("cohere2moe", {}, [il % 4 != 0 for il in range(12)], None),
        # phi3's loader drops the window: no sliding layers, and a note says why
        ("phi3", {}, None, "full attention"),
    ],
)
def test_sliding_window_layout_follows_the_architecture(tmp_path, arch, extra, slides, note):
    kv = {f"{arch}.attention.sliding_window": 512, **extra}
    path = synth.write_target(tmp_path / f"{arch}.gguf", synth.TargetSpec(arch=arch, n_layer=12, extra_kv=kv))
    info = inspect_model(path)
    if slides is None:
        assert info.sliding_window is None and any(note in n for n in info.notes)
    else:
        assert info.sliding_window == 512 and list(info.sliding_window_pattern) == slides
        assert f"sliding window  512 on {sum(slides)}/12 layers" in "\n".join(info.summary_lines())


def test_truncated_data_is_reported(files, tmp_path):
    cut = mf.truncate_copy(files["target"], tmp_path / "cut.gguf", 4096)
    info = inspect_model(cut)
    assert not info.data_complete
    assert info.data_expected_bytes == inspect_model(files["target"]).data_expected_bytes > info.size_bytes
    assert "TRUNCATED" in "\n".join(info.summary_lines())


@pytest.mark.parametrize("content", [b"", b"hello, not a model\n" * 10, b"GGUF\x03\x00\x00\x00" + b"\xff" * 16])
def test_garbage_is_unreadable(tmp_path, content):
    p = tmp_path / "x.gguf"
    p.write_bytes(content)
    with pytest.raises(UnreadableModelError):
        inspect_model(p)


def test_header_cut_short_is_unreadable(files, tmp_path):
    cut = tmp_path / "head.gguf"
    cut.write_bytes(files["target"].read_bytes()[:5000])  # inside the token list
    with pytest.raises(UnreadableModelError, match="cut short"):
        inspect_model(cut)


def test_missing_path_is_unreadable(tmp_path):
    with pytest.raises(UnreadableModelError, match="no such file"):
        inspect_model(tmp_path / "nope.gguf")


def test_vocab_only_file_is_unknown():
    from engine_bridge.common.resources import vocab_path

    info = inspect_model(vocab_path("phi3"))
    assert info.role == ROLE_UNKNOWN and info.vocab_size == 32064 and info.has_chat_template


def test_hf_drafter_folder(files):
    info = inspect_model(files["hf"])
    assert info.format == "hf" and info.role == ROLE_DFLASH and info.arch == "dflash"
    assert info.quant_types == {"BF16": len(info.tensor_names)}
    assert (info.n_embd, info.n_layer, info.head_dim, info.captured_layers) == (64, 2, 16, 2)
    assert info.rope_theta == pytest.approx(10000.0)  # from the nested rope_parameters
    assert info.sliding_window == 512 and info.sliding_window_pattern == (True, False)
    assert info.target_layers == synth.default_target_layers(6)  # HF ids + 1
    assert info.data_complete


def test_hf_folder_truncated_and_broken(files, tmp_path):
    import shutil

    broken = tmp_path / "hf"
    shutil.copytree(files["hf"], broken)
    st = broken / "model.safetensors"
    st.write_bytes(st.read_bytes()[:-100])
    assert not inspect_model(broken).data_complete
    (broken / "config.json").write_text("{not json")
    with pytest.raises(UnreadableModelError):
        inspect_model(broken)
    (broken / "config.json").unlink()
    with pytest.raises(UnreadableModelError, match="config.json"):
        inspect_model(broken)


def test_lora_adapter(files, tmp_path):
    lora = mf.write_lora(tmp_path / "lora.gguf", files["odd"], rank=4)
    info = inspect_model(lora)
    assert info.role == ROLE_LORA and info.adapter_type == "lora" and info.lora_alpha == 8.0
    assert info.lora_pairs["blk.0.attn_q.weight"] == {"a": (4, 64), "b": (64, 4)}


def test_to_dict_is_json(files):
    d = inspect_model(files["dspark"]).to_dict()
    assert json.loads(json.dumps(d))["role"] == "dspark"


def _prod(shape):
    n = 1
    for x in shape:
        n *= x
    return n
