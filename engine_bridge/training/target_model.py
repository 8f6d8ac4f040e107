"""A small qwen3-architecture language model in PyTorch whose math is llama.cpp's qwen3 graph.

Per layer (``src/models/qwen3.cpp``): ``h = x + Wo attn(rope(q_norm(Wq n)), rope(k_norm(Wk n)), Wv n)``
with ``n = rms_norm(x) * attn_norm``; ``x' = h + Wdown(silu(Wgate m) * Wup m)`` with
``m = rms_norm(h) * ffn_norm``. Q/K norms are RMS norms over each head; RoPE is NeoX style
(pairs ``i, i + head_dim/2``); GQA maps query head ``h`` to KV head ``h // (n_head / n_head_kv)``;
attention is scaled by ``1/sqrt(head_dim)``; the final RMS norm feeds an lm_head tied to the token
embeddings (the GGUF has no ``output.weight``: llama.cpp then uses ``token_embd``).

``forward(..., layer_inputs=ids)`` also returns the *inputs* of the given layers (llama.cpp's
``t_layer_inp``, what a DFlash drafter reads: GGUF ``dflash.target_layers``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class TargetConfig:
    vocab_size: int = 8192
    n_embd: int = 384
    n_layer: int = 8
    n_head: int = 6
    n_head_kv: int = 2
    head_dim: int = 64
    n_ff: int = 1024
    rope_theta: float = 10000.0
    rms_eps: float = 1e-6
    n_ctx: int = 1024

    def to_dict(self) -> dict:
        return asdict(self)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * self.weight.float()).to(x.dtype)


def rope_cache(head_dim: int, positions: torch.Tensor, theta: float):
    """cos, sin of shape (..., head_dim/2) for integer positions."""
    inv = theta ** (-torch.arange(0, head_dim, 2, device=positions.device, dtype=torch.float32) / head_dim)
    ang = positions.float()[..., None] * inv
    return ang.cos(), ang.sin()


def apply_rope(x, cos, sin):
    """NeoX RoPE on x (B, H, T, D) with cos/sin (B or 1, 1, T, D/2)."""
    d2 = x.shape[-1] // 2
    x1, x2 = x[..., :d2].float(), x[..., d2:].float()
    out = torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)
    return out.to(x.dtype)


class Attention(nn.Module):
    def __init__(self, c: TargetConfig):
        super().__init__()
        self.c = c
        self.q_proj = nn.Linear(c.n_embd, c.n_head * c.head_dim, bias=False)
        self.k_proj = nn.Linear(c.n_embd, c.n_head_kv * c.head_dim, bias=False)
        self.v_proj = nn.Linear(c.n_embd, c.n_head_kv * c.head_dim, bias=False)
        self.o_proj = nn.Linear(c.n_head * c.head_dim, c.n_embd, bias=False)
        self.q_norm = RMSNorm(c.head_dim, c.rms_eps)
        self.k_norm = RMSNorm(c.head_dim, c.rms_eps)

    def qkv(self, x, cos, sin):
        B, T, _ = x.shape
        c = self.c
        q = self.q_norm(self.q_proj(x).view(B, T, c.n_head, c.head_dim)).transpose(1, 2)
        k = self.k_norm(self.k_proj(x).view(B, T, c.n_head_kv, c.head_dim)).transpose(1, 2)
        v = self.v_proj(x).view(B, T, c.n_head_kv, c.head_dim).transpose(1, 2)
        return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v

    def forward(self, x, cos, sin, cache=None, pos0: int = 0):
        B, T, _ = x.shape
        c = self.c
        q, k, v = self.qkv(x, cos, sin)
        if cache is not None:
            kc, vc = cache
            kc[:, :, pos0 : pos0 + T] = k
            vc[:, :, pos0 : pos0 + T] = v
            k, v = kc[:, :, : pos0 + T], vc[:, :, : pos0 + T]
        if cache is not None and T == 1:
            # one new token over the cache: GQA without copying the cache per query head
            y = F.scaled_dot_product_attention(q, k, v, enable_gqa=c.n_head != c.n_head_kv)
        else:
            if cache is not None and pos0 > 0:
                raise NotImplementedError("multi-token decode on a non-empty cache")
            r = c.n_head // c.n_head_kv
            if r > 1:
                k = k.repeat_interleave(r, dim=1)
                v = v.repeat_interleave(r, dim=1)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, c.n_head * c.head_dim))


class MLP(nn.Module):
    def __init__(self, d: int, ff: int):
        super().__init__()
        self.gate_proj = nn.Linear(d, ff, bias=False)
        self.up_proj = nn.Linear(d, ff, bias=False)
        self.down_proj = nn.Linear(ff, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, c: TargetConfig):
        super().__init__()
        self.input_layernorm = RMSNorm(c.n_embd, c.rms_eps)
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c.n_embd, c.rms_eps)
        self.mlp = MLP(c.n_embd, c.n_ff)

    def forward(self, x, cos, sin, cache=None, pos0=0):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, cache, pos0)
        return x + self.mlp(self.post_attention_layernorm(x))


class TargetLM(nn.Module):
    def __init__(self, c: TargetConfig):
        super().__init__()
        self.c = c
        self.embed_tokens = nn.Embedding(c.vocab_size, c.n_embd)
        self.layers = nn.ModuleList(Block(c) for _ in range(c.n_layer))
        self.norm = RMSNorm(c.n_embd, c.rms_eps)
        self.apply(self._init)
        for n, p in self.named_parameters():
            if n.endswith("o_proj.weight") or n.endswith("down_proj.weight"):
                nn.init.normal_(p, std=0.02 / (2 * c.n_layer) ** 0.5)

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)

    @property
    def lm_head_weight(self):
        return self.embed_tokens.weight  # tied

    def forward(self, tokens, layer_inputs=(), caches=None, pos0: int = 0, logits: bool = True):
        """Returns (logits or final hidden, [inputs of the layers in layer_inputs])."""
        B, T = tokens.shape
        pos = torch.arange(pos0, pos0 + T, device=tokens.device)
        cos, sin = rope_cache(self.c.head_dim, pos, self.c.rope_theta)
        cos, sin = cos[None, None], sin[None, None]
        x = self.embed_tokens(tokens)
        feats = {}
        for i, layer in enumerate(self.layers):
            if i in layer_inputs:
                feats[i] = x
            x = layer(x, cos, sin, None if caches is None else caches[i], pos0)
        if self.c.n_layer in layer_inputs:
            feats[self.c.n_layer] = x
        h = self.norm(x)
        out = F.linear(h, self.lm_head_weight) if logits else h
        return out, [feats[i] for i in layer_inputs]

    def new_caches(self, batch: int, length: int, dtype, device):
        c = self.c
        return [
            (
                torch.zeros(batch, c.n_head_kv, length, c.head_dim, dtype=dtype, device=device),
                torch.zeros(batch, c.n_head_kv, length, c.head_dim, dtype=dtype, device=device),
            )
            for _ in range(c.n_layer)
        ]

    @torch.no_grad()
    def greedy(self, prompt: torch.Tensor, n_new: int, stop: int | None = None) -> torch.Tensor:
        """Greedy continuation of prompts (B, P) with a KV cache; returns (B, P + n_new)."""
        B, P = prompt.shape
        dtype = next(self.parameters()).dtype
        if prompt.is_cuda:
            dtype = torch.bfloat16
        caches = self.new_caches(B, P + n_new, dtype, prompt.device)
        with torch.autocast(prompt.device.type, dtype=torch.bfloat16, enabled=prompt.is_cuda):
            logits, _ = self(prompt, caches=caches, pos0=0)
            out = [prompt]
            nxt = logits[:, -1].float().argmax(-1, keepdim=True)
            for i in range(n_new):
                out.append(nxt)
                if i == n_new - 1:
                    break
                logits, _ = self(nxt, caches=caches, pos0=P + i)
                nxt = logits[:, -1].float().argmax(-1, keepdim=True)
        return torch.cat(out, dim=1)

    def gguf_tensors(self) -> dict:
        """ggml name -> float32 numpy array (rows = output features), no output.weight (tied)."""
        from .export import target_tensors

        sd = {k: v.detach().float().cpu().numpy() for k, v in self.state_dict().items()}
        return target_tensors(sd, self.c.n_layer)
