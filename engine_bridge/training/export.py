"""Trained checkpoints -> the GGUF pair llama.cpp runs.

* Target: a ``qwen3`` GGUF written with the gguf package: the tokenizer from ``tokenizer.json``
  (a ``gpt2``-model BPE tokenizer, see ``data.gguf_tokenizer``), tied lm_head (no
  ``output.weight``), matrices in the requested type with the project's storage policy
  (``engine_bridge.models.convert_quant.storage_type``: norms F32).
* Drafter: written as a Hugging Face DFlash folder (config.json with ``dflash_config`` +
  model.safetensors), then converted by the project's own converter
  (``engine_bridge.models.convert.convert_hf_drafter``), exactly as a downloaded drafter would be.

    python -m engine_bridge.training.export --ckpt DIR --data DIR --out resources/models [--type q8_0]

Needs numpy, safetensors and gguf only (no torch).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from ..models.dflash_names import LAYER_NAMES
from . import data as tdata

# The layer tensor names are a qwen3 target's and a DFlash drafter's alike: one table serves both.
HF_TO_GGUF_LAYER = LAYER_NAMES


#: A code-completion model has no roles: a conversation is its messages' text run together, so the
#: app's chat continues whatever code the user typed.
COMPLETION_TEMPLATE = "{% for message in messages %}{{ message['content'] }}{% endfor %}"


def load_shards(folder: str | Path, prefix: str) -> tuple[dict[str, np.ndarray], dict]:
    from safetensors.numpy import load_file

    folder = Path(folder)
    state: dict[str, np.ndarray] = {}
    for p in sorted(folder.glob(f"{prefix}-*.safetensors")):
        for k, v in load_file(str(p)).items():
            state[k] = v.astype(np.float32)
    if not state:
        raise FileNotFoundError(f"no {prefix}-*.safetensors in {folder}")
    return state, json.loads((folder / f"{prefix}.json").read_text())


def target_tensors(state: dict[str, np.ndarray], n_layer: int) -> dict[str, np.ndarray]:
    out = {"token_embd.weight": state["embed_tokens.weight"], "output_norm.weight": state["norm.weight"]}
    for i in range(n_layer):
        for hf, gg in HF_TO_GGUF_LAYER.items():
            out[f"blk.{i}.{gg}"] = state[f"layers.{i}.{hf}"]
    return out


def export_target(
    ckpt: str | Path,
    tokenizer_json: str | Path,
    out: str | Path,
    out_type: str = "q8_0",
    name: str = "DFlash Studio reference target (pycode-16M)",
    extra: dict | None = None,
    chat_template: str | None = COMPLETION_TEMPLATE,
) -> Path:
    from gguf import GGUFWriter

    from ..models.convert_quant import FILE_TYPE, encode, storage_type

    state, meta = load_shards(ckpt, "target")
    c = meta["config"]
    tok = tdata.gguf_tokenizer(tokenizer_json)
    assert len(tok["tokenizer.ggml.tokens"]) == c["vocab_size"], "tokenizer and checkpoint disagree on the vocabulary"
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    a = "qwen3"
    w = GGUFWriter(str(out), a)
    w.add_string("general.name", name)
    w.add_string("general.license", "MIT")
    w.add_uint32("general.file_type", FILE_TYPE[out_type])
    w.add_uint32(f"{a}.context_length", int(c["n_ctx"]))
    w.add_uint32(f"{a}.embedding_length", int(c["n_embd"]))
    w.add_uint32(f"{a}.block_count", int(c["n_layer"]))
    w.add_uint32(f"{a}.feed_forward_length", int(c["n_ff"]))
    w.add_uint32(f"{a}.attention.head_count", int(c["n_head"]))
    w.add_uint32(f"{a}.attention.head_count_kv", int(c["n_head_kv"]))
    w.add_uint32(f"{a}.attention.key_length", int(c["head_dim"]))
    w.add_uint32(f"{a}.attention.value_length", int(c["head_dim"]))
    w.add_uint32(f"{a}.rope.dimension_count", int(c["head_dim"]))
    w.add_float32(f"{a}.rope.freq_base", float(c["rope_theta"]))
    w.add_float32(f"{a}.attention.layer_norm_rms_epsilon", float(c["rms_eps"]))
    w.add_uint32(f"{a}.vocab_size", int(c["vocab_size"]))
    for k, v in (extra or {}).items():
        w.add_string(k, str(v))
    for k, v in tok.items():
        if isinstance(v, bool):
            w.add_bool(k, v)
        elif isinstance(v, int):
            w.add_uint32(k, v)
        elif isinstance(v, str):
            w.add_string(k, v)
        else:
            w.add_array(k, v)
    if chat_template:
        w.add_string("tokenizer.chat_template", chat_template)
    for gname, arr in target_tensors(state, int(c["n_layer"])).items():
        ne = tuple(reversed(arr.shape))
        data, raw = encode(arr, storage_type(gname, ne, out_type))
        w.add_tensor(gname, data, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return out


def hf_config(c: dict, vocab_size: int, n_target_layers: int) -> dict:
    """config.json of the Hugging Face DFlash layout (what convert_hf_drafter reads) for a
    ``DrafterConfig`` given as a dict."""
    return {
        "architectures": ["DFlashDraftModel"],
        "model_type": "qwen3",
        "hidden_size": c["n_embd"],
        "num_hidden_layers": c["n_layer"],
        "num_attention_heads": c["n_head"],
        "num_key_value_heads": c["n_head_kv"],
        "head_dim": c["head_dim"],
        "intermediate_size": c["n_ff"],
        "max_position_embeddings": c["n_ctx"],
        "rms_norm_eps": c["rms_eps"],
        "rope_theta": c["rope_theta"],
        "vocab_size": vocab_size,
        "hidden_act": "silu",
        "torch_dtype": "float32",
        "tie_word_embeddings": False,
        "num_target_layers": n_target_layers,
        "block_size": c["block_size"],
        "dflash_config": {
            "mask_token_id": c["mask_token_id"],
            "block_size": c["block_size"],
            # HF ids: the output of HF layer i is the input of layer i + 1 (GGUF id)
            "target_layer_ids": [int(k) - 1 for k in c["target_layers"]],
        },
    }


def write_hf_drafter(ckpt: str | Path, folder: str | Path) -> Path:
    """The drafter checkpoint as a Hugging Face DFlash folder (config.json + model.safetensors)."""
    from safetensors.numpy import save_file

    state, meta = load_shards(ckpt, "drafter")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    save_file(
        {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in state.items()}, str(folder / "model.safetensors")
    )
    cfg = hf_config(meta["config"], meta["vocab_size"], meta["n_target_layers"])
    (folder / "config.json").write_text(json.dumps(cfg, indent=1))
    return folder


def export_drafter(
    ckpt: str | Path,
    target_gguf: str | Path,
    out: str | Path,
    hf_dir: str | Path,
    out_type: str = "q8_0",
    name: str = "DFlash Studio reference drafter (pycode-16M DFlash)",
):
    from ..models.convert import convert_hf_drafter

    write_hf_drafter(ckpt, hf_dir)
    return convert_hf_drafter(hf_dir, target_gguf, out, out_type, overwrite=True, name=name)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ckpt", required=True, help="folder with target-*.safetensors and drafter-*.safetensors")
    ap.add_argument("--data", required=True, help="folder with tokenizer.json")
    ap.add_argument("--out", required=True)
    ap.add_argument("--type", default="q8_0", choices=["f32", "f16", "q8_0"])
    ap.add_argument("--drafter-type", default=None, choices=["f32", "f16", "q8_0"])
    ap.add_argument("--hf-dir", default=None, help="where the HF drafter folder is written (default: OUT/hf-drafter)")
    a = ap.parse_args(argv)
    out = Path(a.out)
    t = export_target(a.ckpt, Path(a.data) / "tokenizer.json", out / "target.gguf", a.type)
    res = export_drafter(a.ckpt, t, out / "drafter.gguf", a.hf_dir or out / "hf-drafter", a.drafter_type or a.type)
    print(f"{t} ({t.stat().st_size / 1e6:.1f} MB)")
    print(f"{res.path} ({res.path.stat().st_size / 1e6:.1f} MB, {res.tensors} tensors; {'; '.join(res.notes)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
