"""A GGUF target (llama, qwen2 or qwen3 architecture) as a PyTorch model whose math is llama.cpp's graph.

The weights are read from the GGUF and dequantised (``gguf.quants.dequantize``: Q4_1, Q8_0, ...),
so the features a drafter learns from are the ones llama.cpp computes at run time (up to
llama.cpp's quantised dot products). Imports torch, numpy and gguf only (the GPU machine has no
llama.cpp).

llama.cpp's graphs (``src/models/llama.cpp``, ``qwen2.cpp``, ``qwen3.cpp``), per layer:
``n = rms_norm(x) * attn_norm``; ``q = Wq n``, ``k = Wk n``, ``v = Wv n`` (qwen2: plus the biases
``attn_q/k/v.bias``, build_qkv; qwen3: then per-head RMS norms ``attn_q_norm`` / ``attn_k_norm``); RoPE; GQA attention scaled by ``1/sqrt(head_dim)``;
``h = x + Wo attn``; ``x' = h + Wdown(silu(Wgate m) * Wup m)``, ``m = rms_norm(h) * ffn_norm``;
final ``rms_norm * output_norm`` and ``output`` (or ``token_embd`` when the file has no output).

RoPE: llama uses the NORM type (rotates adjacent pairs ``2i, 2i+1``) on Q/K rows that the
converter permuted from Hugging Face's half-split order; qwen2 and qwen3 use NEOX (pairs ``i, i + d/2``)
on unpermuted rows, with their own base (``{arch}.rope.freq_base``: 1e6 for Qwen2.5). Undoing llama's permutation here and rotating NEOX-style computes exactly the same
numbers as NORM on the permuted rows (the same pairs, the same angles), so one rotation serves both.
``rope_freqs`` (llama-3 long-context factors) divide the frequencies as llama.cpp does.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .target_model import MLP, RMSNorm, apply_rope

SUPPORTED_ARCHS = ("llama", "qwen2", "qwen3")
#: SDPA's enable_gqa (torch >= 2.5) maps query heads to KV heads without copying the cache.
_HAS_GQA = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 5)


@dataclass
class GGUFTargetConfig:
    arch: str
    vocab_size: int
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_ff: int
    rope_theta: float
    rms_eps: float
    n_ctx: int
    qk_norm: bool
    tied: bool
    qkv_bias: bool = False  # qwen2: Q, K and V projections carry biases

    def to_dict(self) -> dict:
        return asdict(self)


class TargetAttention(nn.Module):
    def __init__(self, c: GGUFTargetConfig):
        super().__init__()
        self.c = c
        self.q_proj = nn.Linear(c.n_embd, c.n_head * c.head_dim, bias=c.qkv_bias)
        self.k_proj = nn.Linear(c.n_embd, c.n_head_kv * c.head_dim, bias=c.qkv_bias)
        self.v_proj = nn.Linear(c.n_embd, c.n_head_kv * c.head_dim, bias=c.qkv_bias)
        self.o_proj = nn.Linear(c.n_head * c.head_dim, c.n_embd, bias=False)
        if c.qk_norm:
            self.q_norm = RMSNorm(c.head_dim, c.rms_eps)
            self.k_norm = RMSNorm(c.head_dim, c.rms_eps)

    def forward(self, x, cos, sin, mask, cache=None, pos0: int = 0):
        """x (B, T, d); cos/sin (B, 1, T, d/2); mask (B, 1, T, keys) boolean or None (causal);
        cache: (K, V) tensors (B, Hkv, Lmax, D) written at pos0 .. pos0 + T (cache slots, not positions)."""
        B, T, _ = x.shape
        c = self.c
        q = self.q_proj(x).view(B, T, c.n_head, c.head_dim)
        k = self.k_proj(x).view(B, T, c.n_head_kv, c.head_dim)
        if c.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = apply_rope(q.transpose(1, 2), cos, sin), apply_rope(k.transpose(1, 2), cos, sin)
        v = self.v_proj(x).view(B, T, c.n_head_kv, c.head_dim).transpose(1, 2)
        if cache is not None and isinstance(pos0, torch.Tensor):
            return self._decode_static(q, k, v, cache, pos0, mask, x.dtype)
        if cache is not None:
            kc, vc = cache
            kc[:, :, pos0 : pos0 + T] = k.to(kc.dtype)
            vc[:, :, pos0 : pos0 + T] = v.to(vc.dtype)
            k, v = kc[:, :, : pos0 + T], vc[:, :, : pos0 + T]
            q = q.to(kc.dtype)
        kw: dict = {}
        if c.n_head != c.n_head_kv:
            if _HAS_GQA:
                kw["enable_gqa"] = True
            else:
                r = c.n_head // c.n_head_kv
                k, v = k.repeat_interleave(r, dim=1), v.repeat_interleave(r, dim=1)
        if mask is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, **kw)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, **kw)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, c.n_head * c.head_dim).to(x.dtype))

    def _decode_static(self, q, k, v, cache, slot, mask, dtype):
        """One token per row written at cache slot ``slot`` (a device tensor), attending over the
        whole cache under ``mask`` (B, 1, 1, Lmax): every step has the same shapes, so a CUDA graph
        can replay it. GQA without copying the cache: the query heads sharing a KV head become
        that head's query rows (llama.cpp's mapping: query head h reads KV head h // r)."""
        B, H, _, D = q.shape
        c = self.c
        kc, vc = cache
        kc.index_copy_(2, slot.view(1), k.to(kc.dtype))
        vc.index_copy_(2, slot.view(1), v.to(vc.dtype))
        r = c.n_head // c.n_head_kv
        qg = q.to(kc.dtype).reshape(B, c.n_head_kv, r, D)
        y = F.scaled_dot_product_attention(qg, kc, vc, attn_mask=mask)  # (B, Hkv, r, D)
        return self.o_proj(y.reshape(B, 1, H * D).to(dtype))


class TargetBlock(nn.Module):
    def __init__(self, c: GGUFTargetConfig):
        super().__init__()
        self.input_layernorm = RMSNorm(c.n_embd, c.rms_eps)
        self.self_attn = TargetAttention(c)
        self.post_attention_layernorm = RMSNorm(c.n_embd, c.rms_eps)
        self.mlp = MLP(c.n_embd, c.n_ff)

    def forward(self, x, cos, sin, mask, cache=None, pos0=0):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask, cache, pos0)
        return x + self.mlp(self.post_attention_layernorm(x))


class GGUFTarget(nn.Module):
    """The target as llama.cpp runs it. ``forward(tokens, layer_inputs=ids)`` also returns the
    inputs of the given layers (llama.cpp's ``t_layer_inp``: what ``dflash.target_layers`` names)."""

    inv_freq: torch.Tensor  # a buffer (register_buffer)

    def __init__(self, c: GGUFTargetConfig, freq_factors: torch.Tensor | None = None):
        super().__init__()
        self.c = c
        self.embed_tokens = nn.Embedding(c.vocab_size, c.n_embd)
        self.layers = nn.ModuleList(TargetBlock(c) for _ in range(c.n_layer))
        self.norm = RMSNorm(c.n_embd, c.rms_eps)
        if not c.tied:
            self.lm_head = nn.Linear(c.n_embd, c.vocab_size, bias=False)
        inv = c.rope_theta ** (-torch.arange(0, c.head_dim, 2, dtype=torch.float32) / c.head_dim)
        if freq_factors is not None:
            inv = inv / freq_factors.float()
        self.register_buffer("inv_freq", inv, persistent=False)

    @property
    def lm_head_weight(self):
        return self.embed_tokens.weight if self.c.tied else self.lm_head.weight

    def rope(self, positions: torch.Tensor):
        """cos, sin (B, 1, T, d/2) for integer positions (B, T)."""
        ang = positions.float()[..., None] * self.inv_freq
        return ang.cos()[:, None], ang.sin()[:, None]

    def forward(
        self,
        tokens,
        layer_inputs=(),
        logits: bool = True,
        positions=None,
        mask=None,
        caches=None,
        pos0: int = 0,
        last_only: bool = False,
        full: bool = False,
    ):
        """Logits (or, with ``logits=False``, the final normed hidden state) and the inputs of the
        layers in ``layer_inputs``. Features only (``logits=False``) stop after the last layer asked
        for, and the hidden state returned is then that layer's input normed, not the final one;
        ``full=True`` runs every layer, for callers that project the hidden state through the head."""
        B, T = tokens.shape
        if positions is None:
            positions = torch.arange(pos0, pos0 + T, device=tokens.device)[None].expand(B, T)
        cos, sin = self.rope(positions)
        x = self.embed_tokens(tokens)
        feats = {}
        stop = max(layer_inputs) if (layer_inputs and not logits and not full) else self.c.n_layer
        for i, layer in enumerate(self.layers):
            if i in layer_inputs:
                feats[i] = x
            if i >= stop:  # features only: the layers after the last one asked for are not needed
                break
            x = layer(x, cos, sin, mask, None if caches is None else caches[i], pos0)
        if self.c.n_layer in layer_inputs:
            feats[self.c.n_layer] = x
        if last_only:
            x = x[:, -1:]
        h = self.norm(x)
        out = F.linear(h, self.lm_head_weight) if logits else h
        return out, [feats[i] for i in layer_inputs]

    @torch.no_grad()
    def generate(
        self,
        prompts: list[list[int]],
        max_new: int,
        stop_ids,
        pad_id: int = 0,
        exact: bool = False,
        graph: bool = False,
        temperature=None,
        seed: int | None = None,
    ) -> list[list[int]]:
        """Greedy responses to a batch of prompts of different lengths (left-padded, one static KV
        cache); each response ends with its stop token, or after ``max_new`` tokens.

        ``exact``: float32 throughout with TF32 off (llama.cpp's precision; slower on a GPU); else
        bf16 on CUDA (float32 on the CPU either way). ``graph`` (CUDA): the decode step is captured
        once as a CUDA graph and replayed, so a step costs no Python or launch overhead; the host
        looks at the stop flags every 16 steps only.

        ``temperature``: None (greedy), a number, or one per prompt; a row at 0 stays greedy. Sampling
        is Gumbel-max on the device (argmax of logits / T plus Gumbel noise: the softmax sample,
        with no host round trip, so it lives inside the captured graph too); ``seed`` seeds it."""
        tf32 = torch.backends.cuda.matmul.allow_tf32
        if exact:
            torch.backends.cuda.matmul.allow_tf32 = False
        try:
            return self._generate(prompts, max_new, stop_ids, pad_id, exact, graph, temperature, seed)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = tf32

    def _generate(self, prompts, max_new, stop_ids, pad_id, exact, graph, temperature=None, seed=None):
        dev = self.embed_tokens.weight.device
        B = len(prompts)
        temp = None
        if temperature is not None:
            t = [float(temperature)] * B if isinstance(temperature, (int, float)) else [float(x) for x in temperature]
            if len(t) != B or any(not (x >= 0) for x in t):
                raise ValueError("temperature: one value >= 0, or one per prompt")
            if any(x > 0 for x in t):
                temp = torch.tensor(t, device=dev, dtype=torch.float32)
                if seed is not None:
                    torch.manual_seed(int(seed))

        def pick(lg):
            best = lg.argmax(-1)
            if temp is None:
                return best
            u = torch.rand_like(lg).clamp_(min=1e-20, max=1.0 - 1e-7)
            samp = (lg / temp.clamp(min=1e-4)[:, None] - torch.log(-torch.log(u))).argmax(-1)
            return torch.where(temp > 0, samp, best)

        P = max(len(p) for p in prompts)
        pad = torch.tensor([P - len(p) for p in prompts], device=dev)
        toks = torch.full((B, P), pad_id, dtype=torch.long, device=dev)
        for b, p in enumerate(prompts):
            toks[b, P - len(p) :] = torch.as_tensor(p, dtype=torch.long)
        L = P + max_new
        low = dev.type == "cuda" and not exact
        dtype = torch.bfloat16 if low else torch.float32
        caches = [
            (
                torch.zeros(B, self.c.n_head_kv, L, self.c.head_dim, dtype=dtype, device=dev),
                torch.zeros(B, self.c.n_head_kv, L, self.c.head_dim, dtype=dtype, device=dev),
            )
            for _ in range(self.c.n_layer)
        ]
        slots = torch.arange(L, device=dev)
        key_ok = slots[None, :] >= pad[:, None]  # (B, L): not padding
        pos = (torch.arange(P, device=dev)[None] - pad[:, None]).clamp(min=0)
        causal = slots[:P, None] >= slots[None, :P]
        # a padded query row sees itself, so no row is all -inf (NaN would reach the cache)
        m = (causal[None] & key_ok[:, None, :P]) | torch.eye(P, dtype=torch.bool, device=dev)[None]
        stop = torch.as_tensor(sorted(set(int(s) for s in stop_ids)) or [-1], device=dev)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=low):
            logits, _ = self(toks, positions=pos, mask=m[:, None], caches=caches, pos0=0, last_only=True)
        out = torch.full((B, max_new), pad_id, dtype=torch.long, device=dev)
        nxt = pick(logits[:, -1].float())
        out[:, 0] = nxt
        done = (nxt[:, None] == stop[None]).any(-1)
        cur = torch.tensor(P, device=dev)  # cache slot of the token being fed

        def step():
            mask = (key_ok & (slots[None, :] <= cur))[:, None, None, :]
            with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=low, cache_enabled=False):
                lg, _ = self(nxt[:, None], positions=(cur - pad)[:, None], mask=mask, caches=caches, pos0=cur)
            new = torch.where(done, torch.full_like(nxt, pad_id), pick(lg[:, -1].float()))
            nxt.copy_(new)
            out.index_copy_(1, (cur - P + 1).view(1), new[:, None])
            done.logical_or_(((new[:, None] == stop[None]).any(-1)))
            cur.add_(1)

        n_steps = max_new - 1
        run = step
        if graph and dev.type == "cuda" and n_steps > 2:
            run = self._capture(step, (nxt, done, cur))
        for i in range(n_steps):
            if i % 16 == 0 and bool(done.all()):
                break
            run()
        gen = out.cpu().tolist()
        stops = set(stop.tolist())
        res = []
        for row in gen:
            r = []
            for t in row:
                r.append(t)
                if t in stops:
                    break
            res.append(r)
        return res

    @staticmethod
    def _capture(step, state):
        """``step`` as a CUDA graph. Warm-up runs (needed before capture) advance the state, so
        it is saved and restored around them (cache slots they wrote are rewritten before use)."""
        saved = [t.clone() for t in state]
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                step()
        torch.cuda.current_stream().wait_stream(s)
        for t, v in zip(state, saved):
            t.copy_(v)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            step()
        for t, v in zip(state, saved):  # capture does not run the step, but be certain
            t.copy_(v)
        return g.replay


# -- loading from GGUF ------------------------------------------------------------------------------------------
def _field(reader, key, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    v = f.contents()
    return v


def _unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    """Inverse of convert_hf_to_gguf's ``LlamaModel.permute`` (Q/K rows, HF half-split -> NORM pairs)."""
    rows = w.shape[0]
    return w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def read_config(path: str | Path):
    from gguf import GGUFReader

    r = GGUFReader(str(path))
    arch = _field(r, "general.architecture")
    if arch not in SUPPORTED_ARCHS:
        raise ValueError(
            f"{Path(path).name}: architecture {arch!r} is not supported for drafter training "
            f"(supported: {', '.join(SUPPORTED_ARCHS)})"
        )
    names = {t.name for t in r.tensors}
    n_embd = int(_field(r, f"{arch}.embedding_length"))
    n_head = int(_field(r, f"{arch}.attention.head_count"))
    head_kv = _field(r, f"{arch}.attention.head_count_kv", n_head)
    head_dim = int(_field(r, f"{arch}.attention.key_length", n_embd // n_head))
    n_rot = int(_field(r, f"{arch}.rope.dimension_count", head_dim))
    if n_rot != head_dim:
        raise ValueError(f"partial RoPE (rope.dimension_count {n_rot} != head_dim {head_dim}) is not supported")
    scaling = _field(r, f"{arch}.rope.scaling.type")
    if scaling not in (None, "none"):
        raise ValueError(f"RoPE scaling {scaling!r} is not supported for drafter training")
    emb = next(t for t in r.tensors if t.name == "token_embd.weight")
    c = GGUFTargetConfig(
        arch=arch,
        vocab_size=int(emb.shape[1]),
        n_embd=n_embd,
        n_layer=int(_field(r, f"{arch}.block_count")),
        n_head=n_head,
        n_head_kv=int(head_kv if not isinstance(head_kv, list) else head_kv[0]),
        head_dim=head_dim,
        n_ff=int(_field(r, f"{arch}.feed_forward_length")),
        rope_theta=float(_field(r, f"{arch}.rope.freq_base", 10000.0)),
        rms_eps=float(_field(r, f"{arch}.attention.layer_norm_rms_epsilon")),
        n_ctx=int(_field(r, f"{arch}.context_length", 4096)),
        qk_norm="blk.0.attn_q_norm.weight" in names,
        tied="output.weight" not in names,
        qkv_bias="blk.0.attn_q.bias" in names,
    )
    return c, r


def _dequant(t) -> np.ndarray:
    from gguf.quants import dequantize

    a = dequantize(t.data, t.tensor_type)
    return np.asarray(a, dtype=np.float32).reshape(tuple(int(x) for x in reversed(t.shape)))


GGUF_TO_TORCH_LAYER = {
    "attn_norm.weight": "input_layernorm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "attn_q_norm.weight": "self_attn.q_norm.weight",
    "attn_k_norm.weight": "self_attn.k_norm.weight",
    "attn_q.bias": "self_attn.q_proj.bias",
    "attn_k.bias": "self_attn.k_proj.bias",
    "attn_v.bias": "self_attn.v_proj.bias",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}


def load_gguf_target(path: str | Path, device="cpu", dtype=torch.float32) -> GGUFTarget:
    """The GGUF's weights, dequantised, in a ``GGUFTarget`` (frozen, eval mode)."""
    c, r = read_config(path)
    state: dict[str, torch.Tensor] = {}
    freq = None
    for t in r.tensors:
        a = _dequant(t)
        n = t.name
        if n == "rope_freqs.weight":
            freq = torch.from_numpy(a.copy())
            continue
        if n == "token_embd.weight":
            key = "embed_tokens.weight"
        elif n == "output_norm.weight":
            key = "norm.weight"
        elif n == "output.weight":
            key = "lm_head.weight"
        elif n.startswith("blk."):
            _, i, rest = n.split(".", 2)
            if rest not in GGUF_TO_TORCH_LAYER:
                raise ValueError(f"{Path(path).name}: unexpected tensor {n} for a {c.arch} target")
            key = f"layers.{i}.{GGUF_TO_TORCH_LAYER[rest]}"
            if c.arch == "llama" and rest == "attn_q.weight":
                a = _unpermute(a, c.n_head)
            elif c.arch == "llama" and rest == "attn_k.weight":
                a = _unpermute(a, c.n_head_kv)
        else:
            raise ValueError(f"{Path(path).name}: unexpected tensor {n}")
        state[key] = torch.from_numpy(np.array(a, dtype=np.float32, copy=True))
    model = GGUFTarget(c, freq)
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise ValueError(f"{Path(path).name}: tensors missing {missing[:5]} / unexpected {unexpected[:5]}")
    model = model.to(device=device, dtype=dtype).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model
