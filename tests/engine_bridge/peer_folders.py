"""Small HF drafter folders with the layouts of real published drafters, for the converter peer test.

Each layout keeps the *fields* of a real drafter's config.json (architectures, model_type, where rope
theta lives, layer_types / sliding window, dflash_config, num_target_layers, block size, DSpark
fields) and its tensor list, at small dimensions: hidden 64 against a synth target of 8 layers, the
GPT-2 vocabulary (50257 tokens, resources/vocab/gpt2.gguf). ``source`` says where each layout comes
from; ``documented`` is False where no exact config.json of that drafter could be found and the
closest documented layout stands in (named in ``source``).

For each layout the test gets three things:

* the drafter folder (config.json + model.safetensors, BF16 like the published checkpoints),
* the target as GGUF (engine_bridge.models.synth; ours reads the tokenizer and the target's shape there),
* the target as an HF folder (config.json of the real target's architecture + the GPT-2 tokenizer
  as vocab.json / merges.txt / tokenizer_config.json): upstream's converter takes the tokenizer
  from ``--target-model-dir`` and decides M-RoPE from the target's config. The tokenizer files are
  rebuilt from the same vocabulary GGUF the synth target carries, so both converters see one
  tokenizer.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np

from engine_bridge.models import dflash_names, synth

import modelfiles as mf

N_EMBD = 64
TARGET_LAYERS = 8


def build_target_layer_ids(num_target_layers: int, num_draft_layers: int) -> list[int]:
    """z-lab/dflash ``dflash/model.py`` build_target_layer_ids, restated (the ids the reference uses
    when dflash_config.target_layer_ids is absent)."""
    if num_draft_layers == 1:
        return [num_target_layers // 2]
    start, end = 1, num_target_layers - 3
    return [int(round(start + i * (end - start) / (num_draft_layers - 1))) for i in range(num_draft_layers)]


# --- layouts ------------------------------------------------------------------------------------------------------
# "draft" holds the drafter's config.json fields that are not dimensions; dimensions are filled in by
# hf_drafter_config(). "target_hf" is the target's config.json (architecture + the fields upstream reads).

_QWEN3_TARGET = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "rope_theta": 1000000,
    "tie_word_embeddings": False,
}
_QWEN35_TARGET = {
    "architectures": ["Qwen3_5ForConditionalGeneration"],
    "model_type": "qwen3_5",
    "text_config": {
        "model_type": "qwen3_5_text",
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": 10000000,
            "partial_rotary_factor": 0.25,
            "mrope_interleaved": True,
            "mrope_section": [11, 11, 10],
        },
    },
}

LAYOUTS: dict[str, dict] = {
    "qwen3-8b-dflash-b16": {
        "drafter_repo": "z-lab/Qwen3-8B-DFlash-b16",
        "documented": False,
        "source": (
            "no exact config.json found; the z-lab DFlashDraftModel layout as published in SpecForge "
            "configs/qwen3-32b-dflash.json (huggingface.co/FasterDFlash/Hanrui, progress/github/SpecForge/"
            "configs/qwen3-32b-dflash.json) with Qwen3-8B's values (rope_theta 1e6 top level, 5 layers, "
            "target_layer_ids = build_target_layer_ids(36, 5) = [1, 9, 17, 25, 33], mask 151669)"
        ),
        "target_arch": "qwen3",
        "target_hf": _QWEN3_TARGET,
        "n_layer": 5,
        "n_head": 4,
        "n_head_kv": 2,
        "head_dim": 16,
        "n_ff": 128,
        "draft": {
            "architectures": ["DFlashDraftModel"],
            "model_type": "qwen3",
            "attention_bias": False,
            "attention_dropout": 0.0,
            "auto_map": {"AutoModel": "dflash.DFlashDraftModel"},
            "block_size": 16,
            "hidden_act": "silu",
            "initializer_range": 0.02,
            "max_position_embeddings": 40960,
            "rms_norm_eps": 1e-06,
            "rope_scaling": None,
            "rope_theta": 1000000,
            "sliding_window": None,
            "use_sliding_window": False,
            "tie_word_embeddings": False,
            "use_cache": True,
            "dtype": "bfloat16",
            "layer_types": ["full_attention"] * 5,
        },
        "layer_ids": "spread",
    },
    "qwen3.6-27b-dflash-swa": {
        "drafter_repo": "z-lab/Qwen3.6-27B-DFlash",
        "documented": False,
        "source": (
            "field reports 000-003 (shared/seeds): 5 layers, layer_types [S,S,S,S,F], sliding_window 2048, "
            "rope theta 1e7 under rope_parameters, head_dim 128 against the target's 256; published GGUF "
            "conversions carry sliding_window_pattern [T,T,T,T,F], which upstream's rule writes only with "
            "use_sliding_window true, so the flag is taken as set. Target Qwen/Qwen3.6-27B: qwen3_5 "
            "hybrid with M-RoPE (mrope_section) under text_config.rope_parameters."
        ),
        "target_arch": "qwen3",
        "target_hf": _QWEN35_TARGET,
        "target_mrope": True,
        "n_layer": 5,
        "n_head": 4,
        "n_head_kv": 2,
        "head_dim": 32,
        "n_ff": 128,
        "draft": {
            "architectures": ["DFlashDraftModel"],
            "model_type": "qwen3",
            "attention_bias": False,
            "attention_dropout": 0.0,
            "block_size": 16,
            "hidden_act": "silu",
            "initializer_range": 0.02,
            "max_position_embeddings": 262144,
            "rms_norm_eps": 1e-06,
            "rope_parameters": {"rope_theta": 10000000, "rope_type": "default"},
            "sliding_window": 2048,
            "use_sliding_window": True,
            "max_window_layers": 5,
            "tie_word_embeddings": False,
            "use_cache": True,
            "dtype": "bfloat16",
            "layer_types": ["sliding_attention"] * 4 + ["full_attention"],
        },
        "layer_ids": "spread",
    },
    "llama3.1-8b-dflash-ultrachat": {
        "drafter_repo": "z-lab/LLaMA3.1-8B-Instruct-DFlash-UltraChat",
        "documented": False,
        "source": (
            "no exact config.json found; z-lab/dflash README (Transformers backend: Qwen3 and LLaMA-3.1; "
            "the drafter is the same DFlashDraftModel with Qwen3 layers) + Llama-3.1-8B's values "
            "(rope_theta 500000, rms_norm_eps 1e-5, 32 target layers, 128k context, mask on a reserved "
            "special token)"
        ),
        "target_arch": "llama",
        "target_hf": {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "rope_theta": 500000.0,
            "tie_word_embeddings": False,
        },
        "n_layer": 5,
        "n_head": 4,
        "n_head_kv": 2,
        "head_dim": 16,
        "n_ff": 128,
        "draft": {
            "architectures": ["DFlashDraftModel"],
            "model_type": "qwen3",
            "attention_bias": False,
            "attention_dropout": 0.0,
            "block_size": 16,
            "hidden_act": "silu",
            "initializer_range": 0.02,
            "max_position_embeddings": 131072,
            "rms_norm_eps": 1e-05,
            "rope_scaling": None,
            "rope_theta": 500000.0,
            "sliding_window": None,
            "use_sliding_window": False,
            "tie_word_embeddings": False,
            "use_cache": True,
            "torch_dtype": "bfloat16",
            "layer_types": ["full_attention"] * 5,
        },
        "layer_ids": "spread",
    },
    "qwen3.5-dflash": {
        "drafter_repo": "z-lab/Qwen3.5-9B-DFlash (layout of a published Qwen3.5-family drafter)",
        "documented": True,
        "source": (
            "huggingface.co/HyzeAI/Hyze1B/blob/main/config.json: a published DFlashDraftModel for a "
            "Qwen3.5 target (vocab 248320, mask 248070, rope_theta 1e7 top level, 5 layers, "
            "num_target_layers 64, transformers 4.57.1); the target is M-RoPE (Qwen/Qwen3.5-9B)"
        ),
        "target_arch": "qwen3",
        "target_hf": _QWEN35_TARGET,
        "target_mrope": True,
        "n_layer": 5,
        "n_head": 4,
        "n_head_kv": 2,
        "head_dim": 16,
        "n_ff": 128,
        "draft": {
            "architectures": ["DFlashDraftModel"],
            "model_type": "qwen3",
            "attention_bias": False,
            "attention_dropout": 0.0,
            "auto_map": {"AutoModel": "dflash.DFlashDraftModel"},
            "block_size": 16,
            "dtype": "bfloat16",
            "hidden_act": "silu",
            "initializer_range": 0.02,
            "layer_types": ["full_attention"] * 5,
            "max_position_embeddings": 262144,
            "max_window_layers": 5,
            "rms_norm_eps": 1e-06,
            "rope_scaling": None,
            "rope_theta": 10000000,
            "sliding_window": None,
            "tie_word_embeddings": False,
            "transformers_version": "4.57.1",
            "use_cache": True,
            "use_sliding_window": False,
        },
        "layer_ids": "spread",
    },
    "gpt-oss-20b-dflash": {
        "drafter_repo": "z-lab/gpt-oss-20b-DFlash",
        "documented": False,
        "source": (
            "no exact config.json found; the hub page tags it qwen3 / custom_code (DFlashDraftModel with "
            "Qwen3 layers, 0.8B) for openai/gpt-oss-20b (24 layers, head_dim 64, rope_theta 150000); "
            "fields as in the SpecForge qwen3 DFlash layout. Target HF config GptOssForCausalLM: "
            "upstream takes the tokenizer through GptOssModel.set_vocab (BPE)"
        ),
        "target_arch": "qwen3",
        "target_hf": {
            "architectures": ["GptOssForCausalLM"],
            "model_type": "gpt_oss",
            "rope_theta": 150000,
            "tie_word_embeddings": False,
        },
        "n_layer": 4,
        "n_head": 4,
        "n_head_kv": 2,
        "head_dim": 16,
        "n_ff": 128,
        "draft": {
            "architectures": ["DFlashDraftModel"],
            "model_type": "qwen3",
            "attention_bias": False,
            "attention_dropout": 0.0,
            "block_size": 16,
            "hidden_act": "silu",
            "initializer_range": 0.02,
            "max_position_embeddings": 131072,
            "rms_norm_eps": 1e-05,
            "rope_scaling": None,
            "rope_theta": 150000,
            "sliding_window": None,
            "use_sliding_window": False,
            "tie_word_embeddings": False,
            "use_cache": True,
            "torch_dtype": "bfloat16",
            "layer_types": ["full_attention"] * 4,
        },
        "layer_ids": "spread",
    },
    "dspark-qwen3": {
        "drafter_repo": "deepseek-ai/dspark_qwen3_4b_block7 / satgeze/Qwen3.6-27B-DSpark",
        "documented": False,
        "source": (
            "no exact config.json found; llama.cpp docs/speculative.md (DSpark: DFlash backbone + Markov "
            "head, block 7) and conversion/qwen.py DSparkModel (markov_head.markov_w1/w2, optional "
            "confidence_head.proj, lm_head dropped when draft_vocab_size == vocab_size, "
            "markov_head_type vanilla, top-level target_layer_ids / mask_token_id normalised)"
        ),
        "target_arch": "qwen3",
        "target_hf": _QWEN3_TARGET,
        "n_layer": 2,
        "n_head": 4,
        "n_head_kv": 2,
        "head_dim": 16,
        "n_ff": 128,
        "dspark": True,
        "draft": {
            "architectures": ["DSparkDraftModel"],
            "model_type": "qwen3",
            "attention_bias": False,
            "block_size": 7,
            "hidden_act": "silu",
            "max_position_embeddings": 40960,
            "rms_norm_eps": 1e-06,
            "rope_theta": 1000000,
            "use_sliding_window": False,
            "sliding_window": None,
            "markov_head_type": "vanilla",
            "torch_dtype": "bfloat16",
            "layer_types": ["full_attention"] * 2,
        },
        "layer_ids": "top-level",
    },
    # The two places where the sources disagree, as variants of real layouts.
    "qwen3.6-swa-flag-off": {
        "drafter_repo": "variant of z-lab/Qwen3.6-27B-DFlash",
        "documented": False,
        "source": (
            "the Qwen3.6 layout with use_sliding_window false: layer_types still mark 4 layers sliding. "
            "The reference (dflash/model.py) reads config.sliding_window, which transformers' Qwen3Config "
            "sets to None when use_sliding_window is false: those layers run full attention there, as in "
            "llama.cpp's rule"
        ),
        "target_arch": "qwen3",
        "target_hf": _QWEN3_TARGET,
        "n_layer": 5,
        "n_head": 4,
        "n_head_kv": 2,
        "head_dim": 32,
        "n_ff": 128,
        "draft": {
            "architectures": ["DFlashDraftModel"],
            "model_type": "qwen3",
            "block_size": 16,
            "hidden_act": "silu",
            "max_position_embeddings": 262144,
            "rms_norm_eps": 1e-06,
            "rope_parameters": {"rope_theta": 10000000, "rope_type": "default"},
            "sliding_window": 2048,
            "use_sliding_window": False,
            "dtype": "bfloat16",
            "layer_types": ["sliding_attention"] * 4 + ["full_attention"],
        },
        "layer_ids": "spread",
    },
    # The optional fields upstream's DFlashModel writes and no layout above carries (DFlash variants
    # and derived drafters set them): both converters must turn them into the same keys.
    "qwen3-8b-optional-fields": {
        "drafter_repo": "variant of z-lab/Qwen3-8B-DFlash-b16",
        "documented": False,
        "source": (
            "the Qwen3-8B layout plus the optional fields llama.cpp conversion/qwen.py DFlashModel reads: "
            "dflash_config attention_value_scale, output_multiplier, final_logit_softcapping, "
            "input_embedding_scale, rope_parameters.partial_rotary_factor, is_causal"
        ),
        "target_arch": "qwen3",
        "target_hf": _QWEN3_TARGET,
        "n_layer": 5,
        "n_head": 4,
        "n_head_kv": 2,
        "head_dim": 16,
        "n_ff": 128,
        "draft": {
            "architectures": ["DFlashDraftModel"],
            "model_type": "qwen3",
            "block_size": 16,
            "hidden_act": "silu",
            "max_position_embeddings": 40960,
            "rms_norm_eps": 1e-06,
            "rope_parameters": {"rope_theta": 1000000, "rope_type": "default", "partial_rotary_factor": 0.5},
            "use_sliding_window": False,
            "sliding_window": None,
            "is_causal": False,
            "dtype": "bfloat16",
            "layer_types": ["full_attention"] * 5,
        },
        "dflash_extra": {
            "attention_value_scale": 0.5,
            "output_multiplier": 0.75,
            "final_logit_softcapping": 30.0,
            "input_embedding_scale": 2.0,
        },
        "layer_ids": "spread",
    },
    "qwen3-8b-no-layer-ids": {
        "drafter_repo": "variant of z-lab/Qwen3-8B-DFlash-b16",
        "documented": False,
        "source": (
            "the Qwen3-8B layout without dflash_config.target_layer_ids: the reference fills them with "
            "build_target_layer_ids(num_target_layers, num_hidden_layers)"
        ),
        "target_arch": "qwen3",
        "target_hf": _QWEN3_TARGET,
        "n_layer": 5,
        "n_head": 4,
        "n_head_kv": 2,
        "head_dim": 16,
        "n_ff": 128,
        "draft": {
            "architectures": ["DFlashDraftModel"],
            "model_type": "qwen3",
            "block_size": 16,
            "hidden_act": "silu",
            "max_position_embeddings": 40960,
            "rms_norm_eps": 1e-06,
            "rope_theta": 1000000,
            "use_sliding_window": False,
            "sliding_window": None,
            "dtype": "bfloat16",
            "layer_types": ["full_attention"] * 5,
        },
        "layer_ids": "absent",
    },
}


def target_spec(name: str) -> synth.TargetSpec:
    lay = LAYOUTS[name]
    extra = {}
    if lay.get("target_mrope"):
        # what a qwen35 target GGUF carries (qwen35.rope.dimension_sections); a qwen3 graph ignores it
        extra[f"{lay['target_arch']}.rope.dimension_sections"] = [11, 11, 10, 0]
    return synth.TargetSpec(
        arch=lay["target_arch"],
        vocab="gpt2",
        n_embd=N_EMBD,
        n_layer=TARGET_LAYERS,
        n_head=4,
        n_head_kv=2,
        head_dim=16,
        n_ff=128,
        seed=7,
        extra_kv=extra,
        name=f"{name} target",
    )


def drafter_spec(name: str) -> synth.DrafterSpec:
    lay = LAYOUTS[name]
    ids = build_target_layer_ids(TARGET_LAYERS, lay["n_layer"])
    return synth.DrafterSpec(
        n_layer=lay["n_layer"],
        n_head=lay["n_head"],
        n_head_kv=lay["n_head_kv"],
        head_dim=lay["head_dim"],
        n_ff=lay["n_ff"],
        target_layers=tuple(i + 1 for i in ids),
        dspark=bool(lay.get("dspark")),
        seed=11,
    )


def write_hf_drafter(folder: Path, name: str) -> Path:
    """The drafter folder: config.json in the layout's fields, model.safetensors (BF16) with its tensors."""
    lay = LAYOUTS[name]
    tspec, dspec = target_spec(name), drafter_spec(name)
    folder.mkdir(parents=True, exist_ok=True)
    n_vocab = synth._n_vocab(synth._load_vocab(tspec.vocab))
    weights = synth.drafter_weights(dspec, tspec, n_vocab)
    st = {}
    for gname, arr in weights.items():
        hf = dflash_names.gguf_to_hf(gname)
        st[hf] = (mf.to_bf16_bits(np.asarray(arr, dtype=np.float32)), "BF16")
    if lay.get("dspark"):
        # a full-vocabulary DSpark export ships its (target-copied) lm_head; upstream drops it
        rng = np.random.default_rng(5)
        st["lm_head.weight"] = (mf.to_bf16_bits(rng.standard_normal((n_vocab, N_EMBD), dtype=np.float32)), "BF16")
    mf.write_safetensors(folder / "model.safetensors", st)

    cfg = copy.deepcopy(lay["draft"])
    cfg.update(
        {
            "hidden_size": N_EMBD,
            "num_hidden_layers": lay["n_layer"],
            "num_attention_heads": lay["n_head"],
            "num_key_value_heads": lay["n_head_kv"],
            "head_dim": lay["head_dim"],
            "intermediate_size": lay["n_ff"],
            "vocab_size": n_vocab,
            "num_target_layers": TARGET_LAYERS,
        }
    )
    mask = synth.default_mask_token(n_vocab)
    ids = [i - 1 for i in dspec.target_layers]
    if lay["layer_ids"] == "spread":
        cfg["dflash_config"] = {"mask_token_id": mask, "target_layer_ids": ids, **lay.get("dflash_extra", {})}
    elif lay["layer_ids"] == "absent":
        cfg["dflash_config"] = {"mask_token_id": mask}
    elif lay["layer_ids"] == "top-level":  # DSpark exports keep them at the top level
        cfg["mask_token_id"] = mask
        cfg["target_layer_ids"] = ids
    (folder / "config.json").write_text(json.dumps(cfg, indent=2))
    return folder


def write_hf_target(folder: Path, name: str) -> Path:
    """The target as upstream's converter reads it with --target-model-dir: config + tokenizer files."""
    lay = LAYOUTS[name]
    tspec = target_spec(name)
    folder.mkdir(parents=True, exist_ok=True)
    tok = synth._load_vocab(tspec.vocab)
    tokens = list(tok["tokenizer.ggml.tokens"][0])
    merges = list(tok["tokenizer.ggml.merges"][0])
    bos = tokens[int(tok["tokenizer.ggml.bos_token_id"][0])]
    eos = tokens[int(tok["tokenizer.ggml.eos_token_id"][0])]
    (folder / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(tokens)}, ensure_ascii=False))
    (folder / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n", encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "GPT2Tokenizer",
                "bos_token": bos,
                "eos_token": eos,
                "unk_token": None,
                "model_max_length": tspec.n_ctx,
                "chat_template": tspec.chat_template,
            },
            indent=2,
        )
    )
    cfg = copy.deepcopy(lay["target_hf"])
    dims = {
        "hidden_size": tspec.n_embd,
        "num_hidden_layers": tspec.n_layer,
        "vocab_size": len(tokens),
        "bos_token_id": int(tok["tokenizer.ggml.bos_token_id"][0]),
        "eos_token_id": int(tok["tokenizer.ggml.eos_token_id"][0]),
    }
    if "text_config" in cfg:
        cfg["text_config"].update(dims)
    else:
        cfg.update(dims)
    (folder / "config.json").write_text(json.dumps(cfg, indent=2))
    return folder


def write_case(root: Path, name: str) -> dict:
    """Everything one layout needs: the drafter folder, the target GGUF and the target HF folder."""
    case = root / name
    target = synth.write_target(case / "target.gguf", target_spec(name))
    return {
        "name": name,
        "layout": LAYOUTS[name],
        "hf": write_hf_drafter(case / "drafter-hf", name),
        "target_hf": write_hf_target(case / "target-hf", name),
        "target": target,
        "dir": case,
    }
