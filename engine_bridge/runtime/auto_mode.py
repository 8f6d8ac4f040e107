"""Verify mode ``auto``: autoregressive, chain or tree, and the budget, chosen step by step from the
machine's step costs (engine_bridge.runtime.calibration) and the pair's running commit lengths.

The policy (``AutoPolicy``) keeps, per (mode, budget), an exponential moving average of the commit
length. A chain step that drafted ``d`` tokens and had ``a`` accepted also tells what a chain of any
budget ``b <= d`` would have committed (``min(a, b) + 1``: acceptance is a prefix), so one chain
step updates every smaller chain budget; budgets never drafted are predicted by a geometric model
of per-token acceptance fitted to the same steps. Tree budgets are known only from tree steps.
Each step takes the fastest choice by the break-even rule (engine_bridge.runtime.breakeven), AR when no
speculative choice pays. While on AR it probes speculation now and then (a few chain steps at the
budget that would gain most if the drafter were right), with the interval doubling after each probe
that finds nothing, so a pair that starts paying (a new kind of prompt) is noticed at a small cost.
While speculating it now and then probes an alternative that the acceptance model says could beat
the current choice (each failed probe of it doubles its wait).

The run (``AutoGeneration``) switches between modes only between steps, and every step commits
exactly the target's own tokens, so greedy output is the target's whatever is chosen. Speculation
needs the drafter to hold the target's features of every committed token. AR steps decode with
feature extraction off, exactly as a plain AR generation does (on a GPU, extraction and a
per-step host copy of its row made each AR step of auto cost ~1.4 plain AR steps). When auto
turns to a speculative step after AR steps, the drafter is caught up first
(``Engine.catch_up_drafter``): the target's K/V of the tokens committed since the drafter was
last fed is removed and those tokens are decoded again in one batch with extraction on, their
features going into the drafter. The span is not bounded: the drafter attends to every injected
position, and a hole in its context (only the last N tokens re-decoded) would cost acceptance on
exactly the steps that decide whether speculation pays. The catch-up's time is charged to the
speculative step it precedes (its record's inject phase and wall time), so per-step costs stay
honest; the run's counts are in the summary's auto note. A recurrent or hybrid target cannot drop
a span of positions, so for one extraction stays on during AR steps and each step's feature row is
kept on the host, decoded into the drafter in one batch when speculation resumes.
"""

from __future__ import annotations

import ctypes
from collections import Counter

import numpy as np

from . import breakeven
from . import llama_ffi as ffi
from . import calibration
from . import tree as tree_mod
from .generation import Generation, now

PROBE_STEPS = 2               # steps per probe
PROBE_MAX_COST = 4.0          # AR probes use chain budgets whose step costs at most this many AR steps
AR_PROBE_FIRST = 32           # AR steps before the first re-probe; doubles after each probe...
AR_PROBE_MAX = 1024           # ...up to this
SPEC_PROBE_EVERY = 48         # while speculating, try a promising alternative at most this often
EMA = 0.1                     # weight of a new step in the running commit length
EMA_PROBE = 0.5               # ...for a probe's steps (the estimate they refresh may be old)


class AutoPolicy:
    """Chooses (mode, budget) before each step and learns from each step's record."""

    def __init__(self, table: calibration.CostTable, max_draft: int, margin: float = breakeven.DEFAULT_MARGIN):
        self.table = table
        self.key = table.key
        self.costs = table.costs()
        self.max_draft = max_draft
        self.margin = margin
        self.commit: dict[tuple[str, int], float] = {}     # running mean commit length (EMA)
        self.n_obs: Counter = Counter()
        self._acc = [0.0, 0.0]       # EMA of accepted and of tested draft positions (chain): alpha
        self.probe: tuple[str, int] | None = None      # the current (or just ended) probe
        self.probe_left = 0
        self.probing = False
        self.fails: Counter = Counter()                 # failed probes per (mode, budget)
        self.since_probe = AR_PROBE_FIRST   # nothing known yet: the first AR choice probes at once
        self.ar_probe_every = AR_PROBE_FIRST
        self.chain_budgets = sorted(b for m, b in self.costs if m == "chain")
        self.tree_budgets = sorted(b for m, b in self.costs if m == "tree")

    # -- what is known ------------------------------------------------------------------------------
    @property
    def alpha(self) -> float | None:
        """Per-token acceptance of chain drafts (given the previous draft was accepted)."""
        return self._acc[0] / self._acc[1] if self._acc[1] > 0 else None

    def estimates(self) -> dict[tuple[str, int], float | None]:
        """Commit length per (mode, budget): measured (EMA) where observed; chain budgets not yet
        drafted from the acceptance model; tree budgets not yet tried unknown (None)."""
        a = self.alpha
        out: dict[tuple[str, int], float | None] = {}
        for b in self.chain_budgets:
            k = ("chain", b)
            out[k] = self.commit.get(k, breakeven.geometric_commit(a, b) if a is not None else None)
        for b in self.tree_budgets:
            out[("tree", b)] = self.commit.get(("tree", b))
        return out

    def best(self) -> breakeven.Choice:
        """The choice the statistics favour now (no probing)."""
        return breakeven.choose(self.costs, self.estimates(), self.margin)

    # -- choosing -----------------------------------------------------------------------------------
    def choose(self) -> tuple[str, int]:
        """The (mode, budget) of the next step; ``probing`` says whether it is a probe."""
        self.probing = self.probe_left > 0
        if self.probe_left > 0:
            self.probe_left -= 1
            assert self.probe is not None       # set with probe_left
            return self.probe
        best = self.best()
        if self.probe is not None:       # a probe just ended: did it win?
            won = (best.mode, best.budget) == self.probe
            self.fails[self.probe] = 0 if won else self.fails[self.probe] + 1
            self.probe = None
        self.since_probe += 1
        if best.mode == "ar":
            if self.since_probe >= self.ar_probe_every:
                target = self._ar_probe_target()
                if target is not None:
                    self.ar_probe_every = min(self.ar_probe_every * 2, AR_PROBE_MAX)
                    return self._start_probe(target)
            return ("ar", 0)
        self.ar_probe_every = AR_PROBE_FIRST      # speculation pays: probe quickly if it stops
        alt = self._alternative(best)
        if alt is not None:
            return self._start_probe(alt)
        return (best.mode, best.budget)

    def _start_probe(self, target: tuple[str, int]) -> tuple[str, int]:
        self.probe, self.probe_left, self.since_probe = target, PROBE_STEPS - 1, 0
        self.probing = True
        return target

    def _ar_probe_target(self) -> tuple[str, int] | None:
        """The chain budget that would gain most if every draft were accepted (b + 1 over its cost),
        among those whose step costs at most PROBE_MAX_COST AR steps (what a probe may waste);
        budgets that could not pay even then are never probed."""
        best, gain = None, 1.0
        for b in self.chain_budgets:
            if self.costs[("chain", b)] > PROBE_MAX_COST:
                continue
            g = (b + 1) / self.costs[("chain", b)]
            if g > gain * (1.0 + self.margin):
                best, gain = ("chain", b), g
        return best

    def prior(self, mode: str, budget: int) -> float | None:
        """What the chain acceptance seen so far predicts for (mode, budget): a chain of that budget,
        or for a tree a chain as deep as the tree may grow."""
        a = self.alpha
        if a is None:
            return None
        return breakeven.geometric_commit(a, budget if mode == "chain" else min(budget, self.max_draft))

    def _alternative(self, current: breakeven.Choice) -> tuple[str, int] | None:
        """While speculating: another (mode, budget) worth a probe -- one whose optimistic estimate
        (the larger of its measured commit length and the acceptance model's) would beat the current
        choice, and whose last probes' back-off has run out (each failed probe doubles its wait)."""
        est = self.estimates()
        best, ratio = None, current.speedup * (1.0 + self.margin)
        for key, cost in self.costs.items():
            if key == (current.mode, current.budget):
                continue
            if self.since_probe < SPEC_PROBE_EVERY * 2 ** min(self.fails[key], 5):
                continue
            opt = max(est.get(key) or 0.0, self.prior(*key) or 0.0)
            if opt / cost > ratio:
                best, ratio = key, opt / cost
        return best

    # -- learning -----------------------------------------------------------------------------------
    def _update(self, key: tuple[str, int], commit: float, weight: float) -> None:
        old = self.commit.get(key)
        self.commit[key] = commit if old is None else old + weight * (commit - old)
        self.n_obs[key] += 1

    def observe(self, mode: str, budget: int, drafted: int, accepted: int, probing: bool = False) -> None:
        """One full step's outcome (a step cut short by the end of the run should not be given)."""
        w = EMA_PROBE if probing else EMA
        if mode == "chain" and drafted > 0:
            for b in self.chain_budgets:
                if b <= drafted:
                    self._update(("chain", b), min(accepted, b) + 1, w)
            tested = min(accepted + 1, drafted)
            self._acc = [(1 - w) * self._acc[0] + w * accepted, (1 - w) * self._acc[1] + w * tested]
        elif mode == "tree" and drafted > 0 and ("tree", budget) in self.costs:
            self._update(("tree", budget), accepted + 1, w)

    def observe_run(self, result) -> None:
        """Learns from a whole chain or tree run (the user's fixed mode, a bench row)."""
        s = result.summary
        if s is None or s.verify_mode not in ("chain", "tree"):
            return
        for rec in result.steps[:-1]:          # the last step may be cut short by the end
            self.observe("tree" if rec.tree_nodes else "chain", s.budget_effective, rec.drafted, rec.accepted)

    def describe(self) -> dict:
        b = self.best()
        return {"choice": b.label, "break_even": b.cost, "commit": b.commit, "alpha": self.alpha,
                "estimates": {f"{m} {k}": v for (m, k), v in self.estimates().items()}}


def policy_for(engine, progress=None) -> AutoPolicy | None:
    """The engine's policy for its current pair and machine, calibrating first if needed."""
    if engine.drafter is None:
        return None
    table = calibration.ensure(engine, progress=progress)
    pol = getattr(engine, "auto_policy", None)
    if pol is None or getattr(pol, "key", None) != table.key:
        pol = AutoPolicy(table, engine.drafter.max_draft)
        engine.auto_policy = pol
    return pol


class AutoGeneration(Generation):
    """A Generation whose every step runs the mode and budget the policy picks for it."""

    def __init__(self, engine, settings, on_token, on_step, cancel):
        pol = getattr(engine, "auto_policy", None)
        if pol is None or (engine.drafter is not None and isinstance(pol, AutoPolicy)
                           and pol.key != calibration.calibration_key(engine.config)):
            pol = policy_for(engine)
        self.policy = pol
        self.used: Counter = Counter()
        self._pending = None
        self._feats: np.ndarray | None = None    # features of AR-committed rows not yet in the drafter
        self._n_feats = 0                          # (kept only for targets without span rollback)
        self.lazy_features = bool(getattr(engine, "span_rollback", False))
        self.catchups = 0            # catch-ups run (each before a speculative step that followed AR)
        self.catchup_rows = 0        # tokens decoded again for them
        self._catchup_s = 0.0        # time of the catch-up not yet charged to a step record
        super().__init__(engine, settings, on_token, on_step, cancel)

    def _effective_budget(self) -> tuple[int, str]:
        if self.e.drafter is None or self.policy is None:
            self.mode = "ar"
            return 0, "auto: no drafter loaded, so autoregressive"
        mode, budget = self._allowed(*self.policy.choose())
        self.mode = mode
        self._pending = (mode, budget)        # the first step runs it without asking again
        return budget, ""

    def _allowed(self, mode: str, budget: int) -> tuple[str, int]:
        e = self.e
        if mode == "tree" and not e.tree_capable:
            return "chain", min(budget, e.drafter.max_draft)
        if mode == "tree":
            return mode, min(budget, e.tree_max_nodes)
        if mode == "chain":
            return mode, min(budget, e.drafter.max_draft)
        return "ar", 0

    def _step_function(self):
        return self._auto_step if self.e.drafter is not None else self._ar_step

    def _auto_step(self, last: int, t0: float):
        if self._pending is not None:
            (mode, budget), self._pending = self._pending, None
        else:
            mode, budget = self._allowed(*self.policy.choose())
        if (mode, budget) != (self.mode, self.budget):
            self._switch(mode, budget)
        probing = bool(getattr(self.policy, "probing", False))
        if self.lazy_features:
            if self.mode == "ar":
                self.e._set_extraction(False)    # a no-op unless prefill or the last step turned it on
            elif self.e.dft_valid != len(self.e.kv) and self.tree_seqs == 1:
                self._catch_up()                 # (_switch has done it; this only guards the invariant)
        n = len(self.steps)
        fn = {"ar": self._ar_step, "chain": self._chain_step, "tree": self._tree_step}[self.mode]
        last, done = fn(last, t0)
        if len(self.steps) > n:
            rec = self.steps[-1]
            self.used[(self.mode, self.budget)] += 1
            if self.mode == "ar":
                if not self.lazy_features:
                    self._keep_features()
            elif not done:
                kind = "tree" if rec.tree_nodes else "chain"
                self.policy.observe(kind, self.budget, rec.drafted, rec.accepted, probing=probing)
        return last, done

    # -- keeping the drafter's context whole across AR steps ------------------------------------------
    def _catch_up(self) -> None:
        """Before a speculative step: feeds the drafter the tokens committed by AR steps since it was
        last fed (none after a speculative step: then this only checks). Timed, and charged to the
        step that follows (``_record``)."""
        e = self.e
        if e.dft_valid == len(e.kv) and e._extracting:
            return
        t = now()
        n = e.catch_up_drafter()
        if n:
            self.catchups += 1
            self.catchup_rows += n
        self._catchup_s += now() - t

    def _record(self, rec) -> None:
        if self._catchup_s:
            # the catch-up fed the drafter (inject) in llama.cpp calls, for this step
            rec.t_inject += self._catchup_s
            rec.t_native += self._catchup_s
            rec.wall += self._catchup_s
            self._catchup_s = 0.0
        super()._record(rec)

    def _keep_features(self) -> None:
        """Only for targets that cannot drop a span of positions (recurrent, hybrid). After an AR
        step: keeps the target features of the row it decoded (extraction stays on in
        auto mode), to be decoded into the drafter in one batch when speculation resumes, or every
        n_ubatch rows. A per-step drafter decode would cost a little on every AR token."""
        e, d = self.e, self.e.drafter
        if e.dft_valid + self._n_feats != len(e.kv) - 1:
            return     # the drafter's context was not whole before this step: nothing to extend
        if self._feats is None:
            self._feats = np.zeros((e.target_ctx.n_ubatch, d.n_embd_enc), dtype=np.float32)
        nbytes = d.n_embd_tgt * 4
        dst = self._feats.ctypes.data + self._n_feats * self._feats.strides[0]
        for k, lid in enumerate(d.target_layers):    # one memmove per layer: this runs every AR step
            ctypes.memmove(dst + k * nbytes, ffi.llama_get_embeddings_layer_inp(e.target_ctx.ptr, lid), nbytes)
        self._n_feats += 1
        if self._n_feats == len(self._feats):
            self._flush_features()

    def _flush_features(self) -> None:
        e = self.e
        if self._n_feats:
            e.drafter.inject_features(self._feats, self._n_feats, e.dft_valid)
            e.dft_valid += self._n_feats
            self._n_feats = 0

    def _switch(self, mode: str, budget: int) -> None:
        e = self.e
        self._write_unwritten()               # a tree step's unwritten tokens, in every sequence
        if self.mode == "tree" and mode != "tree" and self.tree_seqs > 1:
            e.target_ctx.seq_keep(0)          # back to one sequence: AR and chain steps use seq 0
            self.tree_seqs, self.all_seqs = 1, [0]
        if mode != "ar":
            if self.lazy_features:
                self._catch_up()     # on sequence 0, before a tree's leaf sequences copy it
            else:
                self._flush_features()
        self.mode, self.budget = mode, budget
        self._choose_samplers()
        if mode == "tree":
            self._add_tree_seqs(min(e.tree_max_nodes, tree_mod.max_leaves(budget, e.drafter.max_draft)))

    def run(self, prompt):
        try:
            res = super().run(prompt)
        finally:
            if self.e.drafter is not None and not self.lazy_features:
                self._flush_features()         # the next request reuses the whole context
            # (lazy: the next request's prefill feeds the drafter from dft_valid on, as a catch-up)
        s = res.summary
        s.mode = "auto"
        if self.used:
            top = self.used.most_common()
            s.verify_mode = top[0][0][0]
            s.budget_effective = top[0][0][1]
            s.auto_note = "auto: " + ", ".join(
                ("AR" if m == "ar" else f"{m} {b}") + f" x{n}" for (m, b), n in top)
            if self.catchups:
                s.auto_note += (f"; drafter caught up {self.catchups} time{'s' if self.catchups > 1 else ''} "
                                f"on {self.catchup_rows} AR tokens")
        return res


def after_run(engine, settings, result) -> None:
    """After any generation: a chain/tree run teaches the pair's policy (if there is one), and the
    summary gets the break-even commit length of what ran, when a cost table is known."""
    s = result.summary
    if s is None:
        return
    pol = getattr(engine, "auto_policy", None)
    if settings.mode != "auto" and isinstance(pol, AutoPolicy):
        pol.observe_run(result)
    table = calibration.cached_for(engine) if engine.drafter is not None else None
    if table is None:
        return
    if s.verify_mode == "ar":
        # AR ran (auto chose it, or the user did): the best speculative rival is what to compare
        best = breakeven.best_candidate(pol.costs, pol.estimates()) if isinstance(pol, AutoPolicy) else None
        if best is None and settings.mode == "auto":
            # nothing probed yet (no step here could pay even if every draft were accepted): the
            # cheapest speculative step says what any speculation would need; commit unknown (0)
            costs = {k: v for k, v in table.costs().items()}
            if costs:
                (m, b), c = min(costs.items(), key=lambda kv: kv[1])
                best = breakeven.Choice(m, b, c, 0.0)
        if best is not None:
            s.break_even = best.cost
            s.break_even_label = best.label
            s.break_even_commit = best.commit
        return
    cost = table.cost(s.verify_mode, s.budget_effective)
    if cost is not None:
        s.break_even = cost
        s.break_even_label = f"{s.verify_mode} {s.budget_effective}"
        s.break_even_commit = s.mean_commit_len
