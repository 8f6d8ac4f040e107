"""Pairing checks: does this target fit this drafter (and these adapters, KV types, this build)?

``check()`` answers from headers alone, before anything is loaded, with ordered PASS / WARN /
FAIL lines, each with a one-line reason and a fix. Every condition that makes llama.cpp abort
the whole process (or refuse to load) is a FAIL, so the engine can refuse the pair with a
message instead of dying. The facts behind each check are in ``llama_facts`` and
docs/dflash-in-llama-cpp.md.
"""

from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass
from pathlib import Path

from . import device_plan
from . import llama_facts as facts
from ..common.placement import Placement
from ..runtime.config import KV_TYPES, QUANTISED_KV, KVTypes
from ..common.errors import UnreadableModelError
from .modelinfo import DRAFTER_ROLES, ROLE_LORA, ROLE_TARGET, ModelInfo, inspect_model

PASS, WARN, FAIL = "PASS", "WARN", "FAIL"
FLASH_ATTN_MODES = ("auto", "on", "off")


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    reason: str
    fix: str = ""

    def line(self) -> str:
        return f"{self.status:4}  {self.name}: {self.reason}" + (
            f"  -> {self.fix}" if self.fix and self.status != PASS else ""
        )


@dataclass
class CompatReport:
    checks: list[Check]
    target: ModelInfo | None = None
    drafter: ModelInfo | None = None

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if c.status == FAIL]

    @property
    def warnings(self) -> list[Check]:
        return [c for c in self.checks if c.status == WARN]

    @property
    def ok(self) -> bool:
        return not self.failures

    def get(self, name: str) -> Check | None:
        return next((c for c in self.checks if c.name == name), None)

    @property
    def unreadable(self) -> bool:
        """An input could not be read at all (the CLI's exit code 2)."""
        return any(c.name.endswith("_readable") and c.status == FAIL for c in self.checks)

    def to_dict(self) -> dict:
        return {
            "ok": self.ok,
            "failures": len(self.failures),
            "warnings": len(self.warnings),
            "target": self.target.path if self.target else None,
            "drafter": self.drafter.path if self.drafter else None,
            "checks": [{"name": c.name, "status": c.status, "reason": c.reason, "fix": c.fix} for c in self.checks],
        }

    def summary(self) -> str:
        """One line per failure, for error messages."""
        return "\n".join(f"{c.name}: {c.reason}" + (f" ({c.fix})" if c.fix else "") for c in self.failures)


@functools.lru_cache(maxsize=1)
def _default_build() -> dict:
    # Inspection and checks must work without llama_cpp (CI without the engine, the library).
    try:
        from ..runtime import llama_ffi

        return llama_ffi.build_info()
    except Exception:  # noqa: BLE001 - any failure to load the engine means "assume CPU"
        return {"backend": "cpu"}


def _load(obj, label: str, checks: list[Check]) -> ModelInfo | None:
    if isinstance(obj, ModelInfo):
        return obj
    try:
        return inspect_model(obj)
    except UnreadableModelError as exc:
        checks.append(
            Check(
                f"{label}_readable",
                FAIL,
                str(exc),
                "check the path; a file cut short by a download should be fetched again",
            )
        )
        return None


def check(
    target,
    drafter=None,
    adapters=(),
    kv: KVTypes | None = None,
    *,
    draft_kv: KVTypes | None = None,
    flash_attn: str = "auto",
    budget: int | None = None,
    build: dict | None = None,
    gpus: list[dict] | None = None,
    placement: Placement | None = None,
    draft_placement: Placement | None = None,
    n_gpu_layers: int = -1,
    draft_n_gpu_layers: int = -1,
    n_ctx: int | None = None,
) -> CompatReport:
    """Checks a target alone (drafter=None) or a target/drafter pair, with optional LoRA adapters.

    ``target``/``drafter``/``adapters`` are paths or ModelInfo (adapters may also be
    ``(path, scale)`` pairs as in EngineConfig). ``draft_kv`` None means the drafter uses ``kv``.
    ``gpus`` (llama_ffi.gpus(): name, description, memory_free, ...) adds the ``split_fits`` check:
    what each GPU would hold under ``placement`` / ``draft_placement`` against its free memory.
    """
    if flash_attn not in FLASH_ATTN_MODES:
        raise ValueError(f"flash_attn must be one of {', '.join(FLASH_ATTN_MODES)}")
    build = build if build is not None else _default_build()
    checks: list[Check] = []
    t = _load(target, "target", checks)
    d = _load(drafter, "drafter", checks) if drafter is not None else None
    report = CompatReport(checks, t, d)
    if t is not None:
        checks.append(_target_role(t))
        checks.append(_complete(t, "gguf_complete_target"))
        checks.append(_arch_known(t))
        checks.append(_dimensions(t, "target_dimensions"))
        checks.append(_header_values(t, "header_values_target"))
        checks.append(_kv_types(t, kv, flash_attn, build, "kv_types_target"))
    if d is not None:
        checks.append(_drafter_role(d))
        checks.append(_complete(d, "gguf_complete_drafter"))
        checks.append(_dimensions(d, "drafter_dimensions"))
        checks.append(_header_values(d, "header_values_drafter"))
        if t is not None:
            checks.append(_arch_feeds(t, build))
            checks.append(_hidden_size(t, d))
            checks.append(_captured_layers(t, d))
            checks.append(_target_layer_ids(t, d))
            checks.append(_tokenizer(t, d))
            checks.append(_mask_token(t, d))
        checks.append(_block_size(d, budget))
        checks.append(_rope_theta(t, d))
        checks.append(_sliding_window(d))
        if t is not None:
            checks.extend(_gemma_checks(t, d, build))
            checks.append(_chat_template(t, d))
            if d.dspark:
                checks.append(_dspark(t, d))
        checks.append(_kv_types(d, draft_kv or kv, flash_attn, build, "kv_types_drafter"))
    for a in adapters or ():
        path = a[0] if isinstance(a, tuple) else a
        checks.append(_lora(path, d))
    if (
        n_ctx
        and not gpus
        and t is not None
        and not report.unreadable
        and all(
            x in KV_TYPES
            for x in (
                (kv or KVTypes()).k,
                (kv or KVTypes()).v,
                *((draft_kv or kv or KVTypes()).k, (draft_kv or kv or KVTypes()).v),
            )
        )
    ):
        checks.append(_kv_memory(t, d, n_ctx, kv or KVTypes(), draft_kv or kv or KVTypes()))
    if gpus and t is not None and not report.unreadable:
        checks.append(
            split_plan(
                t.path,
                d.path if d is not None else None,
                gpus,
                placement or Placement(),
                draft_placement,
                n_gpu_layers=n_gpu_layers,
                draft_n_gpu_layers=draft_n_gpu_layers,
                n_ctx=n_ctx,
                kv=kv,
                draft_kv=draft_kv,
                context_length=t.context_length,
            )[1]
        )
    return report


def default_draft_placement(target, placement: Placement, gpus: list[dict], n_gpu_layers: int = -1) -> Placement:
    """All of the drafter on the GPU that holds the target's output (its features and lm_head)."""
    return device_plan.drafter_beside(
        device_plan.plan_model(target, placement, gpus, n_gpu_layers=n_gpu_layers, n_ctx=16)
    )


def split_fits(plans: list, gpus: list[dict], n_ctx: int) -> Check:
    """The ``split_fits`` check over plans from device_plan.plan_pair: what each GPU would hold
    against its free memory, with the numbers and a fix when it cannot."""
    problems = device_plan.fit_problems(plans, gpus)
    if problems:
        return Check(
            "split_fits",
            FAIL,
            "; ".join(problems) + f" (context {n_ctx})",
            "move layers to the other GPUs with --tensor-split (e.g. 1,3), offload fewer with --ngl, or "
            "shrink the KV cache (a smaller --n-ctx, q8_0 K/V)",
        )
    held = "; ".join(line for p in plans for line in p.describe(gpus) if ": CPU:" not in line)
    return Check("split_fits", PASS, f"context {n_ctx}: {held}")


def split_plan(
    target,
    drafter,
    gpus: list[dict],
    placement: Placement,
    draft_placement: Placement | None = None,
    *,
    n_gpu_layers: int = -1,
    draft_n_gpu_layers: int = -1,
    n_ctx: int | None = None,
    kv: KVTypes | None = None,
    draft_kv: KVTypes | None = None,
    context_length: int | None = None,
) -> tuple[list, Check]:
    """What each GPU would hold for a pair (device_plan.plan_pair) and the ``split_fits`` check on it,
    at ``n_ctx`` (default: the target's own context). A placement this machine cannot take is a FAIL
    with no plans; an unreadable file raises UnreadableModelError."""
    kv = kv or KVTypes()
    draft_kv = draft_kv or kv
    ctx = n_ctx or context_length or inspect_model(target).context_length or 4096
    try:
        plans = device_plan.plan_pair(
            target,
            drafter,
            gpus,
            placement,
            draft_placement,
            n_gpu_layers=n_gpu_layers,
            draft_n_gpu_layers=draft_n_gpu_layers,
            n_ctx=ctx,
            kv=(kv.k, kv.v),
            draft_kv=(draft_kv.k, draft_kv.v),
        )
    except ValueError as exc:
        return [], Check(
            "split_fits", FAIL, str(exc), "choose a main GPU and tensor split for the GPUs this machine has"
        )
    return plans, split_fits(plans, gpus, ctx)


# --------------------------------------------------------------------------------------------
# single-model checks


def _target_role(t: ModelInfo) -> Check:
    if t.role == ROLE_TARGET:
        return Check("target_role", PASS, f"{t.arch} model with {t.n_layer} layers")
    if t.role in DRAFTER_ROLES:
        return Check(
            "target_role",
            FAIL,
            f"{_name(t)} is a {t.role} drafter, not a target",
            "pass it as the draft model and choose its target model as the target",
        )
    if t.role == ROLE_LORA:
        return Check("target_role", FAIL, f"{_name(t)} is a LoRA adapter, not a model", "pass it with --adapter")
    return Check(
        "target_role",
        FAIL,
        f"{_name(t)} has no model weights llama.cpp can run ({t.arch})",
        "choose a complete model GGUF",
    )


def _complete(m: ModelInfo, name: str) -> Check:
    if m.data_complete:
        return Check(name, PASS, "all tensor data present")
    need = f"{m.data_expected_bytes:,}" if m.data_expected_bytes else "more"
    return Check(
        name,
        FAIL,
        f"{_name(m)} is truncated: the header promises {need} bytes, the file has {m.size_bytes:,}",
        "download it again (dflash-studio pull resumes and verifies the sha256)",
    )


def _arch_known(t: ModelInfo) -> Check:
    if t.format == "gguf" and t.arch in facts.KNOWN_ARCHS:
        return Check("target_arch_known", PASS, f"llama.cpp knows '{t.arch}'")
    if t.format != "gguf":
        return Check(
            "target_arch_known",
            FAIL,
            f"{_name(t)} is a Hugging Face folder; llama.cpp loads GGUF only",
            "download a GGUF build of the target",
        )
    return Check(
        "target_arch_known",
        FAIL,
        f"architecture '{t.arch}' is unknown to this llama.cpp build",
        "use a model of a supported architecture or update llama.cpp",
    )


def _dimensions(m: ModelInfo, name: str) -> Check:
    if not m.dim_mismatches:
        src = "tensor shapes" if m.dims_from_tensors else "metadata"
        return Check(
            name,
            PASS,
            f"dimensions consistent ({src}): hidden {m.n_embd}, heads {m.n_head}/{m.n_head_kv},"
            f" head_dim {m.head_dim}, n_ff {m.n_ff}",
        )
    return Check(
        name,
        FAIL,
        f"{_name(m)} metadata disagrees with its tensors: " + "; ".join(m.dim_mismatches),
        "re-convert the model; llama.cpp would refuse the tensor shapes",
    )


def _header_values(m: ModelInfo, name: str) -> Check:
    # A value outside llama.cpp's domain (a NaN or negative epsilon) aborts the whole process at
    # the first decode, or computes garbage: refuse the file before it is loaded.
    if not m.value_problems:
        return Check(name, PASS, "header values within llama.cpp's domain")
    return Check(
        name,
        FAIL,
        f"{_name(m)}: " + "; ".join(m.value_problems),
        "the file is damaged or was converted from a broken config.json; fetch or convert it again",
    )


def kv_cache_bytes(m: ModelInfo, n_ctx: int, kv: KVTypes) -> int:
    """The KV cache llama.cpp allocates for ``m`` at ``n_ctx`` tokens, from the headers: sliding
    layers hold at most their window."""
    per_layer = device_plan._kv_bytes_per_token(m, (kv.k, kv.v))
    n_layer = m.n_layer or 0
    pattern = m.sliding_window_pattern if m.sliding_window else None
    sliding = sum(1 for s in (pattern or ())[:n_layer] if s)
    window = min(n_ctx, m.sliding_window or n_ctx)
    return per_layer * ((n_layer - sliding) * n_ctx + sliding * window)


def context_that_fits(t: ModelInfo, d: ModelInfo | None, kv: KVTypes, draft_kv: KVTypes, free: int) -> int:
    """The largest context whose KV caches (target and drafter) and weights fit in ``free`` bytes,
    by the estimate ``kv_memory`` uses (the settings cap their spin box with it)."""
    weights = t.size_bytes + (d.size_bytes if d is not None else 0)
    cost = lambda n: kv_cache_bytes(t, n, kv) + (kv_cache_bytes(d, n, draft_kv) if d is not None else 0)
    if cost(1) + weights > free:
        return 0
    lo, hi = 1, 1
    while cost(hi) + weights <= free and hi < 1 << 40:  # the cost only grows with n: double, then bisect
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if cost(mid) + weights <= free else (lo, mid)
    return lo


def _kv_memory(t: ModelInfo, d: ModelInfo | None, n_ctx: int, kv: KVTypes, draft_kv: KVTypes) -> Check:
    # An explicit context is taken as asked; one far beyond memory made llama.cpp hold most of the
    # machine for a minute before failing. Weights count too: on CPU they live in the same memory.
    from ..common.memory import available_memory

    cache = kv_cache_bytes(t, n_ctx, kv) + (kv_cache_bytes(d, n_ctx, draft_kv) if d is not None else 0)
    weights = t.size_bytes + (d.size_bytes if d is not None else 0)
    free = available_memory()
    gib = lambda n: f"{n / 2**30:,.2f} GiB"
    what = f"context {n_ctx:,} tokens: KV cache {gib(cache)} + weights {gib(weights)}"
    if free is None:
        return Check("kv_memory", PASS, f"{what} (available memory unknown)")
    if cache + weights > free:
        fits = context_that_fits(t, d, kv, draft_kv, free)
        return Check(
            "kv_memory",
            FAIL,
            f"{what}, but only {gib(free)} of memory is available",
            f"choose a context of at most about {fits:,} tokens (--n-ctx, Settings), or 0 for the "
            "model's own capped by memory, or q8_0 K/V",
        )
    return Check("kv_memory", PASS, f"{what}, of {gib(free)} available")


def _kv_types(m: ModelInfo, kv: KVTypes | None, flash_attn: str, build: dict, name: str) -> Check:
    kv = kv or KVTypes()
    who = "target" if name.endswith("target") else "drafter"
    for t in (kv.k, kv.v):
        if t not in KV_TYPES:
            return Check(name, FAIL, f"unknown KV cache type {t!r}", f"choose from {', '.join(KV_TYPES)}")
    if kv.v in QUANTISED_KV and flash_attn == "off":
        return Check(
            name,
            FAIL,
            f"{who}: a quantised V cache ({kv.v}) needs flash attention, and it is off: "
            "llama.cpp refuses to create the context",
            "set flash attention to auto or on, or use an f16 V cache",
        )
    # llama_init_from_model checks the block size only when flash attention may run (auto or
    # on); with it off a quantised K still works through plain matmuls (verified on CPU).
    if flash_attn != "off":
        for label, t, dim in (("K", kv.k, m.head_dim), ("V", kv.v, m.head_dim_v or m.head_dim)):
            blk = facts.kv_block_size(t)
            if blk > 1 and dim and dim % blk:
                return Check(
                    name,
                    FAIL,
                    f"{who}: {label} cache type {t} packs {blk} values per block, which does not "
                    f"divide head_dim {dim}; llama.cpp refuses the context with flash attention",
                    "use an f16 or bf16 cache for this model"
                    + ("" if label == "V" else ", or turn flash attention off"),
                )
    if kv.k != kv.v and (m.arch == "deepseek4" or m.kv_lora_rank):
        return Check(
            name, FAIL, f"{who}: {m.arch} (MLA) needs the same K and V cache types, got {kv}", f"use {kv.k}/{kv.k}"
        )
    notes = []
    if kv.v in QUANTISED_KV and flash_attn == "auto":
        notes.append("flash attention auto: llama.cpp switches it on for a quantised V cache")
    if build.get("backend") == "cuda" and flash_attn != "off":
        fast = facts.cuda_fast_fa_pairs(str(build.get("cmake_args", "")))
        pair = tuple("f16" if x == "f32" else x for x in (kv.k, kv.v))
        if kv.k not in facts.CUDA_FA_TYPES or kv.v not in facts.CUDA_FA_TYPES:
            return Check(
                name,
                WARN,
                f"{who}: CUDA flash attention has no kernel for {kv}; llama.cpp runs that attention on the CPU",
                "use q8_0/q8_0, q4_0/q4_0, f16/f16 or bf16/bf16",
            )
        if fast is not None and pair not in fast:
            return Check(
                name,
                WARN,
                f"{who}: this build has no fast CUDA flash-attention kernel for {kv}; llama.cpp "
                "converts K and V to f16 every step (slow)",
                "use q8_0/q8_0, q4_0/q4_0, f16/f16 or bf16/bf16, or rebuild with -DGGML_CUDA_FA_ALL_QUANTS=ON",
            )
        notes.append("fast CUDA flash-attention kernel compiled")
    elif build.get("backend", "cpu") == "cpu" and flash_attn == "auto":
        notes.append("on CPU flash attention auto resolves to enabled")
    return Check(name, PASS, f"{who}: KV {kv}" + (f" ({'; '.join(notes)})" if notes else ""))


# --------------------------------------------------------------------------------------------
# drafter checks


def _drafter_role(d: ModelInfo) -> Check:
    if d.role in DRAFTER_ROLES and d.format == "gguf":
        kind = "DSpark" if d.dspark else ("DFlash2" if d.dflash2 else "DFlash")
        return Check("drafter_role", PASS, f"{kind} drafter ({d.n_layer} layers)")
    if d.role in DRAFTER_ROLES:
        return Check(
            "drafter_role",
            FAIL,
            f"{_name(d)} is a Hugging Face DFlash checkpoint; llama.cpp loads GGUF only",
            "convert it: dflash-studio convert HF_DIR --target TARGET.gguf --out DRAFT.gguf",
        )
    return Check(
        "drafter_role",
        FAIL,
        f"{_name(d)} is not a DFlash drafter (architecture '{d.arch}', role {d.role})",
        "choose a DFlash or DSpark drafter GGUF (general.architecture = dflash)",
    )


def _arch_feeds(t: ModelInfo, build: dict) -> Check:
    ok, patch = facts.feeds_drafter(t.arch, build)
    if ok:
        return Check(
            "target_arch_feeds_drafter",
            PASS,
            f"'{t.arch}' records layer inputs for the drafter" + (f" (this engine carries {patch})" if patch else ""),
        )
    if patch:
        return Check(
            "target_arch_feeds_drafter",
            FAIL,
            f"this engine was built without {patch}: its llama.cpp cannot export layer inputs from a "
            f"'{t.arch}' target (it would abort with \"layer input tensor is null\")",
            "rebuild the engine with our patches: make engine (packaging/build_engine.sh applies packaging/patches/)",
        )
    return Check(
        "target_arch_feeds_drafter",
        FAIL,
        f"llama.cpp cannot export layer inputs from a '{t.arch}' target (it would abort with "
        '"layer input tensor is null")',
        "use a target of a supported family (Llama, Qwen2/2.5, Qwen3/3.5/3.6, Gemma 3/4, gpt-oss, ...)",
    )


def _hidden_size(t: ModelInfo, d: ModelInfo) -> Check:
    if t.n_embd and d.n_embd and t.n_embd == d.n_embd:
        return Check("hidden_size", PASS, f"both {t.n_embd}")
    return Check(
        "hidden_size",
        FAIL,
        f"drafter hidden size {d.n_embd} != target hidden size {t.n_embd}",
        "choose the drafter trained for this target",
    )


def _captured_layers(t: ModelInfo, d: ModelInfo) -> Check:
    n_ids = len(d.target_layers or ())
    if not d.fc_in:
        return Check(
            "captured_layers",
            FAIL,
            "the drafter has no fc.weight, so it cannot read target features",
            "re-convert the drafter",
        )
    if not t.n_embd or d.fc_in % t.n_embd:
        return Check(
            "captured_layers",
            FAIL,
            f"fc.weight width {d.fc_in} is not a multiple of the target hidden size {t.n_embd}",
            "choose the drafter trained for this target",
        )
    captured = d.fc_in // t.n_embd
    if captured != n_ids:
        return Check(
            "captured_layers",
            FAIL,
            f"fc.weight reads {captured} target layers ({d.fc_in}/{t.n_embd}) but target_layers lists {n_ids}",
            "re-convert the drafter with its config.json's target_layer_ids",
        )
    return Check("captured_layers", PASS, f"{captured} captured layers = fc width {d.fc_in} / hidden {t.n_embd}")


def _target_layer_ids(t: ModelInfo, d: ModelInfo) -> Check:
    ids = list(d.target_layers or ())
    if not ids:
        return Check(
            "target_layer_ids",
            FAIL,
            "the drafter lists no target layers (dflash.target_layers); llama.cpp refuses to load it",
            "re-convert it with dflash-studio convert, which fills missing target_layer_ids the way the "
            "reference model does (build_target_layer_ids)",
        )
    derived = next((n for n in d.notes if n.startswith("target_layer_ids absent")), None)
    return _target_layer_range(t, ids, f"{derived}; " if derived else "")


def _target_layer_range(t: ModelInfo, ids: list[int], prefix: str) -> Check:
    n = t.n_layer or 0
    limit = n if t.arch in facts.FINAL_LAYER_INPUT else n - 1
    bad = [i for i in ids if i < 0 or i > limit]
    if bad:
        return Check(
            "target_layer_ids",
            FAIL,
            f"target layer ids {bad} are out of range for a {n}-layer target (largest usable id {limit})",
            "choose the drafter trained for this target (a smaller model's drafter reads fewer layers)",
        )
    if len(set(ids)) != len(ids):
        return Check(
            "target_layer_ids", WARN, f"{prefix}target layer ids repeat: {ids}", "check the drafter's conversion"
        )
    return Check("target_layer_ids", PASS, f"{prefix}ids {ids} (HF ids + 1) all below the target's {n} layers")


def _tokenizer(t: ModelInfo, d: ModelInfo) -> Check:
    if t.vocab_size and d.vocab_size and t.vocab_size != d.vocab_size:
        return Check(
            "tokenizer",
            FAIL,
            f"vocabulary sizes differ: target {t.vocab_size}, drafter {d.vocab_size}",
            "choose the drafter trained for this target's tokenizer",
        )
    if t.tokens_hash and d.tokens_hash and t.tokens_hash != d.tokens_hash:
        return Check(
            "tokenizer",
            FAIL,
            "the token lists differ (different tokenizers with the same size)",
            "choose the drafter trained for this target's tokenizer",
        )
    if not (t.tokens_hash and d.tokens_hash):
        return Check(
            "tokenizer",
            WARN,
            f"token lists cannot be compared (vocab {t.vocab_size} / {d.vocab_size})",
            "convert the drafter to GGUF against this target to carry its tokenizer",
        )
    if (t.bos_token_id, t.eos_token_id) != (d.bos_token_id, d.eos_token_id):
        return Check(
            "tokenizer",
            WARN,
            f"same tokens but bos/eos differ: target {t.bos_token_id}/{t.eos_token_id}, "
            f"drafter {d.bos_token_id}/{d.eos_token_id} (base vs instruct build?)",
            "convert the drafter against the exact target you run",
        )
    return Check("tokenizer", PASS, f"identical token lists ({t.vocab_size} tokens, {t.tokenizer_model}), same bos/eos")


def _mask_token(t: ModelInfo, d: ModelInfo) -> Check:
    mid = d.mask_token_id
    if mid is None:
        return Check(
            "mask_token",
            FAIL,
            "the drafter has no mask token (tokenizer.ggml.mask_token_id); "
            "llama_vocab_mask returns -1 and drafting breaks",
            "re-convert with the dflash_config mask_token_id",
        )
    vocab = min(x for x in (t.vocab_size, d.vocab_size) if x) if (t.vocab_size or d.vocab_size) else None
    if vocab is not None and not 0 <= mid < vocab:
        return Check(
            "mask_token",
            FAIL,
            f"mask token id {mid} is outside the vocabulary ({vocab} tokens)",
            "re-convert with the right mask_token_id",
        )
    if mid in (t.bos_token_id, t.eos_token_id):
        return Check("mask_token", WARN, f"mask token id {mid} is also bos/eos", "check the drafter's dflash_config")
    shown = f" {d.mask_token!r}" if d.mask_token else ""
    return Check("mask_token", PASS, f"id {mid}{shown} inside the vocabulary")


def _block_size(d: ModelInfo, budget: int | None) -> Check:
    bs = d.block_size if d.block_size is not None else 16  # llama.cpp's default
    if bs < 2:
        return Check("block_size", FAIL, f"block size {bs} leaves no room for draft tokens", "re-convert the drafter")
    anchor = d.dspark and d.sample_from_anchor
    most = bs if anchor else bs - 1
    src = "" if d.block_size is not None else " (not stored; llama.cpp assumes 16)"
    if budget is not None and budget > most:
        return Check(
            "block_size",
            WARN,
            f"budget {budget} exceeds what block size {bs} drafts per step ({most}); it is clamped to {most}",
            f"use a budget of at most {most}",
        )
    return Check("block_size", PASS, f"block size {bs}{src}: up to {most} draft tokens per step")


def _rope_theta(t: ModelInfo | None, d: ModelInfo) -> Check:
    if d.rope_theta is None:
        return Check(
            "rope_theta",
            FAIL,
            "the drafter states no rope theta; llama.cpp would silently use 10000 "
            "(a wrong theta collapses acceptance on long contexts)",
            "re-convert; take rope_theta from config.json (top level or rope_parameters)",
        )
    if t is not None and t.rope_theta and abs(t.rope_theta - d.rope_theta) > 1e-6 * t.rope_theta:
        return Check(
            "rope_theta",
            WARN,
            f"drafter rope theta {d.rope_theta:g} differs from the target's {t.rope_theta:g}",
            "check the drafter's config.json (a nested rope_parameters value may have been missed)",
        )
    return Check("rope_theta", PASS, f"{d.rope_theta:g}")


def _sliding_window(d: ModelInfo) -> Check:
    lt = d.layer_types or ()
    if d.sliding_window:
        pat = d.sliding_window_pattern
        if not pat:
            return Check(
                "sliding_window",
                FAIL,
                f"sliding window {d.sliding_window} set without a per-layer pattern; "
                "llama.cpp refuses to load the drafter",
                "re-convert with config.json's layer_types",
            )
        if d.n_layer and len(pat) != d.n_layer:
            return Check(
                "sliding_window",
                FAIL,
                f"sliding-window pattern has {len(pat)} entries for {d.n_layer} layers",
                "re-convert with config.json's layer_types",
            )
        return Check(
            "sliding_window",
            PASS,
            f"{sum(pat)}/{len(pat)} layers slide (window {d.sliding_window}), honoured by llama.cpp",
        )
    if any(x == "sliding_attention" for x in lt):
        # Settled against the reference (docs/converter-peer.md): z-lab dflash/model.py reads
        # config.sliding_window, which transformers' Qwen3Config drops unless use_sliding_window.
        return Check(
            "sliding_window",
            WARN,
            f"layer_types marks {sum(x == 'sliding_attention' for x in lt)}/{len(lt)} "
            "layers as sliding but use_sliding_window is off: they run as full "
            "attention, as in the reference model (transformers' Qwen3Config drops "
            "the window) and in llama.cpp's converter",
            "set use_sliding_window and sliding_window in config.json if the drafter was trained that way",
        )
    return Check("sliding_window", PASS, "no sliding-window layers")


#: Gemma targets scale token embeddings by sqrt(n_embd) inside their graph (not in token_embd, which
#: the drafter shares); field report 004: a drafter must follow that scale and the target's final
#: logit softcap, and must not apply the scale twice.
GEMMA_ARCHS = ("gemma3", "gemma4")


def _gemma_checks(t: ModelInfo, d: ModelInfo, build: dict) -> list[Check]:
    if t.arch not in GEMMA_ARCHS or not t.n_embd:
        return []
    patched, patch = facts.feeds_drafter(t.arch, build)
    # patch 0003 fills in what the drafter leaves out, from the target it reads through ctx_other;
    # llama.cpp keeps that link only for a drafter without its own token_embd or output tensor
    own_tables = {"token_embd.weight", "output.weight"} <= set(d.tensor_names)
    engine_scales = t.arch == "gemma3" and patched and not own_tables
    want = math.sqrt(t.n_embd)
    # the embedding scale: the drafter's own key wins; 0003 supplies the target's for Gemma 3 when absent
    if d.embedding_scale:
        if abs(d.embedding_scale - want) <= 1e-3 * want:
            scale = Check(
                "gemma_embedding_scale",
                PASS,
                f"the drafter states sqrt({t.n_embd}) = {want:.3f} (dflash.embedding_scale); applied once",
            )
        else:
            scale = Check(
                "gemma_embedding_scale",
                WARN,
                f"the drafter scales its token embeddings by {d.embedding_scale:g}, the target by "
                f"sqrt({t.n_embd}) = {want:.3f}: the drafter's key wins",
                "re-convert the drafter with input_embedding_scale = sqrt(hidden size) unless it was "
                "trained with this scale",
            )
    elif engine_scales:
        scale = Check(
            "gemma_embedding_scale",
            PASS,
            f"the drafter states no scale: the engine ({patch}) applies the target's "
            f"sqrt({t.n_embd}) = {want:.3f} to its token embeddings, once",
        )
    else:
        why = (
            "it carries its own token_embd and output, so llama.cpp gives it no link to the target's scale"
            if own_tables and patched
            else "this engine applies none"
        )
        scale = Check(
            "gemma_embedding_scale",
            FAIL if t.arch == "gemma3" else WARN,
            f"the drafter states no embedding scale and {why}: its token embeddings would be "
            f"{want:.0f}x smaller than the target's (sqrt({t.n_embd}))",
            "convert the drafter with input_embedding_scale in its dflash_config"
            + (f", or rebuild the engine with {patch} (make engine)" if patch and not patched else ""),
        )
    # the final logit softcap. llama.cpp caps a drafter's logits only for DFlash2 (the selector's
    # scores); DFlash and DSpark drafts are read uncapped. tanh keeps the order, so greedy drafts do
    # not change either way; sampled drafts and the p_min cut-off do.
    tcap, dcap = t.final_logit_softcapping, d.final_logit_softcapping
    if not tcap and not dcap:
        cap = Check("gemma_logit_softcap", PASS, "the target has no final logit softcap, nor has the drafter")
    elif not d.dflash2:
        cap = Check(
            "gemma_logit_softcap",
            PASS,
            (f"the target caps its logits at {tcap:g}; " if tcap else "the target has no final logit softcap; ")
            + "llama.cpp reads a DFlash drafter's logits uncapped: greedy drafts are the same, "
            "sampled drafts and p_min see uncapped logits",
        )
    elif dcap and tcap and abs(dcap - tcap) > 1e-6 * tcap:
        cap = Check(
            "gemma_logit_softcap",
            WARN,
            f"the drafter caps its logits at {dcap:g}, the target at {tcap:g}",
            "re-convert the drafter with the target's final_logit_softcapping",
        )
    elif tcap and not dcap and not engine_scales:
        cap = Check(
            "gemma_logit_softcap",
            WARN,
            f"the target caps its logits at {tcap:g}, the drafter at none: "
            "greedy drafts are unchanged, sampled drafts are not",
            "convert the drafter with final_logit_softcapping",
        )
    elif tcap:
        cap = Check(
            "gemma_logit_softcap",
            PASS,
            f"capped at {dcap or tcap:g} like the target"
            + ("" if dcap else f" (the engine applies the target's, {patch})"),
        )
    else:
        cap = Check(
            "gemma_logit_softcap",
            PASS,
            f"the target has no final logit softcap; the drafter's {dcap:g} changes sampled drafts only",
        )
    return [scale, cap]


def _chat_template(t: ModelInfo, d: ModelInfo) -> Check:
    if t.has_chat_template == d.has_chat_template:
        if t.chat_template_hash and d.chat_template_hash and t.chat_template_hash != d.chat_template_hash:
            return Check(
                "chat_template",
                WARN,
                "target and drafter carry different chat templates "
                "(the drafter was converted against another build of the target)",
                "re-convert the drafter against this target",
            )
        kind = "instruct (chat template)" if t.has_chat_template else "base (no chat template)"
        return Check("chat_template", PASS, f"both {kind}")
    if not t.has_chat_template:
        return Check(
            "chat_template",
            WARN,
            "the target has no chat template (a base model?) but the drafter was built "
            "for an instruct target: acceptance will be low",
            "use the instruct build of the target",
        )
    return Check(
        "chat_template",
        WARN,
        "the target is an instruct model but the drafter carries no chat template (built for a base model?)",
        "use the drafter built for the instruct target",
    )


def _dspark(t: ModelInfo, d: ModelInfo) -> Check:
    if d.markov_vocab and t.vocab_size and d.markov_vocab != t.vocab_size:
        return Check(
            "dspark_heads",
            FAIL,
            f"Markov head covers {d.markov_vocab} tokens, the target has {t.vocab_size}",
            "choose the DSpark drafter trained for this target",
        )
    conf = "with" if d.has_confidence_head else "without"
    return Check(
        "dspark_heads",
        PASS,
        f"Markov head rank {d.markov_rank}, {conf} a confidence head"
        + ("" if d.has_confidence_head else " (p_min must stay 0)"),
    )


def _lora(path, d: ModelInfo | None) -> Check:
    try:
        a = path if isinstance(path, ModelInfo) else inspect_model(path)
    except UnreadableModelError as exc:
        return Check("lora_adapter", FAIL, str(exc), "check the adapter path")
    label = _name(a)
    if a.role != ROLE_LORA:
        return Check("lora_adapter", FAIL, f"{label} is not a LoRA adapter (role {a.role})", "choose a LoRA GGUF")
    if a.format != "gguf":
        return Check(
            "lora_adapter",
            FAIL,
            f"{label} is a PEFT folder; llama.cpp loads GGUF adapters only",
            "convert it with llama.cpp's convert_lora_to_gguf.py",
        )
    if d is None:
        return Check(
            "lora_adapter",
            FAIL,
            f"{label}: LoRA adapters apply to the drafter, and no drafter is given",
            "pass a drafter",
        )
    if a.adapter_type != "lora":
        return Check("lora_adapter", FAIL, f"{label}: adapter.type is {a.adapter_type!r}, not 'lora'", "")
    if a.arch != d.arch:
        return Check(
            "lora_adapter",
            FAIL,
            f"{label} is for architecture '{a.arch}', the drafter is '{d.arch}'",
            "use an adapter trained on this drafter",
        )
    if a.lora_alpha is None:
        return Check("lora_adapter", FAIL, f"{label} has no adapter.lora.alpha; llama.cpp refuses it", "re-export it")
    if not a.data_complete:
        return Check("lora_adapter", FAIL, f"{label} is truncated", "download it again")
    if not a.lora_pairs:
        return Check("lora_adapter", FAIL, f"{label} holds no lora_a/lora_b tensors", "re-export it")
    for base, parts in sorted(a.lora_pairs.items()):
        if "a" not in parts or "b" not in parts:
            return Check(
                "lora_adapter", FAIL, f"{label}: {base} lacks its lora_{'b' if 'a' in parts else 'a'} half", ""
            )
        shape = d.tensor_shapes.get(base)
        if shape is None:
            shared = (
                " (the lm_head is the target's and cannot be adapted)"
                if base in ("output.weight", "token_embd.weight")
                else ""
            )
            return Check(
                "lora_adapter",
                FAIL,
                f"{label}: tensor {base} does not exist in the drafter{shared}",
                "use an adapter trained on this drafter",
            )
        sa, sb = parts["a"], parts["b"]  # numpy order: a (rank, in), b (out, rank); base (out, in)
        if len(shape) != 2 or len(sa) != 2 or len(sb) != 2 or sa[1] != shape[1] or sb[0] != shape[0] or sa[0] != sb[1]:
            return Check(
                "lora_adapter",
                FAIL,
                f"{label}: {base} is {shape} in the drafter but the adapter has a {sa}, b {sb}",
                "use an adapter trained on this drafter",
            )
    return Check(
        "lora_adapter", PASS, f"{label}: {len(a.lora_pairs)} tensors match the drafter (alpha {a.lora_alpha:g})"
    )


def _name(m: ModelInfo) -> str:
    return os.path.basename(str(m.path).rstrip("/")) or str(Path(m.path))
