"""The DFlash drafter in PyTorch, written to be llama.cpp's ``src/models/dflash.cpp`` graph.

Context (llama.cpp's embedding batch, once per committed token):
``g = rms_norm(fc(concat(target layer inputs))) * hidden_norm``; for every draft layer
``K = rope(k_norm(Wk g))``, ``V = Wv g`` at the token's position (no attn_norm on this path).

Block (one token decode per draft): ``[anchor, mask, ..., mask]`` at positions ``P .. P+n`` where
the anchor is the last committed token at ``P`` and the context holds positions ``< P``. Tokens
are embedded with the *target's* embeddings (unscaled); every layer is ``attn_norm -> q/k/v ->
q_norm/k_norm -> NeoX RoPE -> non-causal attention over [context K/V ; the block's own K/V] ->
o_proj -> residual -> ffn_norm -> SwiGLU -> residual``; then ``norm`` and the *target's* lm_head.
The output at block slot ``i >= 1`` is the draft for the token at position ``P + i``.

Weights are named as in Hugging Face DFlash checkpoints (``fc``, ``hidden_norm``, ``norm``,
``layers.N.self_attn.q_proj`` ...), which ``engine_bridge.models.dflash_names`` maps to GGUF.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F

from .target_model import MLP, Attention, RMSNorm, apply_rope, rope_cache


@dataclass
class DrafterConfig:
    n_embd: int = 384  # must equal the target's
    n_layer: int = 2
    n_head: int = 6
    n_head_kv: int = 2
    head_dim: int = 64
    n_ff: int = 1024
    block_size: int = 16
    target_layers: list[int] = field(default_factory=lambda: [2, 5, 7])  # GGUF ids: input of layer k
    mask_token_id: int = 1
    rope_theta: float = 10000.0
    rms_eps: float = 1e-6
    n_ctx: int = 1024

    def to_dict(self) -> dict:
        return asdict(self)


class DraftAttention(Attention):
    """The target's attention layout (q/k/v/o projections, per-head q/k norms), used two ways:
    K/V from the fused target features (``context_kv``) and non-causal attention over them plus
    the noise block (``forward``)."""

    def context_kv(self, g, cos, sin):
        B, L, _ = g.shape
        c = self.c
        k = self.k_norm(self.k_proj(g).view(B, L, c.n_head_kv, c.head_dim)).transpose(1, 2)
        v = self.v_proj(g).view(B, L, c.n_head_kv, c.head_dim).transpose(1, 2)
        return apply_rope(k, cos, sin), v

    def forward(self, x, cos, sin, kc, vc, mask):
        B, T, _ = x.shape
        c = self.c
        q, k, v = self.qkv(x, cos, sin)
        k = torch.cat([kc, k], dim=2)
        v = torch.cat([vc, v], dim=2)
        r = c.n_head // c.n_head_kv
        if r > 1:
            k = k.repeat_interleave(r, dim=1)
            v = v.repeat_interleave(r, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, c.n_head * c.head_dim))


class DraftLayer(nn.Module):
    def __init__(self, c: DrafterConfig):
        super().__init__()
        self.input_layernorm = RMSNorm(c.n_embd, c.rms_eps)
        self.self_attn = DraftAttention(c)  # type: ignore[arg-type]  # has every field Attention reads
        self.post_attention_layernorm = RMSNorm(c.n_embd, c.rms_eps)
        self.mlp = MLP(c.n_embd, c.n_ff)


class DFlashDrafter(nn.Module):
    def __init__(self, c: DrafterConfig):
        super().__init__()
        self.c = c
        self.fc = nn.Linear(len(c.target_layers) * c.n_embd, c.n_embd, bias=False)
        self.hidden_norm = RMSNorm(c.n_embd, c.rms_eps)
        self.layers = nn.ModuleList(DraftLayer(c) for _ in range(c.n_layer))
        self.norm = RMSNorm(c.n_embd, c.rms_eps)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, std=0.02)
        for n, p in self.named_parameters():
            if n.endswith("o_proj.weight") or n.endswith("down_proj.weight"):
                nn.init.normal_(p, std=0.02 / (2 * c.n_layer) ** 0.5)

    def forward(self, feats, anchors, block_tokens, embed_w, lm_head_w=None):
        """Draft logits for every block slot.

        feats: (B, L, n_target_layers * n_embd) target layer inputs at positions 0..L-1.
        anchors: (B, K) anchor positions; block k attends to context positions < anchors[:, k].
        block_tokens: (B, K, S) [anchor token, mask, ...] per block.
        embed_w: the target's token embeddings (V, n_embd); lm_head_w: its output head (default:
        embed_w, a tied target). llama.cpp's drafter shares both with the target.
        Returns logits (B, K, S, V).
        """
        B, L, _ = feats.shape
        K, S = block_tokens.shape[1], block_tokens.shape[2]
        c = self.c
        dev = feats.device
        g = self.hidden_norm(self.fc(feats))
        cos_c, sin_c = rope_cache(c.head_dim, torch.arange(L, device=dev), c.rope_theta)
        cos_c, sin_c = cos_c[None, None], sin_c[None, None]
        bpos = (anchors[:, :, None] + torch.arange(S, device=dev)).reshape(B, K * S)
        cos_b, sin_b = rope_cache(c.head_dim, bpos, c.rope_theta)
        cos_b, sin_b = cos_b[:, None], sin_b[:, None]
        # mask (B, 1, K*S, L + K*S): context keys before the block's anchor, and the block itself
        ctx_ok = torch.arange(L, device=dev)[None, None, :] < anchors[:, :, None]  # (B, K, L)
        ctx_ok = ctx_ok[:, :, None, :].expand(B, K, S, L).reshape(B, K * S, L)
        blk = torch.arange(K, device=dev).repeat_interleave(S)
        blk_ok = (blk[:, None] == blk[None, :])[None].expand(B, K * S, K * S)
        mask = torch.cat([ctx_ok, blk_ok], dim=2)[:, None]
        x = F.embedding(block_tokens.reshape(B, K * S), embed_w)
        for layer in self.layers:
            kc, vc = layer.self_attn.context_kv(g, cos_c, sin_c)
            x = x + layer.self_attn(layer.input_layernorm(x), cos_b, sin_b, kc, vc, mask)
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        h = self.norm(x)
        return F.linear(h, embed_w if lm_head_w is None else lm_head_w).view(B, K, S, -1)

    @torch.no_grad()
    def draft(self, feats, last: int, n: int, embed_w, lm_head_w=None) -> list[int]:
        """The greedy draft after ``last`` at position P = feats.shape[1] (one sequence)."""
        P = feats.shape[1]
        block = torch.tensor([[[last] + [self.c.mask_token_id] * n]], device=feats.device)
        logits = self(feats, torch.tensor([[P]], device=feats.device), block, embed_w, lm_head_w)
        return logits[0, 0, 1:].float().argmax(-1).tolist()

    def hf_state_dict(self) -> dict:
        return {k: v.detach().float().cpu().contiguous() for k, v in self.state_dict().items()}


# The two matrices through which a layer writes the residual stream: x + o_proj(attn), x + down_proj(mlp)
# (no biases, no post-norms in DraftLayer). Zeroed, a layer is the identity.
RESIDUAL_WRITERS = ("self_attn.o_proj.weight", "mlp.down_proj.weight")


#: The FFN's matrices, by the side that grows with its width: gate and up gain rows (new hidden units),
#: down gains columns (their way back into the residual stream)
FFN_IN = ("mlp.gate_proj.weight", "mlp.up_proj.weight")
FFN_OUT = "mlp.down_proj.weight"


def grow_state(own: dict, init: dict, n_init: int) -> dict | None:
    """The state dict of a drafter whose fresh weights are ``own``, started from ``init``: the weights
    of a drafter of the same configuration but with ``n_init`` <= n_layer layers and an FFN as wide
    as the run's or narrower. Shared tensors and layers 0 .. n_init-1 come from ``init``.
    - Deeper: layers n_init .. keep their initialisation but for their ``RESIDUAL_WRITERS``, zeroed,
      so each added layer starts as the identity.
    - Wider: the FFN's added hidden units keep their fresh gate and up rows, and their down columns
      start at zero, so they add nothing until training moves them.
    Either way the grown drafter drafts exactly what ``init`` did. None when ``init``'s tensors are not
    exactly those names, or have shapes that neither equal the run's nor grow that way."""

    def kept(name: str) -> bool:
        parts = name.split(".")
        return parts[0] != "layers" or int(parts[1]) < n_init

    if init.keys() != {n for n in own if kept(n)}:
        return None
    out = {}
    for n, v in own.items():
        if not kept(n):
            out[n] = torch.zeros_like(v) if n.endswith(RESIDUAL_WRITERS) else v
            continue
        w = init[n]
        if tuple(w.shape) == tuple(v.shape):
            out[n] = w
        elif n.endswith(FFN_IN) and w.dim() == 2 and w.shape[1] == v.shape[1] and w.shape[0] < v.shape[0]:
            down = init.get(n.rsplit("mlp.", 1)[0] + FFN_OUT)
            if down is None or tuple(down.shape) != (w.shape[1], w.shape[0]):
                return None  # one layer's FFN is one width: gate, up and down grow together
            out[n] = torch.cat([w.to(v.device, v.dtype), v[w.shape[0] :]], dim=0)
        elif n.endswith(FFN_OUT) and w.dim() == 2 and w.shape[0] == v.shape[0] and w.shape[1] < v.shape[1]:
            if any(tuple(init[n.rsplit("mlp.", 1)[0] + a].shape) != (w.shape[1], w.shape[0]) for a in FFN_IN):
                return None  # (as above)
            out[n] = torch.cat([w.to(v.device, v.dtype), torch.zeros_like(v[:, w.shape[1] :])], dim=1)
        else:
            return None
    return out


def position_weights(S: int, gamma: float, device=None) -> torch.Tensor:
    """Loss weight of block slot j (1..S-1): exp(-(j-1)/gamma); slot 0 (the anchor) weighs 0."""
    j = torch.arange(S, device=device, dtype=torch.float32)
    w = torch.exp(-(j - 1).clamp(min=0) / gamma)
    w[0] = 0.0
    return w
