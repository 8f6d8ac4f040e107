"""What a generation reports: streamed tokens, one record per step, and a run summary.

These are plain data (no engine handles) so the GUI, the bench and the CLI can keep, plot and
export them, and so they pickle across threads.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field

PHASES = ("draft", "inject", "verify", "accept", "other")

#: Provenance of a committed token.
FROM_DRAFT = "draft"  # a drafted token the target accepted
FROM_TARGET = "target"  # the target's own token (bonus / correction / autoregressive)


@dataclass(frozen=True, slots=True)
class TokenEvent:
    """One committed token, streamed as soon as its step commits."""

    token: int
    piece: str  # text this token adds (UTF-8 safe: multibyte pieces arrive complete)
    source: str  # FROM_DRAFT | FROM_TARGET
    step: int  # index of the step that committed it (0-based)
    index: int  # index of the token in this generation (0-based)


@dataclass(slots=True)
class StepRecord:
    """One speculative (or autoregressive) step. Times are seconds of wall clock."""

    step: int
    pos: int  # target KV length when the step began
    drafted: int  # draft tokens proposed (0 in AR mode)
    accepted: int  # of those, accepted by the target
    committed: int  # tokens committed = accepted + 1 (fewer only when the run ends mid-step)
    t_draft: float = 0.0  # drafter decode + reading the draft
    t_inject: float = 0.0  # target features into the drafter's KV
    t_verify: float = 0.0  # target decode of [last, drafts...]
    t_accept: float = 0.0  # target sampling along the draft
    t_other: float = 0.0  # KV trims, bookkeeping, streaming callbacks
    t_native: float = 0.0  # time inside llama.cpp calls (host overhead = 1 - native / wall)
    wall: float = 0.0
    tree_nodes: int = 0  # tree mode: nodes verified
    tree_depth: int = 0  # tree mode: depth of the tree
    path_len: int = 0  # tree mode: accepted path length (== accepted)
    #: the target's top-2 logit margin at each committed token, in order (GenerationSettings.record_margins)
    margins: tuple[float, ...] = ()
    #: the request's first token, picked from the prompt's prefill (step 0): no decode of its own,
    #: its time is the prefill's (the run's TTFT), so it has no per-step rate
    prefill: bool = False

    @property
    def phases(self) -> dict[str, float]:
        return {p: getattr(self, f"t_{p}") for p in PHASES}

    @property
    def tok_per_s(self) -> float:
        """The step's decode rate; 0 for the prefill's token, whose ~0.1 ms pick would read as
        ~10,000 tok/s (its time is the prefill's: the run's TTFT)."""
        if self.prefill:
            return 0.0
        return self.committed / self.wall if self.wall > 0 else 0.0

    @property
    def host_overhead(self) -> float:
        return max(0.0, 1.0 - self.t_native / self.wall) if self.wall > 0 else 0.0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["tok_per_s"] = self.tok_per_s
        return d


@dataclass(frozen=True)
class VerifyBatch:
    """One tree step's verify decode, as it was sent to llama.cpp: row 0 is ``last`` at ``pos`` in
    every sequence, row i+1 is ``tokens[i]`` at ``pos + 1 + depth[i]`` in sequences ``seqs[i]``.
    Kept so that a parting can be judged in the very batch that made it (near_tie.parting)."""

    first: int  # index (in the generation) of the first token this step committed
    pos: int
    last: int
    n_seqs: int
    tokens: tuple[int, ...]
    depth: tuple[int, ...]
    seqs: tuple[tuple[int, ...], ...]
    rows: tuple[int, ...]  # the rows whose target picks were committed, in order

    def problems(self) -> list[str]:
        """What keeps this batch from being a tree whose rows see their ancestors only: in one
        unified cache a row attends to the cells that share a sequence with it, so each node's
        sequences must lie within its parent's, siblings' must be disjoint, and the committed rows
        must follow one root-to-leaf path. Checked before a replay is trusted (near_tie)."""
        out = []
        root = frozenset(range(self.n_seqs))
        sets = [frozenset(s) for s in self.seqs]
        if not (len(self.tokens) == len(self.depth) == len(sets)):
            return [f"{len(self.tokens)} tokens, {len(self.depth)} depths, {len(sets)} sequence sets"]
        parent = []
        for i, (d, st) in enumerate(zip(self.depth, sets)):
            if not st or not st <= root:
                out.append(f"node {i}: sequences {sorted(st)} not within 0..{self.n_seqs - 1}")
            ups = [-1] if d == 0 else [j for j in range(len(sets)) if self.depth[j] == d - 1 and st <= sets[j]]
            if len(ups) != 1:
                out.append(f"node {i} (depth {d}): {len(ups)} parents")
            parent.append(ups[0] if ups else None)
            for j in range(i):
                if self.depth[j] == d and parent[j] == parent[i] and sets[j] & st:
                    out.append(f"nodes {j} and {i}: siblings sharing sequences {sorted(sets[j] & st)}")
        prev = -1
        for r in self.rows[1:]:
            if not 1 <= r <= len(sets) or parent[r - 1] != prev:
                out.append(f"committed row {r} does not continue the path after node {prev}")
                break
            prev = r - 1
        return out


@dataclass
class RunSummary:
    mode: str
    n_prompt: int  # prompt tokens
    n_prompt_reused: int  # of those, served from the KV of an earlier turn
    n_generated: int
    n_steps: int
    n_drafted: int
    n_accepted: int
    t_prefill: float
    t_first_token: float  # from request to the first committed token
    t_generate: float  # from the end of prefill to the last commit
    budget_requested: int
    budget_effective: int
    budget_note: str  # why the budget was clamped, if it was
    finish_reason: str  # eog | max_tokens | context_full | cancelled
    verify_mode: str = "chain"
    # does speculation pay? (engine_bridge.runtime.breakeven; 0 / "" when no cost table is known)
    break_even: float = 0.0  # commit length a step of `break_even_label` must reach to beat AR
    break_even_label: str = ""  # the mode and budget it refers to, e.g. "chain 7"
    break_even_commit: float = 0.0  # the commit length measured for it (running mean)
    auto_note: str = ""  # auto mode: what ran, e.g. "auto: chain 4 x30, AR x5"
    #: the target's decodes after prefill that kept llama.cpp's compute graph; a step whose batch
    #: shape changed rebuilt and re-allocated it (host time on every step it happens)
    graphs_reused: int = 0

    @property
    def mean_commit_len(self) -> float:
        return self.n_generated / self.n_steps if self.n_steps else 0.0

    @property
    def acceptance_rate(self) -> float:
        return self.n_accepted / self.n_drafted if self.n_drafted else 0.0

    @property
    def tok_per_s(self) -> float:
        return self.n_generated / self.t_generate if self.t_generate > 0 else 0.0

    @property
    def prefill_tok_per_s(self) -> float:
        fresh = self.n_prompt - self.n_prompt_reused
        return fresh / self.t_prefill if self.t_prefill > 0 else 0.0

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(
            mean_commit_len=self.mean_commit_len,
            acceptance_rate=self.acceptance_rate,
            tok_per_s=self.tok_per_s,
            prefill_tok_per_s=self.prefill_tok_per_s,
        )
        return d


@dataclass
class GenerationResult:
    text: str
    tokens: list[int]
    sources: list[str]
    steps: list[StepRecord] = field(default_factory=list)
    summary: RunSummary | None = None
    #: tree steps' verify batches, when the engine was asked to keep them (``Engine.record_verify``)
    verify_batches: list["VerifyBatch"] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "text": self.text,
            "tokens": self.tokens,
            "sources": self.sources,
            "summary": self.summary.to_dict() if self.summary else None,
            "steps": [s.to_dict() for s in self.steps],
        }

    def phase_means(self) -> dict[str, float]:
        if not self.steps:
            return {p: 0.0 for p in PHASES}
        return {p: statistics.fmean(getattr(s, f"t_{p}") for s in self.steps) for p in PHASES}

    def host_overhead(self) -> float:
        wall = sum(s.wall for s in self.steps)
        native = sum(s.t_native for s in self.steps)
        return max(0.0, 1.0 - native / wall) if wall > 0 else 0.0
