"""Tree verification (DDTree): verify a tree of likely continuations in one target decode.

Construction (one drafter pass): the drafter's top-K tokens and log-probabilities at each block
position. The greedy chain goes in first (so the tree always contains what chain mode would
verify); then nodes are popped best-first from a max-heap on cumulative log-probability — a popped
node pushes its next sibling and its first child — until ``budget`` nodes.

Verification: each node is one batch entry at position ``pos + 1 + depth``, belonging to the
sequence of every leaf below it; the root (``last``) belongs to all of the run's leaf sequences.
In a unified KV cache the attention mask then lets a node see exactly its ancestors and the
committed prefix, which every leaf sequence holds for the whole run (tagged once after prefill).
The target's choice is followed down the tree; the longest agreeing path plus the target's next
token are committed. Afterwards only the winning branch's cells stay: everything deeper than the
kept path goes, the other branches' cells beside it go (they hold no sequence of the winning
leaf), and the path's cells are given to every sequence again -- a fixed number of KV calls per step,
with no work per prefix token. Only the accepted path's features are injected into the drafter.
"""

from __future__ import annotations

import os

import heapq
import threading
from dataclasses import dataclass, field

import numpy as np


@dataclass
class DraftTree:
    tokens: list[int] = field(default_factory=list)  # node i's token
    parent: list[int] = field(default_factory=list)  # node i's parent (-1: the root, i.e. `last`)
    depth: list[int] = field(default_factory=list)  # 0 for the root's children
    children: dict[int, dict[int, int]] = field(default_factory=dict)  # node (-1 root) -> token -> child
    n_leaves: int = 0

    def __len__(self) -> int:
        return len(self.tokens)

    def add(self, token: int, parent: int) -> int:
        i = len(self.tokens)
        # a child of the root or of a node with children starts a branch; a leaf's child deepens it
        if parent < 0 or parent in self.children:
            self.n_leaves += 1
        self.tokens.append(int(token))
        self.parent.append(parent)
        self.depth.append(0 if parent < 0 else self.depth[parent] + 1)
        self.children.setdefault(parent, {})[int(token)] = i
        return i

    @property
    def max_depth(self) -> int:
        return max(self.depth) + 1 if self.tokens else 0

    def leaves(self) -> list[int]:
        return [i for i in range(len(self.tokens)) if i not in self.children]

    def leaf_sets(self) -> tuple[list[list[int]], list[int]]:
        """Sequence ids per node (the ids of the leaves below it) and the root's (all of them)."""
        leaves = self.leaves()
        seq_of_leaf = {leaf: s for s, leaf in enumerate(leaves)}
        sets: list[list[int]] = [[] for _ in self.tokens]
        for leaf, s in seq_of_leaf.items():
            node = leaf
            while node >= 0:
                sets[node].append(s)
                node = self.parent[node]
        return sets, list(range(len(leaves)))


_scratch = threading.local()  # one reusable (rows x vocab) work buffer per thread


def _work_buffer(shape: tuple[int, int], dtype) -> np.ndarray:
    n = shape[0] * shape[1]
    buf = getattr(_scratch, "buf", None)
    if buf is None or buf.size < n or buf.dtype != dtype:
        buf = _scratch.buf = np.empty(n, dtype=dtype)
    return buf[:n].reshape(shape)


def top_candidates(logits: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the k best tokens (best first) and their log-probabilities.

    Cost on a 152k vocabulary matters here (the tree's draft phase, on the host): k vectorised
    argmax passes over ``logits`` itself (each winner masked, then restored), and one pass into a
    reused buffer for the log-sum-exp, whose terms are clamped at exp(-80): smaller ones cannot
    change a float32 sum that contains the maximum's 1.0, and leaving them to underflow into
    denormals made the exp pass several times slower on the GPU machine's host. Ties go to the
    lower token id, as with argmax. ``logits`` is modified during the call and restored.
    """
    n, v = logits.shape
    k = min(k, v)
    rows = np.arange(n)
    tokens = np.empty((n, k), dtype=np.int64)
    vals = np.empty((n, k), dtype=logits.dtype)
    masked = 0
    try:
        for j in range(k):
            best = logits.argmax(axis=1)
            tokens[:, j] = best
            vals[:, j] = logits[rows, best]
            logits[rows, best] = -np.inf
            masked += 1
    finally:
        for j in reversed(range(masked)):
            logits[rows, tokens[:, j]] = vals[:, j]
    m = vals[:, :1]  # the row maxima
    work = _work_buffer(logits.shape, logits.dtype)
    np.subtract(logits, m, out=work)
    np.maximum(work, -80.0, out=work)
    np.exp(work, out=work)
    lse = m + np.log(work.sum(axis=1, keepdims=True))
    return tokens, vals - lse


def rank_candidates(ids: np.ndarray, logits: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """A backend top-k sampler's (ids, raw logits) per row, in any order -> the k best, best first
    (exact ties keep llama.cpp's order), with log-probabilities normalised over all the given
    candidates. A few small numpy calls: this runs once per tree step."""
    rows = np.arange(logits.shape[0])[:, None]
    order = np.argsort(-logits, axis=1, kind="stable")[:, :k]
    best = logits[rows, order]
    m = best[:, :1]
    lse = m + np.log(np.exp(logits - m).sum(axis=1, keepdims=True))
    return ids[rows, order].astype(np.int64), (best - lse).astype(np.float64)


#: The deepest seeded chain. Past it, best-first placement decides: on the default pair's
#: validation split (30 requests, tree 15, CPU) a chain of 4 committed 3.167 per step, 2, 3 and 5
#: 3.158, 6 3.146, 8 (half the budget, the rule before) 3.096 and 11 3.008 (bench_tree_shape.py --val;
#: docs/benchmarks.md, "The tree's seeded chain at budget 15").
SEEDED_CHAIN_MAX = 4
#: Environment variable that replaces SEEDED_CHAIN_MAX, so the old seed (a large value: half the
#: budget) and the new one can be compared in one process on a GPU. Unset or empty: the constant.
SEEDED_CHAIN_MAX_ENV = "DFLASH_TREE_SEED_MAX"


def seeded_chain_max() -> int:
    """The seeded chain's cap: $DFLASH_TREE_SEED_MAX (a positive integer), else SEEDED_CHAIN_MAX."""
    raw = os.environ.get(SEEDED_CHAIN_MAX_ENV, "").strip()
    if not raw:
        return SEEDED_CHAIN_MAX
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{SEEDED_CHAIN_MAX_ENV}={raw!r}: expected a positive integer")
    return int(raw)


def seeded_chain_len(budget: int) -> int:
    """How deep the greedy chain is seeded for a node budget: half of it, rounded up, and at most
    SEEDED_CHAIN_MAX.

    Measured on the reference pair at budget 5-7 (15 held-out prompts, CPU): a quarter or
    three-quarters of the budget commit 3-7 % fewer tokens per step than a half. At larger budgets
    a long seeded chain spends nodes on deep drafts that the target rarely reaches, where
    best-first would branch near the root.
    """
    return min((budget + 1) // 2, seeded_chain_max())


def max_leaves(budget: int, rows: int) -> int:
    """Leaves a tree of ``budget`` nodes over ``rows`` block positions can have when its chain is
    seeded to seeded_chain_len: every node beyond the chain adds at most one."""
    return max(1, budget - min(seeded_chain_len(budget), rows) + 1)


def useful_top_k(budget: int, rows: int, k: int) -> int:
    """Candidates per position that a tree of ``budget`` nodes over ``rows`` positions, its chain
    seeded to seeded_chain_len, can use: at most ``k``. A candidate of rank r enters the tree only
    after ranks 1 .. r - 1 under the same parent (rank 0 under a chain node is the chain itself), so a
    rank needs as many nodes beyond the chain; with ``budget - chain`` of them, ranks above that never
    enter, and reading fewer leaves the tree as it was (tests/engine_bridge/runtime/test_tree.py)."""
    chain = min(seeded_chain_len(budget), rows, budget)
    return max(1, min(k, budget - chain + 1))


def build_tree(
    tokens: np.ndarray, logp: np.ndarray, budget: int, chain_len: int | None = None, leaf_cap: int | None = None
) -> DraftTree:
    """DDTree best-first construction from per-position candidates (rows = block positions).

    ``chain_len`` seeds the greedy chain to that depth (default: as deep as rows and budget allow).
    ``leaf_cap`` bounds the number of leaves (each leaf is one KV sequence during verification):
    a node that would start a new branch beyond it is skipped; deepening a branch is still allowed.
    """
    n_pos, k = tokens.shape
    tree = DraftTree()
    if n_pos == 0 or budget <= 0:
        return tree
    # plain Python lists and floats: this loop runs every tree step, and numpy scalar indexing
    # costs several times a list's
    toks, lp = tokens.tolist(), logp.tolist()
    heap: list[tuple] = []  # (-score, tiebreak, depth, rank, parent, score): a max-heap via negation
    counter = 0
    push_ = heapq.heappush
    ninf = float("-inf")

    def push(score: float, depth: int, rank: int, parent: int) -> None:
        nonlocal counter
        if depth < n_pos and rank < k and score > ninf:
            push_(heap, (-score, counter, depth, rank, parent, score))
            counter += 1

    chain = min(n_pos, budget) if chain_len is None else min(chain_len, n_pos, budget)
    cap = budget if leaf_cap is None else max(1, leaf_cap)
    parent, score = -1, 0.0
    for d in range(chain):
        if k > 1:
            push(score + lp[d][1], d, 1, parent)  # the chain node's next sibling
        score += lp[d][0]
        parent = tree.add(toks[d][0], parent)
    if chain < n_pos:
        push(score + lp[chain][0], chain, 0, parent)

    while heap and len(tree) < budget:
        _, _, d, r, par, sc = heapq.heappop(heap)
        tok = toks[d][r]
        siblings = tree.children.get(par)
        if siblings is not None:
            if tok in siblings:
                continue
            if tree.n_leaves >= cap:  # a new branch; deepening a leaf would not add one
                continue
        node = tree.add(tok, par)
        if r + 1 < k:
            push(sc - lp[d][r] + lp[d][r + 1], d, r + 1, par)
        if d + 1 < n_pos:
            push(sc + lp[d + 1][0], d + 1, 0, node)
    return tree


def keep_path(tctx, pos: int, keep: int, win: int | None, n_leaves: int, all_seqs) -> None:
    """After a tree verify at ``pos``: keep the root and the first ``keep - 1`` nodes of the
    accepted path in the target's cache, in every sequence. Drops what lies deeper than the kept
    path, then the other branches' cells beside it (they hold no sequence of the winning leaf
    ``win``), then gives the path's cells to every sequence again. ``win`` None: only the root kept."""
    tctx.seq_rm(-1, pos + keep, -1)
    if win is None:
        return
    p0, p1 = pos + 1, pos + keep
    for seq in range(n_leaves):
        if seq != win:
            tctx.seq_rm(seq, p0, p1)
    for seq in all_seqs:
        if seq != win:
            tctx.seq_cp(win, seq, p0, p1)
