"""What this llama.cpp build accepts, read from its source (llama-cpp-python 0.3.36, vendored
llama.cpp 0c1e57098). Each table names the file it comes from so it can be re-checked on upgrade.
"""

from __future__ import annotations

import re

#: src/llama-arch.cpp, LLM_ARCH_NAMES: every architecture this llama.cpp can load.
KNOWN_ARCHS = frozenset(
    """
clip llama llama4 deci falcon grok gpt2 gptj gptneox mpt baichuan starcoder refact bert modern-bert
nomic-bert nomic-bert-moe neo-bert jina-bert-v2 jina-bert-v3 eurobert bloom stablelm qwen qwen2
qwen2moe qwen2vl qwen3 qwen3moe qwen3next qwen3vl qwen3vlmoe qwen35 qwen35moe qwen4exp phi2 phi3
phimoe plamo plamo2 plamo3 codeshell orion internlm2 minicpm minicpm3 gemma gemma2 gemma3 gemma3n
gemma4 gemma4-assistant gemma-embedding starcoder2 mamba mamba2 maple jamba falcon-h1 xverse
command-r cohere2 cohere2moe dbrx olmo olmo2 olmoe muse-glimmer openelm arctic deepseek deepseek2
deepseek2-ocr deepseek32 deepseek4 chatglm glm4 glm4moe glm-dsa bitnet t5 t5encoder jais jais2
nemotron nemotron_h nemotron_h_moe exaone exaone4 exaone-moe rwkv6 rwkv6qwen2 rwkv7 arwkv7 granite
granitemoe granitehybrid graniteswitch granite_swa chameleon wavtokenizer-dec plm bailingmoe
bailingmoe2 bailingmoe3 dots1 dots3note arcee afmoe laguna ernie4_5 ernie4_5-moe hunyuan-moe
hunyuan-dense hunyuan_vl hy_v3 hy_v4 smollm3 gpt-oss lfm2 lfm2moe dream smallthinker llada
llada-moe seed_oss grovemoe apertus minimax-01 hrm_text minimax-m2 minimax-m3 cogvlm rnd1
pangu-embedded mistral3 eagle3 dflash mistral4 paddleocr mimo2 step35 spark2_5 llama-embed
maincoder kimi-linear kimi-k3 glm5-next talkie mellum nanbeige qwen3tts pockettts
""".split()
)

#: Architectures whose graph records layer inputs (``res->t_layer_inp[il] = ...`` in
#: src/models/*.cpp, mapped to names through src/llama-model.cpp and src/models/models.h).
#: Any other target makes llama.cpp abort in src/llama-graph.cpp with "layer input tensor is null".
FEEDS_DRAFTER = frozenset(
    {
        "llama",
        "llama-embed",
        "nanbeige",
        "qwen3",
        "qwen3moe",
        "qwen3next",
        "qwen35",
        "qwen35moe",
        "qwen4exp",
        "gemma4",
        "muse-glimmer",
        "deepseek4",
        "nemotron_h",
        "nemotron_h_moe",
        "bailingmoe3",
        "hunyuan_vl",
        "hunyuan-dense",
        "gpt-oss",
        "lfm2",
        "lfm2moe",
        "minimax-01",
        "minimax-m2",
        "mimo2",
    }
)

#: Architectures whose graph records layer inputs only in our build, and the patch that makes it so
#: (packaging/patches/): on an engine built without it they still abort as above.
FEEDS_DRAFTER_WITH_PATCH = {"gemma3": "0003-gemma3-dflash.patch", "qwen2": "0004-qwen2-dflash.patch"}


def feeds_drafter(arch: str | None, build: dict | None) -> tuple[bool, str | None]:
    """Whether a target of ``arch`` can feed a drafter on the engine ``build`` describes (its
    build-info: the patches it was built with); second, the patch that decides it, if one does."""
    patch = FEEDS_DRAFTER_WITH_PATCH.get(arch or "")
    if patch is None:
        return arch in FEEDS_DRAFTER, None
    applied = {p.get("name") for p in (build or {}).get("patches") or ()}
    return patch in applied, patch


#: Architectures that also export the input of a virtual layer n_layer (the final hidden state):
#: nemotron-h.cpp, mimo2.cpp, deepseek4.cpp set ``t_layer_inp[n_layer]``. For every other one a
#: target layer id equal to n_layer passes llama_set_embeddings_layer_inp's assert and then aborts.
FINAL_LAYER_INPUT = frozenset({"nemotron_h", "nemotron_h_moe", "mimo2", "deepseek4"})

#: src/models/<arch>.cpp load_swa_pattern(ml, n, dense_first): the sliding-window layout an
#: architecture gets when its GGUF has a window but no ``attention.sliding_window_pattern`` key (an
#: integer key replaces n, an array key replaces the whole layout). llama-hparams.cpp
#: set_swa_pattern: layer il slides when il % n < n - 1 (the last of each n is dense), or with
#: dense_first when il % n != 0 (the first of each n is dense).
SWA_DEFAULT_PATTERN = {
    "gemma2": (2, False),
    "gemma3": (6, False),
    "gemma-embedding": (6, False),
    "gemma3n": (5, False),
    "cohere2": (4, False),
    "cohere2moe": (4, True),
    "afmoe": (4, False),
    "exaone4": (4, False),
    "exaone-moe": (4, False),
    "laguna": (4, True),
    "llama4": (4, False),
    "mellum": (4, False),
    "modern-bert": (3, True),
    "muse-glimmer": (4, False),
    "olmo2": (4, False),
    "gpt-oss": (2, False),
    "plamo3": (8, False),
    "smallthinker": (4, True),
}
#: src/models/phi3.cpp: a Phi-3 GGUF's sliding window is ignored (every layer attends to all tokens).
SWA_DISABLED = frozenset({"phi3"})

#: src/models/<arch>.cpp: graphs that assert GGML_ASSERT(n_embd_head == n_rot) and n_embd_head_v ==
#: n_embd_head_k at every decode, so a file whose rope.dimension_count or attention.value_length differs
#: from its head size aborts the process (found by tests/faults/test_faults_fuzz.py). "dflash" itself
#: allows partial rotary (n_rot < head size) but not n_rot = 0, which never finished a decode.
ROPE_WHOLE_HEAD = frozenset(
    """
apertus arcee arctic baichuan chameleon codeshell cogvlm cohere2moe dbrx deci deepseek dots1 dream
ernie4_5 ernie4_5-moe exaone exaone-moe exaone4 falcon granite granite_swa graniteswitch grok grovemoe
hunyuan-moe hunyuan_vl hy_v3 internlm2 jais2 llada llada-moe llama llama4 maincoder mellum minimax-01
minimax-m2 mistral3 nemotron olmo olmo2 olmoe orion paddleocr plamo pockettts qwen2 qwen2moe qwen2vl
qwen3 qwen3moe qwen3vl qwen3vlmoe rnd1 seed_oss smallthinker smollm3 starcoder2 talkie xverse
""".split()
)


def swa_layout(n_pattern: int, n_layer: int, dense_first: bool = False) -> tuple[bool, ...]:
    """llama_hparams::set_swa_pattern: per layer, True where it slides (n_pattern 0: all slide)."""
    if dense_first:
        return tuple(n_pattern == 0 or il % n_pattern != 0 for il in range(n_layer))
    return tuple(n_pattern == 0 or il % n_pattern < n_pattern - 1 for il in range(n_layer))


#: ggml/CMakeLists.txt GGML_CUDA_FA_QUANTS default: the K-V pairs with compiled CUDA
#: flash-attention vector kernels; others are converted to f16 every step (ggml-cuda/fattn.cu).
CUDA_FA_DEFAULT_PAIRS = frozenset({("q4_0", "q4_0"), ("q8_0", "q8_0"), ("f16", "f16"), ("bf16", "bf16")})
#: ggml-cuda/fattn.cu ggml_cuda_fattn_kv_type_supported: K/V types the CUDA kernels handle at all.
CUDA_FA_TYPES = frozenset({"f32", "f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0"})


def cuda_fast_fa_pairs(cmake_args: str) -> frozenset | None:
    """The compiled CUDA FA K-V pairs for a build's CMake flags; None means all of them."""
    args = cmake_args or ""
    if re.search(r"-DGGML_CUDA_FA_ALL_QUANTS=(ON|1|TRUE|YES)\b", args, re.I):
        return None
    m = re.search(r"-DGGML_CUDA_FA_QUANTS=\"?([^\s\"]+)", args)
    if m:
        value = m.group(1).strip().lower()
        if value == "all":
            return None
        pairs = set()
        for combo in re.split(r"[;,]", value):
            if "-" in combo:
                k, v = combo.split("-", 1)
                pairs.add((k, v))
        return frozenset(pairs)
    return CUDA_FA_DEFAULT_PAIRS


def kv_block_size(kv_type: str) -> int:
    """ggml block size of a KV cache type (1 for float types)."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    try:
        return GGML_QUANT_SIZES[GGMLQuantizationType[kv_type.upper()]][0]
    except KeyError:
        return 1
