"""Training DFlash drafters: for a llama/qwen2/qwen3 GGUF target (``train-drafter``, the Train tab) and the reference pair.
train_for_target, train_chat, chat_data, chat_prompts, gguf_target, evaluate_chat; data, train_target, train_drafter, export, ...
May import: common, runtime, models (torch only inside the modules that use it); never bench, cli, app or Qt.

The reference pair: a small llama-family target and a DFlash drafter for it.

Optional: needs the ``train`` extra (PyTorch, safetensors) and, for the tokenizer, ``tokenizers``.
Importing this package needs neither; the modules that use torch import it themselves.

Pipeline (README.md in this folder has the commands):

1. ``data``: collect permissively licensed Python source from installed packages, split it by file
   into train / held-out, train a byte-level BPE tokenizer and tokenize the corpus.
2. ``train_target``: train a qwen3-architecture target whose math matches llama.cpp's qwen3 graph.
3. ``train_drafter``: generate the target's greedy continuations and train a DFlash drafter on them
   (target features of chosen layers -> fc -> norm -> K/V of every draft layer; non-causal block
   [anchor, mask, ...]; random anchors; loss weighted toward early block positions; the target's
   embeddings and lm_head frozen and shared).
4. ``export``: target -> GGUF (qwen3), drafter -> Hugging Face DFlash folder -> GGUF through
   ``engine_bridge.models.convert.convert_hf_drafter``.
"""


def unavailable() -> str | None:
    """Why training cannot run in this install, or None. It needs PyTorch (the ``train`` extra),
    which the one-file bundle (packaging/bundle/) leaves out, as it leaves out the training prompts."""
    import importlib.util
    import sys

    if importlib.util.find_spec("torch") is not None:
        return None
    if getattr(sys, "frozen", False):
        return (
            "training needs PyTorch, which the one-file bundle does not carry; train from a checkout "
            "(make setup installs it)"
        )
    return "training needs PyTorch, which this install lacks: install the train extra (pip install -e '.[train]')"
