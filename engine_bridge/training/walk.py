"""Blocks where the engine opens them: the drafter's own walk along an answer.

The trainer used to score and train a drafter on blocks opened at uniformly random positions of an
answer. The engine opens a block only where its last step ended: right after a token that the
drafter missed and the target supplied. On the same answers those positions take 16-21 % fewer
drafts (benchmarks/drafter_walk.py on the 48 held-out prompts: the PyTorch drafter walking
llama.cpp's answers takes the engine's steps, 1.69 accepted drafts a chain-7 step against the
engine's 1.68, while blocks at every position read 1.31 / 2.38 / 3.11 where the walk reads 1.09 /
2.01 / 2.47 on chat / math / code). So the random-anchor figure overstates what a user gets, and
ranks checkpoints by blocks the engine rarely opens.

A walk: a block opens at position ``a`` holding ``[x[a], mask, ...]``; its drafts for slots
1..budget are compared with ``x[a + 1 ...]``; ``k`` leading drafts match; the next block opens at
``a + k + 1`` (the accepted drafts, then the target's token). On a greedy answer this is exactly a
greedy chain verify's sequence of steps.
"""

from __future__ import annotations

#: blocks decoded at once per sequence when drafting at every position of a span
CHUNK = 64


def span_drafts(model, feats, x, spans, S: int, budget: int, mask_id: int, embed_w, head_w, chunk: int = CHUNK):
    """The drafter's greedy drafts for slots 1..budget of a block opened at every position of each
    sequence's span: ``spans[b] = (lo, hi)`` (positions lo..hi-1). Returns one dict per sequence,
    anchor -> list of ``budget`` token ids. No gradient."""
    import torch

    B = x.shape[0]
    dev = feats.device
    xc = x.cpu()
    out: list[dict[int, list[int]]] = [{} for _ in range(B)]
    width = max((hi - lo for lo, hi in spans), default=0)
    with torch.no_grad():
        for off in range(0, width, chunk):
            K = min(chunk, width - off)
            anc = torch.zeros(B, K, dtype=torch.long)
            live = torch.zeros(B, K, dtype=torch.bool)
            for b, (lo, hi) in enumerate(spans):
                pos = torch.arange(lo + off, lo + off + K)
                live[b] = pos < hi
                anc[b] = torch.where(live[b], pos, torch.full_like(pos, max(lo, 0)))
            if not live.any():
                continue
            blk = torch.full((B, K, S), mask_id, dtype=torch.long)
            blk[:, :, 0] = torch.gather(xc, 1, anc)
            logits = model(feats, anc.to(dev), blk.to(dev), embed_w, head_w)[:, :, 1 : 1 + budget]
            drafts = logits.float().argmax(-1).cpu()
            for b in range(B):
                for k in torch.nonzero(live[b]).flatten().tolist():
                    out[b][int(anc[b, k])] = drafts[b, k].tolist()
    return out


def matched(drafts: list[int], truth: list[int]) -> int:
    """Leading drafts equal to the answer's tokens (a greedy verify's accepted count)."""
    n = 0
    for d, t in zip(drafts, truth):
        if d != t:
            break
        n += 1
    return n


def walk(drafts: dict[int, list[int]], x: list[int], start: int, end: int) -> list[tuple[int, int]]:
    """(anchor, accepted drafts) of each block of the walk from ``start`` while anchors stay below
    ``end`` (and have drafts); ``x``: the sequence's tokens."""
    steps = []
    a = start
    while a < end and a in drafts:
        d = drafts[a]
        k = matched(d, x[a + 1 : a + 1 + len(d)])
        steps.append((a, k))
        a += k + 1
    return steps


def walk_anchors(model, feats, x, lens, lo, K: int, S: int, budget: int, mask_id: int, embed_w, head_w, gen):
    """Anchors for a training batch along each sequence's walk: from a random start at or after
    ``lo[b]``, over a window long enough for ``K`` blocks (3 positions a block, about the commit of a
    drafter in training), the drafter's own walk; a sequence whose walk gives fewer than ``K`` blocks
    is filled with random anchors of its window. (B, K) long tensor on the CPU."""
    import torch

    B = x.shape[0]
    window = 3 * K
    spans = []
    for b in range(B):
        first, last = int(lo[b]), int(lens[b]) - 2  # the last anchor with a label
        first = min(first, last)
        room = max(0, last - first + 1 - window)
        s = first + int(torch.randint(0, room + 1, (1,), generator=gen)) if room else first
        spans.append((s, min(last + 1, s + window)))
    drafts = span_drafts(model, feats, x, spans, S, budget, mask_id, embed_w, head_w)
    xs = x.cpu().tolist()
    out = torch.zeros(B, K, dtype=torch.long)
    for b, (s, e) in enumerate(spans):
        picked = [a for a, _ in walk(drafts[b], xs[b][: int(lens[b])], s, e)][:K]
        if len(picked) < K:
            u = torch.randint(s, max(s + 1, e), (K - len(picked),), generator=gen)
            picked += u.tolist()
        out[b] = torch.tensor(picked)
    return out


def walk_accepted(model, feats, x, plen, lens, S: int, budget: int, mask_id: int, embed_w, head_w, max_len: int):
    """Held-out accepted drafts per step of the engine's walk: each answer walked from its first
    token (where a request's first block opens) over at most ``max_len`` answer tokens. Returns
    (accepted drafts summed, steps) so that callers can pool over batches."""
    spans = [(int(p), min(int(n) - 1, int(p) + max_len)) for p, n in zip(plen, lens)]
    drafts = span_drafts(model, feats, x, spans, S, budget, mask_id, embed_w, head_w)
    xs = x.cpu().tolist()
    acc = steps = 0
    for b, (s, e) in enumerate(spans):
        for _, k in walk(drafts[b], xs[b][: int(lens[b])], s, e):
            acc += k
            steps += 1
    return acc, steps
