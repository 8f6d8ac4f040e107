"""What each device would hold: a model's weights and KV cache per GPU under a placement, from
the GGUF header alone, following llama.cpp's own assignment (src/llama-model.cpp load_tensors):

* the input embedding stays on the CPU; layer il goes to the GPU whose cumulative share first
  exceeds (il - i_gpu_start) / act_gpu_layers, where the shares are the tensor split or, when none
  is given, each GPU's free memory; the output layer counts as layer n_layer (a tied output copies
  token_embd there); layers below i_gpu_start = n_layer - n_gpu_layers stay on the CPU;
* split "none" puts every offloaded layer on main_gpu;
* split "row" spreads each layer's matrices over the GPUs by the shares and keeps the rest (norms,
  KV, output) on main_gpu -- an approximation of llama.cpp's split buffers, stated as such;
* the KV cache of a layer sits with the layer: n_ctx x (K + V) bytes, every layer at full context
  (this engine keeps full-size sliding-window caches).

Compute buffers are not modelled: the fit check keeps a margin per GPU for them.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..common.placement import Placement
from .gguf_header import read_header
from .modelinfo import inspect_model

CPU = -1
#: room kept free on each GPU for llama.cpp's compute buffers and the CUDA context
MARGIN_BYTES = 768 << 20
_BLK = re.compile(r"^blk\.(\d+)\.")


@dataclass
class Holding:
    weights: int = 0
    kv: int = 0
    layers: list[int] = field(default_factory=list)
    output: bool = False

    @property
    def total(self) -> int:
        return self.weights + self.kv


@dataclass
class ModelPlan:
    name: str
    placement: Placement
    holdings: dict[int, Holding]  # device index (CPU = -1) -> what it holds
    output_device: int

    def describe(self, gpus: list[dict]) -> list[str]:
        out = []
        for dev in sorted(self.holdings):
            h = self.holdings[dev]
            if not (h.total or h.layers or h.output):
                continue
            label = "CPU" if dev == CPU else f"GPU{dev} ({gpus[dev].get('description') or gpus[dev].get('name')})"
            what = _layer_ranges(h.layers) + (" + output" if h.output else "")
            what = what or ("input embedding" if dev == CPU else "its share of every layer's matrices")
            out.append(f"{self.name}: {label}: {what}; weights {_gib(h.weights)} + KV {_gib(h.kv)}")
        return out


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"


def _layer_ranges(layers: list[int]) -> str:
    if not layers:
        return ""
    runs, start, prev = [], layers[0], layers[0]
    for x in layers[1:] + [None]:
        if x is not None and x == prev + 1:
            prev = x
            continue
        runs.append(f"{start}" if start == prev else f"{start}-{prev}")
        if x is not None:
            start = prev = x
    return "layers " + ",".join(runs)


def _kv_bytes_per_token(info, kv: tuple[str, str]) -> int:
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    def per_elem(t: str) -> float:
        block, size = GGML_QUANT_SIZES[GGMLQuantizationType[t.upper()]]
        return size / block

    n_kv = info.n_head_kv or info.n_head or 0
    k = n_kv * (info.head_dim or 0)
    v = n_kv * (info.head_dim_v or info.head_dim or 0)
    return int(k * per_elem(kv[0]) + v * per_elem(kv[1]))


def plan_model(
    path: str | Path,
    placement: Placement,
    gpus: list[dict],
    *,
    n_gpu_layers: int = -1,
    n_ctx: int = 4096,
    kv: tuple[str, str] = ("f16", "f16"),
    name: str | None = None,
) -> ModelPlan:
    info = inspect_model(path)
    h = read_header(path)
    n_layer = info.n_layer or 0
    layer_bytes = [0] * n_layer
    layer_matrix = [0] * n_layer
    other = {"input": 0, "output": 0}
    for t in h.tensors.values():
        n = t.n_bytes or 0
        m = _BLK.match(t.name)
        if m and int(m.group(1)) < n_layer:
            il = int(m.group(1))
            layer_bytes[il] += n
            if len(t.shape) >= 2:
                layer_matrix[il] += n
        elif t.name == "token_embd.weight":
            other["input"] += n
        else:
            other["output"] += n  # output, output_norm, the drafter's fc / norms
    if "output.weight" not in h.tensors and "token_embd.weight" in h.tensors:
        other["output"] += h.tensors["token_embd.weight"].n_bytes or 0  # tied: duplicated to the output device
    kv_layer = _kv_bytes_per_token(info, kv) * n_ctx

    ngl = n_layer + 1 if n_gpu_layers < 0 else n_gpu_layers
    devs = [] if not gpus else ([placement.main_gpu] if placement.split_mode == "none" else list(range(len(gpus))))
    if devs and max(devs) >= len(gpus):
        raise ValueError(f"main GPU {placement.main_gpu} does not exist: {len(gpus)} GPU(s)")
    i_gpu_start = max(n_layer - ngl, 0)
    act = min(ngl, n_layer + 1) if devs else 0
    shares = (
        list(placement.tensor_split[: len(devs)]) if placement.tensor_split and placement.split_mode != "none" else []
    )
    if shares and sum(shares) <= 0:
        raise ValueError(f"the tensor split {placement.tensor_split} gives the {len(devs)} GPU(s) nothing")
    if not shares:
        shares = [float(gpus[d].get("memory_free") or 1) for d in devs]
    shares += [0.0] * (len(devs) - len(shares))
    cum, acc = [], 0.0
    for s in shares:
        acc += s
        cum.append(acc / sum(shares)) if sum(shares) else cum.append(1.0)

    def device_of(il: int) -> int:
        if not devs or il < i_gpu_start or il - i_gpu_start >= act:
            return CPU
        return devs[min(bisect.bisect_right(cum, (il - i_gpu_start) / act), len(devs) - 1)]

    holdings: dict[int, Holding] = {}

    def hold(dev: int) -> Holding:
        return holdings.setdefault(dev, Holding())

    hold(CPU).weights += other["input"]
    row = placement.split_mode == "row" and len(devs) > 1
    for il in range(n_layer):
        dev = device_of(il)
        if row and dev != CPU:
            home = hold(placement.main_gpu)
            home.layers.append(il)
            home.weights += layer_bytes[il] - layer_matrix[il]
            home.kv += kv_layer
            for d, s in zip(devs, shares):
                hold(d).weights += int(layer_matrix[il] * s / sum(shares))
        else:
            hd = hold(dev)
            hd.layers.append(il)
            hd.weights += layer_bytes[il]
            hd.kv += kv_layer
    out_dev = placement.main_gpu if row else device_of(n_layer)
    hold(out_dev).weights += other["output"]
    hold(out_dev).output = True
    return ModelPlan(name or Path(path).name, placement, holdings, out_dev)


def drafter_beside(target_plan: ModelPlan) -> Placement:
    """All of a drafter on the GPU that holds the target's output (its features and lm_head)."""
    if target_plan.output_device < 0:
        return Placement()
    return Placement(split_mode="none", main_gpu=target_plan.output_device)


def plan_pair(
    target,
    drafter,
    gpus: list[dict],
    placement: Placement,
    draft_placement: Placement | None = None,
    *,
    n_gpu_layers: int = -1,
    draft_n_gpu_layers: int = -1,
    n_ctx: int = 4096,
    kv: tuple[str, str] = ("f16", "f16"),
    draft_kv: tuple[str, str] | None = None,
) -> list[ModelPlan]:
    """The target's plan and, with a drafter, the drafter's: under ``draft_placement``, or (None)
    beside the target's output when there are several GPUs. Each file is planned once."""
    plans = [plan_model(target, placement, gpus, n_gpu_layers=n_gpu_layers, n_ctx=n_ctx, kv=kv, name="target")]
    if drafter is not None:
        dp = draft_placement or (drafter_beside(plans[0]) if len(gpus) > 1 else Placement())
        plans.append(
            plan_model(
                drafter, dp, gpus, n_gpu_layers=draft_n_gpu_layers, n_ctx=n_ctx, kv=draft_kv or kv, name="drafter"
            )
        )
    return plans


def fit_problems(plans: list[ModelPlan], gpus: list[dict], margin: int = MARGIN_BYTES) -> list[str]:
    """Per GPU, what the plans put there against its free memory: one sentence per GPU that
    cannot hold it, with the numbers."""
    problems = []
    for dev, g in enumerate(gpus):
        parts = [(p.name, p.holdings[dev]) for p in plans if dev in p.holdings]
        need = sum(h.total for _, h in parts)
        free = int(g.get("memory_free") or 0)
        if parts and need + margin > free:
            what = " + ".join(f"{name} {_gib(h.weights)} weights, {_gib(h.kv)} KV" for name, h in parts)
            problems.append(
                f"GPU{dev} ({g.get('description') or g.get('name')}) would hold {what} = {_gib(need)} "
                f"(+{_gib(margin)} for compute buffers) but has {_gib(free)} free"
            )
    return problems
