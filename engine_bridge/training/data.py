"""The training corpus and the tokenizer of the reference pair.

Text: the Python source that ships with CPython's standard library (PSF-2.0) and with a fixed
allowlist of permissively licensed packages found in the given site-packages folders (licences
below, vendored sub-trees skipped). Files are split by a hash of their path, so the held-out
files never appear in training, whatever the machine.

Tokenizer: a byte-level BPE (GPT-2 pre-tokenizer regex, the same as llama.cpp's ``gpt-2`` pre
type) trained with the ``tokenizers`` library, with two control tokens: ``<|endoftext|>`` (id 0,
BOS/EOS, starts every document) and ``<|mask|>`` (id 1, the drafter's mask token). It is written
into GGUF as a ``gpt2``-model tokenizer (tokens, token types, merges), and llama.cpp tokenizes
exactly as the Python tokenizer does (checked by ``verify.py`` and the tests).

    python -m engine_bridge.training.data --out DIR [--site PATH ...] [--vocab 8192]

writes DIR/tokenizer.json, DIR/train.u16, DIR/val.u16 (uint16 token ids, documents joined, each
starting with id 0), DIR/prompts.jsonl (held-out prompts) and DIR/meta.json (sources, licences,
counts).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import numpy as np

BOS_TEXT = "<|endoftext|>"
MASK_TEXT = "<|mask|>"
BOS_ID, MASK_ID = 0, 1
SPECIAL_TOKENS = (BOS_TEXT, MASK_TEXT)

#: Packages taken from site-packages, with their licences (each checked against its dist-info).
PACKAGES: dict[str, str] = {
    "numpy": "BSD-3-Clause",
    "matplotlib": "Matplotlib License (PSF-based, BSD-compatible)",
    "mpl_toolkits": "Matplotlib License (PSF-based, BSD-compatible)",
    "huggingface_hub": "Apache-2.0",
    "pyqtgraph": "MIT",
    "_pytest": "MIT",
    "pluggy": "MIT",
    "pip": "MIT",
    "setuptools": "MIT",
    "gguf": "MIT",
    "jinja2": "BSD-3-Clause",
    "click": "BSD-3-Clause",
    "packaging": "Apache-2.0 OR BSD-2-Clause",
    "pygments": "BSD-2-Clause",
    "pyparsing": "MIT",
    "requests": "Apache-2.0",
    "urllib3": "MIT",
    "fsspec": "BSD-3-Clause",
    "dateutil": "Apache-2.0 OR BSD-3-Clause",
    "yaml": "MIT",
    "fontTools": "MIT",
    "anyio": "MIT",
    "llama_cpp": "MIT",
}
STDLIB_LICENCE = "PSF-2.0"
#: Sub-trees skipped: vendored code under other licences, and generated tables (codec maps).
SKIP_PARTS = ("_vendor", "site-packages", "encodings", "__pycache__", "pydoc_data", "unicodedata")
MAX_FILE_BYTES = 200_000


@dataclass
class Doc:
    name: str  # source/relative/path.py
    licence: str
    text: str


def _good(text: str) -> bool:
    if "\x00" in text or not text.strip():
        return False
    lines = text.splitlines()
    long = sum(1 for ln in lines if len(ln) > 200)
    return long <= max(2, len(lines) // 50)


def _files(root: Path, prefix: str, licence: str) -> list[Doc]:
    docs = []
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root)
        if any(part in SKIP_PARTS for part in rel.parts):
            continue
        try:
            if p.stat().st_size > MAX_FILE_BYTES:
                continue
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if _good(text):
            docs.append(Doc(f"{prefix}/{rel.as_posix()}", licence, text))
    return docs


def collect(site_dirs: list[Path], packages: dict[str, str] | None = None, stdlib: Path | None = None) -> list[Doc]:
    """Every usable .py file of the stdlib and of the allowlisted packages found in ``site_dirs``."""
    stdlib = Path(stdlib or sysconfig.get_paths()["stdlib"])
    docs = _files(stdlib, "stdlib", STDLIB_LICENCE)
    seen = set()
    for name, lic in (packages or PACKAGES).items():
        for site in site_dirs:
            root = Path(site) / name
            if root.is_dir() and name not in seen:
                seen.add(name)
                docs.extend(_files(root, name, lic))
    return docs


def is_held_out(name: str, frac: float = 0.01) -> bool:
    h = int.from_bytes(hashlib.sha1(name.encode()).digest()[:4], "big")
    return h < frac * 2**32


def train_tokenizer(texts, vocab_size: int = 8192):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    assert tok.token_to_id(BOS_TEXT) == BOS_ID and tok.token_to_id(MASK_TEXT) == MASK_ID
    return tok


def load_tokenizer(path: str | Path):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(path))


def gguf_tokenizer(tokenizer_json: str | Path) -> dict:
    """The GGUF tokenizer keys of a tokenizer.json written by :func:`train_tokenizer`.

    Returns ``{key: value}``; lists are tokens / token types / merges in id and rank order.
    """
    spec = json.loads(Path(tokenizer_json).read_text())
    vocab: dict[str, int] = spec["model"]["vocab"]
    tokens: list[str | None] = [None] * len(vocab)
    for t, i in vocab.items():
        tokens[i] = t
    special = {a["id"]: a["content"] for a in spec.get("added_tokens", [])}
    for i, content in special.items():
        tokens[i] = content
    assert all(t is not None for t in tokens), "token ids are not contiguous"
    merges = [m if isinstance(m, str) else " ".join(m) for m in spec["model"]["merges"]]
    return {
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": "gpt-2",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": [3 if i in special else 1 for i in range(len(tokens))],
        "tokenizer.ggml.merges": merges,
        "tokenizer.ggml.bos_token_id": BOS_ID,
        "tokenizer.ggml.eos_token_id": BOS_ID,
        "tokenizer.ggml.add_bos_token": True,
        "tokenizer.ggml.add_eos_token": False,
    }


def encode_docs(tok, texts: list[str]) -> np.ndarray:
    """Documents joined into one uint16 stream, each preceded by BOS (id 0)."""
    out = []
    for enc in tok.encode_batch(texts, add_special_tokens=False):
        out.append(np.array([BOS_ID] + enc.ids, dtype=np.uint16))
    return np.concatenate(out) if out else np.zeros(0, np.uint16)


def make_prompts(docs: list[Doc], n: int = 48, seed: int = 0) -> list[dict]:
    """Held-out prompts: 4-10 lines of a held-out file, starting at a def/class line."""
    rng = random.Random(seed)
    cands = []
    for d in docs:
        lines = d.text.splitlines()
        for i, ln in enumerate(lines):
            s = ln.lstrip()
            if (s.startswith("def ") or s.startswith("class ")) and len(ln) - len(s) <= 4:
                cands.append((d.name, lines, i))
    rng.shuffle(cands)
    out: list[dict] = []
    used: set[str] = set()
    for name, lines, i in cands:
        if name in used:
            continue
        k = rng.randint(4, 10)
        text = "\n".join(lines[i : i + k]) + "\n"
        if 60 <= len(text) <= 600:
            used.add(name)
            out.append({"id": f"heldout-{len(out):02d}", "source": name, "prompt": text})
        if len(out) >= n:
            break
    return out


def prepare(
    out: str | Path,
    site_dirs: list[Path],
    vocab_size: int = 8192,
    held_out: float = 0.01,
    max_train_tokens: int | None = None,
    stdlib: Path | None = None,
) -> dict:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    docs = collect(site_dirs, stdlib=stdlib)
    train = [d for d in docs if not is_held_out(d.name, held_out)]
    val = [d for d in docs if is_held_out(d.name, held_out)]
    tok = train_tokenizer((d.text for d in train), vocab_size)
    tok.save(str(out / "tokenizer.json"))
    rng = random.Random(0)
    rng.shuffle(train)  # document order of the stream: deterministic
    tr = encode_docs(tok, [d.text for d in train])
    if max_train_tokens:
        tr = tr[:max_train_tokens]
    va = encode_docs(tok, [d.text for d in val])
    tr.tofile(out / "train.u16")
    va.tofile(out / "val.u16")
    prompts = make_prompts(val)
    with open(out / "prompts.jsonl", "w") as f:
        for p in prompts:
            f.write(json.dumps(p) + "\n")
    by_src: dict[str, dict] = {}
    for d in docs:
        src = d.name.split("/", 1)[0]
        e = by_src.setdefault(src, {"licence": d.licence, "files": 0, "bytes": 0})
        e["files"] += 1
        e["bytes"] += len(d.text.encode())
    meta = {
        "vocab_size": tok.get_vocab_size(),
        "bos_id": BOS_ID,
        "mask_id": MASK_ID,
        "train_tokens": int(tr.size),
        "val_tokens": int(va.size),
        "train_files": len(train),
        "val_files": len(val),
        "held_out_fraction": held_out,
        "sources": by_src,
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=1))
    return meta


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--site", action="append", default=[], help="a site-packages folder to take packages from")
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--held-out", type=float, default=0.01)
    ap.add_argument("--max-train-tokens", type=int, default=None)
    a = ap.parse_args(argv)
    meta = prepare(a.out, [Path(s) for s in a.site], a.vocab, a.held_out, a.max_train_tokens)
    print(json.dumps(meta, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
