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
the current choice (each failed probe of it doubles its wait), and it keeps the choice it runs unless
another reads HOLD_MARGIN faster: a new budget is a new verify shape, whose graph a GPU builds again.

The policy keeps these statistics per kind of text (prose, code, arithmetic: text_kind), so when an
answer changes kind auto switches to what that kind last paid at once, or probes a kind not seen
yet, instead of waiting for a running mean to drift or for a probe interval grown over a long
stretch of the other kind. ``best()`` is kept until the statistics change, so an AR step asks the
policy for well under a microsecond. The cost table is compared with the steps being run: when a
configuration's recent steps are more than RECHECK_FACTOR off the table (a calibration taken on a
busy machine), the next auto request measures it again (``recheck``).

The run (``AutoGeneration``) switches between modes only between steps, and every step commits
exactly the target's own tokens, so greedy output is the target's whatever is chosen. Speculation
needs the drafter to hold the target's features of every committed token. Where no step could pay
even at the best acceptance any drafter reaches (``PROBE_ALPHA``; ``AutoPolicy.needs_drafter``), the
drafter is not fed at all:
prefill and AR steps run with extraction off, exactly as plain AR. Otherwise AR steps keep the
drafter's context by one of two paths (``feature_path``). By default ("host", on CPU and on a GPU),
extraction stays on and each AR step's feature row is copied to the host (a few kilobytes), decoded
into the drafter in one batch when speculation resumes: no toggling of extraction (each toggle makes
llama.cpp reserve its compute graphs again: ~7 ms on an H100) and no re-decode. The other path
("redecode", by choice) decodes AR steps with extraction off, and when auto turns to a speculative
step the drafter is caught up first (``Engine.catch_up_drafter``): the target's K/V of the tokens
committed since the drafter was last fed is removed and those tokens are decoded again in one batch
with extraction on. The span is not
bounded: the drafter attends to every injected position, and a hole in its context would cost
acceptance on exactly the steps that decide whether speculation pays. The catch-up's time is
charged to the speculative step it precedes (its record's inject phase and wall time), so per-step
costs stay honest; the run's counts are in the summary's auto note. A recurrent or hybrid target
cannot drop a span of positions, so for one the host path is the only one.
"""

from __future__ import annotations

import ctypes
import os
import time
from collections import Counter, deque

import numpy as np

from . import breakeven
from . import llama_ffi as ffi
from . import calibration
from . import text_kind
from . import tree as tree_mod
from .generation import Generation, now

PROBE_STEPS = 2  # steps per probe
PROBE_MAX_COST = 4.0  # AR probes use chain budgets whose step costs at most this many AR steps
#: ...and that would pay at this acceptance per draft position (commit 1 + a + ... + a^b): above the
#: best published DFlash drafters (z-lab's on Qwen3-Coder-30B-A3B, HumanEval: 8.0 tokens a step at 15
#: drafts, ~0.90 a position by the geometric model; docs in shared/docs/field/drafter-training.md), so only budgets that no
#: drafter could make pay are never probed. With every draft accepted (1.0, the rule before) the
#: 2-vCPU machine probed chain 3 of the default pair, which costs 3.79 AR steps there and pays only
#: at a commit of 3.98 of at most 4: ~8 AR steps lost per probe, never repaid.
PROBE_ALPHA = 0.95
#: Which of those budgets an AR probe runs: the one with the best commit / cost at the chain
#: acceptance seen so far, or at this one where that is lower or nothing is known yet (a fair
#: drafter's: the drafter shipped when this was set (sitting 5) accepts 2.26 drafts per 16-token
#: block on its training sources' validation split, ~0.70 a position by the geometric model, and
#: sitting 7's 2.52, ~0.72, sitting 8's 2.74, ~0.73; resources/models/smollm2/card.md).
#: A probe exists to notice a drafter that pays; it tests the budget auto would then run,
#: whose steps tell every smaller budget's commit as well. The cheapest budget (the rule before)
#: tells only the first position's acceptance, and on a GPU, whose drafter decodes whole blocks, a
#: chain-1 step costs nearly a chain-7 step (calibrated on an H200: 1.74 against 2.05 AR steps): auto
#: probed chain 1 and ran 88-92 % of its GSM8K steps as AR where chain 7 paid 1.12-1.2x.
PROBE_PRIOR_ALPHA = 0.7
#: Environment variable: "cheapest" restores the earlier probe rule and EMA weight
#: (the cheapest eligible budget, EMA_BEFORE), for measuring one against the other.
PROBE_ENV = "DFLASH_AUTO_PROBE"
AR_PROBE_FIRST = 32  # AR steps before the first re-probe; doubles after each probe...
AR_PROBE_MAX = 1024  # ...up to this
#: ...and is never shorter than what keeps a failed probe's waste (PROBE_STEPS steps, each costing
#: its table cost in AR steps where an AR step would have cost 1) under this share of AR time: on an
#: H100, where a chain-3 step costs ~1.8 AR steps, that is ~80 steps between probes, not 32
PROBE_SHARE = 0.02
SPEC_PROBE_EVERY = 48  # while speculating, try a promising alternative at most this often
#: Weight of a new step in the running commit length. 0.05, not 0.1: a chain-7 step commits 1 to 8
#: tokens, so at 0.1 the mean of a chain that pays by 15-20 % (GSM8K on an H200: 2.72 against a
#: break-even of 2.44) fell under break-even + margin within a few bad steps and auto left for AR.
#: Simulated on the H200's measured costs (benchmarks/bench_auto_policy_sim.py --table), this weight
#: with the probe rule above took auto from 0.985 to 1.231x AR where chain 7 alone runs at 1.253x,
#: and 0.992 -> 0.987 where nothing pays; on the H200 GSM8K 0.91-0.94 -> 0.96-1.09x AR
#: (docs/benchmarks.md, "Auto probes the budget it would run").
#: 0.025 since 2026-11-27, with the stay band (STAY_MARGIN): the exit then reads a longer window than
#: a probe's entry (EMA_PROBE), so a run of rejected drafts in code no longer sends auto to AR for
#: hundreds of steps (DFLASH_AUTO_EMA=0.05 DFLASH_AUTO_STAY=0: the rule before).
EMA = 0.025
EMA_BEFORE = 0.1  # (DFLASH_AUTO_PROBE=cheapest: the earlier weight, with the earlier probe rule)
EMA_PROBE = 0.5  # ...for a probe's steps (the estimate they refresh may be old)
EMA_ENV = "DFLASH_AUTO_EMA"  # Environment variable: another weight, for measuring one against the default
#: While speculating, auto keeps its choice until its commit estimate falls below its break-even by
#: this share, where it enters only above break-even by the margin (breakeven.DEFAULT_MARGIN). A
#: chain-7 step's commit length ranges from 1 to 8, so the EMA of one that pays by 10-20 % (GSM8K
#: and HumanEval on an H200) crossed break-even + 5 % within a few bad steps, auto left for AR, and
#: the next probe was hundreds of steps away: over 90 % of its steps were AR.
#: With the deeper budgets' refresh in ``observe``. The default since 2026-11-27 (DFLASH_AUTO_STAY=0
#: turns it off), together with EMA 0.025: replayed on the training sources' validation split under
#: the H200's costs (benchmarks/bench_auto_trace.py, 30 prompts a category, sitting 7's drafter) auto
#: went 1.052 -> 1.267 on code (chain 7 alone: 1.313), 1.323 -> 1.323 on math and 0.990 -> 0.991 on
#: chat; on an H200, public prompts, two runs: HumanEval 1.04 -> 1.10-1.11x AR, GSM8K 1.02-1.09 ->
#: 1.11-1.13x, MT-Bench 0.87-0.94 -> 0.82-0.88x (docs/benchmarks.md, "Auto stays through a bad
#: streak"). Earlier, alone and opt-in, it read 0.82 -> 0.82 on an H200 (sitting 5's drafter).
STAY_MARGIN = 0.05
STAY_ENV = "DFLASH_AUTO_STAY"
#: How a chain budget's commit length is estimated. "geometric" (the rule before): a budget's own
#: running mean where it was run, else a geometric model of one acceptance rate for every position.
#: "positions": the acceptance measured at each draft position (given the one before was accepted),
#: a budget's commit the sum of its positions' survival products, each position leaning on the rate
#: before it (POSITION_PRIOR) and one never reached taking that rate. Every budget is then read from
#: the same steps, so a deep budget is not judged by an optimistic model against a shallow one's
#: measured mean: acceptance falls with the position (sitting 8's drafter on GSM8K, the full set:
#: chain 7 commits 3.08, chain 15 3.15, where one rate fitted to chain 7 predicts ~3.3). Opt-in
#: (DFLASH_AUTO_EST=positions): it ranked mixed on the validation split's trace and on the
#: position-decay simulation (docs/benchmarks.md, "Auto holds the chain it runs"), and where nothing
#: pays it speculated more than the geometric estimate (test_auto_estimate_and_hold.py).
ESTIMATOR = "geometric"
ESTIMATOR_ENV = "DFLASH_AUTO_EST"
ESTIMATORS = ("positions", "geometric")
#: How many chain steps' worth of PROBE_PRIOR_ALPHA the acceptance behind the geometric estimates
#: carries (a budget never run, and the deeper budgets' refresh in ``observe``): the estimate reads
#: (n * alpha + k * prior) / (n + k) after n chain steps of the current kind of text; the optimistic
#: side (probes, ``prior()``) keeps the measured alpha. Opt-in (DFLASH_AUTO_PRIOR_STEPS=4), off by
#: default (0: the measured rate alone). It was made for the 2-vCPU Xeon's native build, where the two
#: steps of a first chain-2 probe that had all four drafts accepted read alpha 1.0, every budget never
#: run as committing all its drafts, and auto ran chain 15 (6.3 AR steps a step there) for the next
#: four steps, and again when the text turned to code (a new kind starts from the current one's
#: figures). On the H100 (sitting s77, per process, 24 prompts a suite, 2 rounds) k = 4 read 0.967x of
#: k = 0 on auto (MT-Bench 0.933x: high-acceptance chat prompts decoded AR throughout), and on that CPU
#: it was not measured to pay (docs/benchmarks.md, "Auto on a CPU where speculation does not pay").
PRIOR_STEPS = 0.0
PRIOR_STEPS_ENV = "DFLASH_AUTO_PRIOR_STEPS"
#: While speculating, auto keeps the chain or tree it runs unless another reads this share faster.
#: Each change of budget changes the verify's shape, and on a GPU the target's graph is then built
#: again (llama.cpp reuses a graph only for the same shape): in the bench on an H200 auto's verify
#: phase took 1.85-2.19 ms a step against chain 7's 1.70-1.89 in the same process while running chain
#: 7 most of the time, and its graphs were reused on 84 % of its steps against chain 7's 93 %.
#: Replayed on the training sources' validation split under the H200's costs (bench_auto_trace.py),
#: auto changed its speculative configuration 93 times in 12 code answers and 59 in 12 math answers
#: (chain 7 alone: 12 and 13). With the hold: 28 changes on code and 16 on math, and on the H200
#: (first 12 prompts, two runs a side) auto 1.154 / 1.138 -> 1.251 / 1.196x AR on GSM8K and 0.982 /
#: 0.930 -> 1.021 / 1.071x on HumanEval, its graphs reused on 93 / 91 % of its steps (88 / 80 %)
#: (docs/benchmarks.md, "Auto holds the chain it runs"). DFLASH_AUTO_HOLD=0: no hold (the rule before).
HOLD_MARGIN = 0.05
HOLD_ENV = "DFLASH_AUTO_HOLD"
#: A follow-up request in a conversation probes at its first AR choice (``AutoPolicy.start_request``).
#: Each user turn may read differently from the last, and the conversation's own earlier answers make
#: the windowed drafter better as it grows, while the AR probe interval (PROBE_SHARE's floor, ~500 AR
#: steps on an H200 with its switch cost) spans several answers: in a 30-question MT-Bench chat on an
#: H200, auto ran AR through most of three answers after one weak one, where chain 7 committed 5.1,
#: 6.1 and 2.8 tokens a step (docs/benchmarks.md, "The window on the GPU"). Replayed under the H200's
#: costs (benchmarks/bench_auto_trace.py --chat 30), auto went 1.243 -> 1.335x AR over the validation
#: split's chat (chain 7 alone 1.396) and 1.026 -> 1.122x over MT-Bench's (1.169). A new conversation
#: keeps the statistics it has: probing every request took single validation chat prompts from 0.980 to
#: 0.938x AR. DFLASH_AUTO_REQUEST_PROBE: "0" never (the rule before), "1" every request.
REQUEST_PROBE_ENV = "DFLASH_AUTO_REQUEST_PROBE"
#: Calibration re-check: a configuration's recent step walls (lower quartile of RECHECK_WINDOW steps)
#: more than RECHECK_FACTOR times off the table's figure, either way, make the table suspect; the
#: next auto request measures it again (not sooner than RECHECK_MIN_S after the last re-check).
RECHECK_WINDOW = 32
RECHECK_FACTOR = 1.5
RECHECK_MIN_S = 120.0
#: A new kind of text (text_kind) counts once the tracker has said it after this many steps in a row.
KIND_STEPS = 2
#: While speculating, auto weighs its choice again every this many steps, and runs the one it holds in
#: between; the steps' outcomes are learnt in one go before each decision. Its Python ran 85.8 us a
#: step outside the steps on an H200 against chain's 14.0 (2.9 % of its time on HumanEval;
#: docs/benchmarks.md, "Where auto's time goes, step by step"): right after a step's native work the
#: policy's few hundred bytecodes run from cold caches, 3-4x their time in a tight loop. The
#: estimates move slowly (EMA 0.025: ~40 steps), so a decision 1-3 steps late costs little; probes
#: start and end on time. DFLASH_AUTO_DECIDE_EVERY=1: every step (the rule before).
DECIDE_EVERY = 4
DECIDE_ENV = "DFLASH_AUTO_DECIDE_EVERY"
#: What the policy keeps per kind of text: each kind has its own commit lengths, acceptance, failed
#: probes and probe schedule.
_PER_KIND = ("commit", "n_obs", "_acc", "_pos", "fails", "since_probe", "ar_probe_every")


class AutoPolicy:
    """Chooses (mode, budget) before each step and learns from each step's record."""

    def __init__(self, table: calibration.CostTable, max_draft: int, margin: float = breakeven.DEFAULT_MARGIN):
        self.table = table
        self.key = table.key
        self.costs = table.costs()
        self.max_draft = max_draft
        self.margin = margin
        self.commit: dict[tuple[str, int], float] = {}  # running mean commit length (EMA)
        self.n_obs: Counter = Counter()
        self._acc = [0.0, 0.0]  # EMA of accepted and of tested draft positions (chain): alpha
        #: per draft position k (index k - 1): EMA of [accepted, tested] over the chain steps that
        #: tested it (ESTIMATOR "positions")
        self._pos = np.zeros((max(max_draft, 1), 2))
        self.probe: tuple[str, int] | None = None  # the current (or just ended) probe
        self.probe_left = 0
        self.probing = False
        self.fails: Counter = Counter()  # failed probes per (mode, budget)
        self.since_probe = AR_PROBE_FIRST  # nothing known yet: the first AR choice probes at once
        self.ar_probe_every = AR_PROBE_FIRST
        self.ar_probe_max = AR_PROBE_MAX  # (attributes, so that benchmarks/bench_auto_trace.py can vary them)
        self.ema_probe = EMA_PROBE
        self._index_costs()
        self.kind = text_kind.PROSE
        self._kinds: dict[str, dict] = {}  # the other kinds' statistics (_PER_KIND)
        self._best: breakeven.Choice | None = None  # best() until the next observation (cache)
        #: the estimates best() chose from, read again by _alternative in the same step (each
        #: observation resets _best, and with it these)
        self._est: dict[tuple[str, int], float | None] | None = None
        self._probe_target: tuple[str, int] | None | bool = False  # False: not computed yet
        #: the geometric commit at each draft depth (_depths) for the acceptance _geo_a (_geo)
        self._geo_a: float | None = None
        self._geo_v: dict[int, float] = {}
        #: steps left that run the held choice without weighing it (DECIDE_EVERY), and the
        #: outcomes of the steps since the last decision, not learnt yet (_learn)
        self._hold_left = 0
        self._unlearnt: list[tuple[str, int, int, int, bool]] = []
        self._walls: dict[tuple[str, int], deque] = {}  # recent step walls (s) per configuration
        self.suspect = ""  # why the cost table disagrees with the steps measured ("" if it does not)
        self.recheck_factor = RECHECK_FACTOR
        self.rechecks = 0
        self.recheck_at = 0.0  # time.time() of the last re-check
        self.last_recheck = ""
        #: what a switch from AR into speculation and back costs beyond the steps' table costs, in AR
        #: steps (EMA over switches seen): graphs built and captured again for the other shapes, the
        #: kept features decoded into the drafter. ~0 on CPU; a round trip took 7-9 AR steps on an H200.
        self.switch_cost = 0.0
        #: the speculative choice being run (not a probe), kept through the stay band (STAY_MARGIN)
        self.current: tuple[str, int] | None = None
        self.probe_cheapest = os.environ.get(PROBE_ENV, "").strip() == "cheapest"
        #: which new requests probe at once: "follow-up" (the default), "every" or "never"
        rp = os.environ.get(REQUEST_PROBE_ENV, "").strip()
        if rp not in ("", "0", "1"):
            raise ValueError(
                f"{REQUEST_PROBE_ENV}={rp!r}: expected 0 (never), 1 (every request) or unset (a chat's follow-ups)"
            )
        self.request_probe = {"0": "never", "1": "every"}.get(rp, "follow-up")
        # on unless DFLASH_AUTO_STAY=0, or with the earlier probe rule (which it postdates)
        stay_off = os.environ.get(STAY_ENV, "").strip() == "0" or self.probe_cheapest
        self.stay_margin = 0.0 if stay_off else STAY_MARGIN
        self.ema = EMA_BEFORE if self.probe_cheapest else EMA
        self.estimator = os.environ.get(ESTIMATOR_ENV, "").strip() or ESTIMATOR
        hold = os.environ.get(HOLD_ENV, "").strip()
        try:
            self.hold_margin = (0.0 if self.probe_cheapest else HOLD_MARGIN) if not hold else max(float(hold), 0.0)
        except ValueError:
            raise ValueError(f"{HOLD_ENV}={hold!r}: expected a share such as 0.05 (0: no hold)") from None
        every = os.environ.get(DECIDE_ENV, "").strip()
        try:
            self.decide_every = max(int(every), 1) if every else DECIDE_EVERY
        except ValueError:
            raise ValueError(f"{DECIDE_ENV}={every!r}: expected a step count such as 4 (1: every step)") from None
        if self.estimator not in ESTIMATORS:
            raise ValueError(f"{ESTIMATOR_ENV}={self.estimator!r}: expected one of {', '.join(ESTIMATORS)}")
        prior = os.environ.get(PRIOR_STEPS_ENV, "").strip()
        try:
            self.prior_steps = max(float(prior), 0.0) if prior else PRIOR_STEPS
        except ValueError:
            raise ValueError(f"{PRIOR_STEPS_ENV}={prior!r}: expected a step count such as 4 (0: no prior)") from None
        ema = os.environ.get(EMA_ENV, "").strip()
        if ema:  # a weight measured against the default (DFLASH_AUTO_EMA=0.025)
            try:
                self.ema = min(max(float(ema), 0.001), 1.0)
            except ValueError:
                pass

    def _index_costs(self) -> None:
        """What the per-step work reads of the cost table, computed once per table: the budgets, their
        keys, and each configuration's (key, cost, draft depth) for _alternative."""
        self.chain_budgets = sorted(b for m, b in self.costs if m == "chain")
        self.tree_budgets = sorted(b for m, b in self.costs if m == "tree")
        self._chain_keys = [(b, ("chain", b)) for b in self.chain_budgets]
        self._tree_keys = [("tree", b) for b in self.tree_budgets]
        # a tree's prior is a chain as deep as it may grow (prior())
        self._alt_items = [
            (k, c, k[1] if k[0] == "chain" else min(k[1], self.max_draft)) for k, c in self.costs.items()
        ]
        self._depths = sorted({d for _, _, d in self._alt_items})
        self._geo_a = None

    def _geo(self, a: float) -> dict[int, float]:
        """breakeven.geometric_commit(a, d) for every depth the table needs, computed once per
        acceptance (the same expression, so the same floats): observe, the estimates and
        _alternative all read it in the same step."""
        if a != self._geo_a:
            al = min(max(a, 0.0), 1.0)
            if al >= 1.0:
                self._geo_v = {d: float(d + 1) for d in self._depths}
            else:
                inv = 1.0 - al
                self._geo_v = {d: (1.0 - al ** (d + 1)) / inv for d in self._depths}
            self._geo_a = a
        return self._geo_v

    def set_table(self, table: calibration.CostTable) -> None:
        """New step costs (a re-measured table of the same key); what was learnt about the pair stays."""
        self._learn()
        self.table, self.costs = table, table.costs()
        self._index_costs()
        self._best, self._probe_target = None, False
        self._walls.clear()
        self.suspect = ""

    def start_request(self, follow_up: bool) -> None:
        """A new request begins (``follow_up``: it continues the previous one's conversation). Per
        ``request_probe`` its first AR choice probes; the interval's doubling goes on as after any
        probe, so a chat that never pays pays one probe a turn."""
        self._learn()
        self._hold_left = 0  # (a new request decides at its first step)
        wanted = self.request_probe == "every" or (self.request_probe == "follow-up" and follow_up)
        if wanted and self.current is None and self.probe_left == 0:
            self.since_probe = max(self.since_probe, self.ar_probe_every)

    # -- the kind of text ---------------------------------------------------------------------------
    def set_kind(self, kind: str) -> None:
        """The text turned to another kind (text_kind): its own statistics apply from the next step;
        a kind never seen starts from the current kind's estimates, and the next AR choice probes it
        at once."""
        if kind == self.kind:
            return
        self._learn()  # (the steps so far taught the kind they were in)
        self._hold_left = 0
        self._kinds[self.kind] = {a: getattr(self, a) for a in _PER_KIND}
        saved = self._kinds.pop(kind, None)
        if saved is None:
            # what the other kind taught is the prior (a probe's steps weigh EMA_PROBE against it),
            # and the next AR choice probes
            saved = {
                "commit": dict(self.commit),
                "n_obs": Counter(),
                "_acc": list(self._acc),
                "_pos": self._pos.copy(),
                "fails": Counter(),
                "since_probe": AR_PROBE_FIRST,
                "ar_probe_every": AR_PROBE_FIRST,
            }
        for a, v in saved.items():
            setattr(self, a, v)
        self.kind = kind
        self._best, self._probe_target = None, False
        self.current = None  # the new kind's own statistics decide afresh

    # -- what is known ------------------------------------------------------------------------------
    @property
    def alpha(self) -> float | None:
        """Per-token acceptance of chain drafts (given the previous draft was accepted)."""
        if self._unlearnt:
            self._learn()
        return self._acc[0] / self._acc[1] if self._acc[1] > 0 else None

    def estimates(self) -> dict[tuple[str, int], float | None]:
        """Commit length per (mode, budget). Chain budgets: from the acceptance per position where
        one was measured (ESTIMATOR "positions"); else measured (EMA) where observed, and not yet
        drafted from the geometric acceptance model. Tree budgets not yet tried unknown (None)."""
        self._learn()
        return self._estimates(self.commit, self._acc, self._pos, self.n_obs)

    def _chain_steps(self, n_obs: Counter) -> int:
        """Chain steps learnt in the current kind (each one updates the shallowest budget)."""
        return n_obs[self._chain_keys[0][1]] if self._chain_keys else 0

    def _settled(self, a: float | None, n_obs: Counter) -> float | None:
        """The acceptance the geometric estimates read: ``a`` leaning on PROBE_PRIOR_ALPHA by
        PRIOR_STEPS chain steps' worth, so that a few steps do not set it alone."""
        k = self.prior_steps
        if a is None or k <= 0.0:
            return a
        n = self._chain_steps(n_obs)
        return (n * a + k * PROBE_PRIOR_ALPHA) / (n + k)

    def _estimates(
        self, commit: dict, acc: list[float], pos: np.ndarray, n_obs: Counter
    ) -> dict[tuple[str, int], float | None]:
        a = self._settled(acc[0] / acc[1] if acc[1] > 0 else None, n_obs)
        by_pos = position_commits(pos, self.chain_budgets) if self.estimator == "positions" else None
        out: dict[tuple[str, int], float | None] = {}
        if by_pos is not None:
            for b, k in self._chain_keys:
                out[k] = by_pos[b]
        else:
            geo = None
            for b, k in self._chain_keys:
                v = commit.get(k)  # (the model's figure only where none was measured)
                if v is None and a is not None:
                    geo = geo or self._geo(a)
                    v = geo[b]
                out[k] = v
        for k in self._tree_keys:
            out[k] = commit.get(k)
        return out

    def _estimates_now(self) -> dict[tuple[str, int], float | None]:
        """The estimates of the statistics as they are: best()'s while it is cached (every
        observation resets both), else computed."""
        if self._best is not None and self._est is not None:
            return self._est
        return self.estimates()

    def best(self) -> breakeven.Choice:
        """The choice the statistics favour now (no probing); kept until the statistics change, so
        a long stretch of AR steps asks for it in well under a microsecond per step."""
        if self._unlearnt:
            self._learn()
        if self._best is None:
            self._est = self.estimates()
            self._best = breakeven.choose(self.costs, self._est, self.margin)
        return self._best

    @property
    def can_probe(self) -> bool:
        """Whether any chain budget could pay on this machine if its drafts were all accepted (else
        auto never probes: speculation cannot pay here, whatever the drafter)."""
        return self._ar_probe() is not None

    def needs_drafter(self) -> bool:
        """Whether a step of this policy may speculate: if not, the drafter's context need not be fed."""
        self._learn()
        return (
            self.can_probe
            or self.best().mode != "ar"
            or any(
                breakeven.choose(self.costs, st_commit, self.margin).mode != "ar"
                for st_commit in self._other_kinds_estimates()
            )
        )

    def _other_kinds_estimates(self):
        for st in self._kinds.values():
            yield self._estimates(st["commit"], st["_acc"], st["_pos"], st["n_obs"])

    # -- choosing -----------------------------------------------------------------------------------
    def choose(self) -> tuple[str, int]:
        """The (mode, budget) of the next step; ``probing`` says whether it is a probe."""
        self.probing = self.probe_left > 0
        if self.probe_left > 0:
            self.probe_left -= 1
            assert self.probe is not None  # set with probe_left
            return self.probe
        if self._hold_left > 0:  # the held choice runs without being weighed (DECIDE_EVERY)
            self._hold_left -= 1
            self.since_probe += 1
            assert self.current is not None  # set with _hold_left
            return self.current
        best = self.best()
        if self.probe is not None:  # a probe just ended: did it win?
            won = (best.mode, best.budget) == self.probe
            self.fails[self.probe] = 0 if won else self.fails[self.probe] + 1
            self.probe = None
        self.since_probe += 1
        if best.mode == "ar" and self._stays():
            assert self.current is not None
            return self.current
        if best.mode == "ar":
            self.current = None
            if self.since_probe >= self.ar_probe_every:
                target = self._ar_probe()
                if target is not None:
                    floor = (PROBE_STEPS * (self.costs[target] - 1.0) + self.switch_cost) / PROBE_SHARE
                    self.ar_probe_every = int(min(max(self.ar_probe_every * 2, floor), self.ar_probe_max))
                    return self._start_probe(target)
            return ("ar", 0)
        self.ar_probe_every = AR_PROBE_FIRST  # speculation pays: probe quickly if it stops
        alt = self._alternative(best)
        if alt is not None:
            return self._start_probe(alt)
        held = self.current if self._holds(best) else None
        self.current = held or (best.mode, best.budget)
        self._hold_left = self.decide_every - 1
        return self.current

    def _holds(self, best: breakeven.Choice) -> bool:
        """Whether the speculative choice being run is kept although another one now reads faster:
        it still pays, and the other's speedup is not HOLD_MARGIN above its own."""
        if self.current is None or self.hold_margin <= 0.0 or self.current == (best.mode, best.budget):
            return False
        cost, commit = self.costs.get(self.current), self._estimates_now().get(self.current)
        if cost is None or commit is None or commit < cost * (1.0 + self.margin):
            return False
        return best.speedup <= (commit / cost) * (1.0 + self.hold_margin)

    def _stays(self) -> bool:
        """Whether the speculative choice being run is kept although it no longer pays by the margin:
        its estimate is still within STAY_MARGIN below break-even (a step or two of bad luck)."""
        if self.current is None or self.stay_margin <= 0.0:
            return False
        cost, commit = self.costs.get(self.current), self._estimates_now().get(self.current)
        return cost is not None and commit is not None and commit >= cost * (1.0 - self.stay_margin)

    def _start_probe(self, target: tuple[str, int]) -> tuple[str, int]:
        self.probe, self.probe_left, self.since_probe = target, PROBE_STEPS - 1, 0
        self.probing = True
        return target

    def _ar_probe(self) -> tuple[str, int] | None:
        if self._probe_target is False:
            self._probe_target = self._ar_probe_target()
        target = self._probe_target
        return None if isinstance(target, bool) else target  # never True; False is replaced above

    def _ar_probe_target(self) -> tuple[str, int] | None:
        """The chain budget an AR probe runs. Eligible: those whose step costs at most PROBE_MAX_COST
        AR steps and that could pay at PROBE_ALPHA acceptance per position (their geometric commit
        above their cost by the margin); budgets that could not pay even then are never probed.
        Among them, the one with the best geometric commit / cost at the acceptance seen so far, or
        at PROBE_PRIOR_ALPHA where that is lower or unknown: the budget auto would run if the
        drafter pays (see PROBE_PRIOR_ALPHA). DFLASH_AUTO_PROBE=cheapest: the cheapest eligible one."""
        a = max(self.alpha or 0.0, PROBE_PRIOR_ALPHA)
        best, best_key = None, 0.0
        for b in self.chain_budgets:
            cost = self.costs[("chain", b)]
            if cost > PROBE_MAX_COST or breakeven.geometric_commit(PROBE_ALPHA, b) / cost <= 1.0 + self.margin:
                continue
            # larger is better: -cost for the cheapest rule, commit / cost for the default one
            key = -cost if self.probe_cheapest else breakeven.geometric_commit(a, b) / cost
            if best is None or key > best_key:
                best, best_key = ("chain", b), key
        return best

    def prior(self, mode: str, budget: int) -> float | None:
        """What the chain acceptance seen so far predicts for (mode, budget): a chain of that budget,
        or for a tree a chain as deep as the tree may grow."""
        # (geometric whatever the estimator: this is the optimistic side of a probe's choice. With the
        # per-position estimate here too, a policy that drifted to chain 1 never tested position 2
        # again and could never find chain 7 again: a simulated pair paying 1.37x at chain 7 ran 1.07x)
        a = self.alpha
        if a is None:
            return None
        return breakeven.geometric_commit(a, budget if mode == "chain" else min(budget, self.max_draft))

    def _alternative(self, current: breakeven.Choice) -> tuple[str, int] | None:
        """While speculating: another (mode, budget) worth a probe -- one whose optimistic estimate
        (the larger of its measured commit length and the acceptance model's) would beat the current
        choice, and whose last probes' back-off has run out (each failed probe doubles its wait)."""
        if self.since_probe < SPEC_PROBE_EVERY:
            return None  # every key's wait is at least this (the check below, with no failed probe)
        est = self._estimates_now()
        best, ratio = None, current.speedup * (1.0 + self.margin)
        fails, since, a = self.fails, self.since_probe, self.alpha
        geo = self._geo(a) if a is not None else None
        cur = (current.mode, current.budget)
        # this loop runs at every step of a long speculative stretch once the waits have run out
        for key, cost, depth in self._alt_items:
            if key == cur:
                continue
            f = fails.get(key, 0)  # (with no failed probe the wait is SPEC_PROBE_EVERY: passed above)
            if f and since < SPEC_PROBE_EVERY * 2 ** min(f, 5):
                continue
            # the prior() of the key: a chain as deep as it drafts
            opt = max(est.get(key) or 0.0, geo[depth] if geo is not None else 0.0)
            if opt / cost > ratio:
                best, ratio = key, opt / cost
        return best

    # -- learning -----------------------------------------------------------------------------------
    def _update(self, key: tuple[str, int], commit: float, weight: float) -> None:
        self._best = None
        old = self.commit.get(key)
        self.commit[key] = commit if old is None else old + weight * (commit - old)
        self.n_obs[key] += 1

    def observe(self, mode: str, budget: int, drafted: int, accepted: int, probing: bool = False) -> None:
        """One full step's outcome (a step cut short by the end of the run should not be given).
        While a choice is held (DECIDE_EVERY) it is kept, and learnt before the next decision."""
        if self._hold_left > 0 or self._unlearnt:
            self._unlearnt.append((mode, budget, drafted, accepted, probing))
        else:
            self._observe(mode, budget, drafted, accepted, probing)

    def _learn(self) -> None:
        """The outcomes kept while a choice was held, learnt in their order."""
        if self._unlearnt:
            kept, self._unlearnt = self._unlearnt, []
            for o in kept:
                self._observe(*o)

    def _observe(self, mode: str, budget: int, drafted: int, accepted: int, probing: bool) -> None:
        w = self.ema_probe if probing else self.ema
        if mode == "chain" and drafted > 0:
            commit, n_obs = self.commit, self.n_obs
            for b, k in self._chain_keys:  # (_update, inline: this runs at every speculative step)
                if b > drafted:
                    break
                c, old = min(accepted, b) + 1, commit.get(k)
                commit[k] = c if old is None else old + w * (c - old)
                n_obs[k] += 1
            tested = min(accepted + 1, drafted)
            self._acc = [(1 - w) * self._acc[0] + w * accepted, (1 - w) * self._acc[1] + w * tested]
            if self.estimator == "positions":
                # positions 1..tested were tested, 1..accepted accepted: each tested position's EMA
                # moves (only this estimator reads them: the numpy work cost ~10 us a step)
                n = min(tested, self._pos.shape[0])
                hit = (np.arange(n) < accepted).astype(float)
                self._pos[:n, 0] += w * (hit - self._pos[:n, 0])
                self._pos[:n, 1] += w * (1.0 - self._pos[:n, 1])
            self._probe_target = False  # it follows the acceptance (_ar_probe_target)
            # the budgets deeper than this step drafted learn through the acceptance model: without
            # it their measured EMA kept the value of their last run, so after a bad stretch a cheap
            # probe (chain 1-3) that found the drafter good again could never bring auto back to
            # chain 7 (a simulated pair paying 1.37x at chain 7 ran 89-98 % of its steps as AR)
            a = self._settled(self.alpha, n_obs)
            if a is not None and self.stay_margin > 0.0:
                geo = self._geo(a)
                for b, k in self._chain_keys:
                    if b > drafted and (old := commit.get(k)) is not None:
                        commit[k] = old + w * (geo[b] - old)
                        n_obs[k] += 1
            self._best = None
        elif mode == "tree" and drafted > 0 and ("tree", budget) in self.costs:
            self._update(("tree", budget), accepted + 1, w)

    def observe_run(self, result) -> None:
        """Learns from a whole chain or tree run (the user's fixed mode, a bench row)."""
        s = result.summary
        if s is None or s.verify_mode not in ("chain", "tree"):
            return
        self._learn()
        self._hold_left = 0  # (a whole run's steps are learnt at once: no auto decision is held)
        # (taught to the current kind: a whole run's steps are not told apart by kind here)
        for rec in result.steps[:-1]:  # the last step may be cut short by the end
            self.observe("tree" if rec.tree_nodes else "chain", s.budget_effective, rec.drafted, rec.accepted)

    def observe_switch(self, extra_ar_steps: float) -> None:
        """What one switch into speculation and back cost beyond its steps' table costs (AR steps)."""
        x = max(0.0, extra_ar_steps)
        self.switch_cost = x if self.switch_cost == 0.0 else self.switch_cost + 0.5 * (x - self.switch_cost)

    # -- the cost table against the steps -----------------------------------------------------------
    def observe_wall(self, mode: str, budget: int, wall: float) -> None:
        """One full step's wall time (s), without any catch-up: compared with the table's figure for
        the configuration every RECHECK_WINDOW steps; a disagreement makes the table ``suspect``."""
        key = (mode, budget)
        d = self._walls.get(key)
        if d is None:
            d = self._walls[key] = deque(maxlen=RECHECK_WINDOW)
        d.append(wall)
        if len(d) < RECHECK_WINDOW or self.suspect:
            return
        ms = 1000.0 * calibration.lower_quartile(list(d))
        d.clear()
        ref = (
            self.table.ar_ms
            if mode == "ar"
            else (self.table.chain_ms if mode == "chain" else self.table.tree_ms).get(budget)
        )
        if ref and not ref / self.recheck_factor <= ms <= ref * self.recheck_factor:
            label = "AR" if mode == "ar" else f"{mode} {budget}"
            self.suspect = f"{label} steps take {ms:.2f} ms here; the calibration says {ref:.2f} ms"

    def describe(self) -> dict:
        b = self.best()  # (learns what a held choice kept)
        return {
            "choice": b.label,
            "break_even": b.cost,
            "commit": b.commit,
            "alpha": self.alpha,
            "kind": self.kind,
            "switch_cost": self.switch_cost,
            "estimates": {f"{m} {k}": v for (m, k), v in self.estimates().items()},
        }


#: Pseudo-weight (in the EMA's units: ~4 steps at EMA 0.025) with which each position's rate leans on
#: the rate before it: a position tested a few times (a shallow budget tests the deep ones only in
#: probes) is not read from one or two steps. Without it one rejection at position 2 read as a rate
#: of 0 there, every deeper budget as worth chain 1, and a simulated pair paying 1.37x at chain 7
#: stuck at chains 1-3 (1.07x).
POSITION_PRIOR = 0.1


def position_commits(pos: np.ndarray, budgets) -> dict[int, float] | None:
    """Commit length of a chain of each budget from per-position acceptance (rows [accepted, tested]
    EMAs): 1 + p1 + p1 p2 + ... up to the budget. Each position's rate is its own, shrunk toward the
    rate before it by POSITION_PRIOR; a position never tested takes that rate, and so do positions
    past the rows (deeper than any draft). None when no position was tested yet."""
    if not pos[0, 1] > 0.0:
        return None
    deepest = max(budgets, default=0)
    rates = np.empty(max(deepest, 1))
    prev = pos[0, 0] / pos[0, 1]
    for k in range(len(rates)):
        acc, tested = (pos[k, 0], pos[k, 1]) if k < pos.shape[0] else (0.0, 0.0)
        prev = (acc + POSITION_PRIOR * prev) / (tested + POSITION_PRIOR) if k else prev
        rates[k] = min(max(prev, 0.0), 1.0)
    cum = np.concatenate([[1.0], np.cumprod(rates[:deepest])])
    totals = np.cumsum(cum)  # totals[b] = 1 + p1 + ... + p1..pb
    return {b: float(totals[b]) for b in budgets}


def policy_for(engine, progress=None, cancel=None) -> AutoPolicy | None:
    """The engine's policy for its current pair and machine, calibrating first if needed, and
    measuring the calibration again when the steps run since disagreed with it. ``cancel`` stops a
    calibration (calibration.CalibrationCancelled)."""
    if engine.drafter is None:
        return None
    table = calibration.ensure(engine, progress=progress, cancel=cancel)
    pol = getattr(engine, "auto_policy", None)
    if pol is None or getattr(pol, "key", None) != table.key:
        pol = AutoPolicy(table, engine.drafter.max_draft)
        engine.auto_policy = pol
    elif isinstance(pol, AutoPolicy) and pol.suspect and time.time() - pol.recheck_at >= RECHECK_MIN_S:
        recheck(engine, pol, progress, cancel)
    return pol


def recheck(engine, pol: AutoPolicy, progress=None, cancel=None) -> calibration.CostTable:
    """Measures the calibration again (one round) because ``pol.suspect`` says the steps disagree
    with it; the new table replaces the cached one. When it agrees with the old one after all (the
    steps differed for another reason: a long context, a short burst of load), the policy asks for
    a wider disagreement before the next re-check."""
    old = pol.table
    why = pol.suspect
    if progress is not None:
        progress(f"calibrating again: {why}")
    new = calibration.measure(engine, rounds=1, progress=progress, cancel=cancel)
    calibration.save(new)
    engine.calibration = new
    f = pol.recheck_factor
    new_costs = new.costs()
    same = old.ar_ms / f <= new.ar_ms <= old.ar_ms * f and all(
        abs(new_costs[k] / c - 1.0) < 0.25 for k, c in old.costs().items() if k in new_costs
    )
    factor = pol.recheck_factor * (2.0 if same else 1.0)
    pol.set_table(new)
    pol.recheck_factor = factor
    pol.rechecks += 1
    pol.recheck_at = time.time()
    pol.last_recheck = why
    return new


class AutoGeneration(Generation):
    """A Generation whose every step runs the mode and budget the policy picks for it."""

    def __init__(self, engine, settings, on_token, on_step, cancel, on_progress=None, follow_up=False):
        pol = getattr(engine, "auto_policy", None)
        rechecks = pol.rechecks if isinstance(pol, AutoPolicy) else 0
        if pol is None or (
            engine.drafter is not None
            and isinstance(pol, AutoPolicy)
            and (pol.suspect or pol.key != calibration.calibration_key(engine.config))
        ):
            try:  # (a calibration, when one is due, reports here)
                pol = policy_for(engine, progress=on_progress, cancel=cancel)
            except calibration.CalibrationCancelled:
                pol = None  # stopped before any step: the run ends at once as cancelled
        self.policy = pol
        # the calibration measured again before this request (its time is not the request's)
        self.rechecked = pol.last_recheck if isinstance(pol, AutoPolicy) and pol.rechecks > rechecks else ""
        if isinstance(pol, AutoPolicy):
            pol.start_request(follow_up)
        self.used: Counter = Counter()
        self._pending = None
        self._feats: np.ndarray | None = None  # features of AR-committed rows not yet in the drafter
        self._n_feats = 0  # (kept only for targets without span rollback)
        self._feat_src: list[int] | None = None  # where an AR step's layer inputs are (_keep_features)
        self._feats_addr = self._feats_row = self._feat_nbytes = 0  # (_keep_features: set with the above)
        self.catchups = 0  # catch-ups run (each before a speculative step that followed AR)
        self.catchup_rows = 0  # tokens decoded again for them
        self._catchup_s = 0.0  # time of the catch-up not yet charged to a step record
        self._charged = 0.0  # the catch-up time the last record was charged
        self._prev_mode: str | None = None  # the last step's mode, and a switch's cost so far
        self._switch_extra: float | None = None  # (_measure_switch)
        self.kinds = text_kind.KindTracker()
        self._kind_at = 0  # text_parts fed to the tracker so far
        self.kind_changes = 0
        self._kind_seen, self._kind_run = None, 0
        # whether any step may speculate (else the drafter is never fed: no features at prefill,
        # extraction off throughout, as plain AR); and how AR steps keep its context (_feature_path)
        self.feed_drafter = (
            engine.drafter is not None
            and pol is not None
            and (
                not hasattr(pol, "needs_drafter") or pol.needs_drafter() or not getattr(engine, "span_rollback", False)
            )
        )
        path = feature_path(engine)
        self.lazy_features = path == "redecode" or (not self.feed_drafter and path != "host-only")
        # what the policy can be told, asked once (a test's stand-in may lack some): _auto_step runs
        # at every step
        self._tell_switch = hasattr(pol, "observe_switch")
        self._tell_wall = hasattr(pol, "observe_wall")
        self._tell_kind = hasattr(pol, "set_kind")
        super().__init__(engine, settings, on_token, on_step, cancel)
        self._step_fns = {"ar": self._ar_step, "chain": self._chain_step, "tree": self._tree_step}

    def _prefill_features(self) -> bool:
        # (a re-decoding run feeds the drafter at prefill too: its first step may be a probe)
        return self.feed_drafter

    def _effective_budget(self) -> tuple[int, str]:
        if self.e.drafter is None or self.policy is None:
            self.mode = "ar"
            return 0, "auto: no drafter loaded, so autoregressive"
        mode, budget = self._allowed(*self.policy.choose())
        self.mode = mode
        self._pending = (mode, budget)  # the first step runs it without asking again
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
        return self._auto_step if self.e.drafter is not None and self.policy is not None else self._ar_step

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
                self.e._set_extraction(False)  # a no-op unless prefill or the last step turned it on
            elif self.e.dft_valid != len(self.e.kv) and self.tree_seqs == 1:
                self._catch_up()  # (_switch has done it; this only guards the invariant)
        n = len(self.steps)
        mode = self.mode
        if mode != "ar":
            self._feat_src = None  # its decodes move the target's output views: _keep_features asks again
        last, done = self._step_fns[mode](last, t0)
        if len(self.steps) > n:
            rec = self.steps[-1]
            self.used[(mode, self.budget)] += 1
            pol = self.policy
            if not done and self._tell_switch and mode != self._prev_mode:
                self._measure_switch(rec)  # (nothing to measure while the mode stays)
            if mode == "ar":
                if not self.lazy_features:
                    self._keep_features()
            elif not done:
                kind = "tree" if rec.tree_nodes else "chain"
                pol.observe(kind, self.budget, rec.drafted, rec.accepted, probing=probing)
            if not done and self._tell_wall:
                pol.observe_wall(mode, self.budget, rec.wall - self._charged)
            if self._tell_kind:
                parts = self.text_parts
                if len(parts) > self._kind_at:
                    kind = self.kinds.feed(
                        "".join(parts[self._kind_at :]) if len(parts) - self._kind_at > 1 else parts[-1]
                    )
                    self._kind_at = len(parts)
                    # a new kind counts once the tracker has said it after KIND_STEPS steps in a row
                    self._kind_run = self._kind_run + 1 if kind == self._kind_seen else 1
                    self._kind_seen = kind
                    if kind != pol.kind and self._kind_run >= KIND_STEPS:
                        pol.set_kind(kind)
                        self.kind_changes += 1
        return last, done

    def _measure_switch(self, rec) -> None:
        """A switch's cost beyond the table: the first speculative step after AR steps and the first
        AR step after it, each against its table figure; told to the policy once both are seen."""
        prev, self._prev_mode = self._prev_mode, self.mode
        if prev == self.mode or prev is None or (prev != "ar" and self.mode != "ar"):
            return  # no switch between AR and speculation: nothing to measure (every AR step)
        table = getattr(self.policy, "table", None)
        if table is None or table.ar_ms <= 0:
            return
        cost = 1.0 if self.mode == "ar" else table.cost(self.mode, self.budget)
        if cost is None:
            return
        extra = 1000.0 * rec.wall / table.ar_ms - cost
        if self.mode != "ar":
            self._switch_extra = extra  # into speculation
        elif self._switch_extra is not None:
            self.policy.observe_switch(self._switch_extra + extra)  # and back
            self._switch_extra = None

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
        self._charged = self._catchup_s
        if self._catchup_s:
            # the catch-up fed the drafter (inject) in llama.cpp calls, for this step
            rec.t_inject += self._catchup_s
            rec.t_native += self._catchup_s
            rec.wall += self._catchup_s
            self._catchup_s = 0.0
        super()._record(rec)

    def _keep_features(self) -> None:
        """The "host" feature path (feature_path: CPU engines, and targets that cannot drop a span
        of positions). After an AR step: keeps the target features of the row it decoded
        (extraction stays on), to be decoded into the drafter in one batch when speculation
        resumes, or every n_ubatch rows. A per-step drafter decode would cost a little on every AR
        token."""
        e, d = self.e, self.e.drafter
        if e.dft_valid + self._n_feats != len(e.kv) - 1:
            return  # the drafter's context was not whole before this step: nothing to extend
        if self._feats is None:
            # one buffer per drafter, kept between requests (zeroing 5.9 MB took ~1.5 ms a request)
            shape = (e.target_ctx.n_ubatch, d.n_embd_enc)
            kept = getattr(d, "_auto_feats", None)
            if kept is None or kept.shape != shape:
                kept = d._auto_feats = np.empty(shape, dtype=np.float32)
            self._feats = kept
            # its address and row stride as ints: numpy's .ctypes builds an object at every use
            # (with the five copies below, ~28 us of auto's ~60 us between AR steps on the 2-vCPU
            # machine before this; docs/benchmarks.md, "Auto's Python between AR steps")
            self._feats_addr = kept.ctypes.data
            self._feats_row = kept.strides[0]
        src = self._feat_src
        if src is None:
            # llama.cpp lays its output views out by the batch's output count (its logits come first),
            # and each llama_get_embeddings_layer_inp synchronises and reorders outputs: ask once per
            # stretch of AR steps (each of one output row, so the views stay put) and keep the
            # addresses until a step of another mode runs (_auto_step drops them). On the 2-vCPU
            # machine the five calls took ~13 us of the ~100-150 us auto spends between AR steps
            # (plain AR: ~25 us).
            ptr = e.target_ctx.ptr
            self._feat_nbytes = d.n_embd_tgt * 4
            src = self._feat_src = [
                ctypes.cast(ffi.llama_get_embeddings_layer_inp(ptr, lid), ctypes.c_void_p).value or 0
                for lid in d.target_layers
            ]
        nbytes = self._feat_nbytes
        dst = self._feats_addr + self._n_feats * self._feats_row
        move = ctypes.memmove
        for a in src:  # one memmove per layer: this runs every AR step
            move(dst, a, nbytes)
            dst += nbytes
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
        self._write_unwritten()  # a tree step's unwritten tokens, in every sequence
        if self.mode == "tree" and mode != "tree" and self.tree_seqs > 1:
            e.target_ctx.seq_keep(0)  # back to one sequence: AR and chain steps use seq 0
            self.tree_seqs, self.all_seqs = 1, [0]
        if mode != "ar":
            if self.lazy_features:
                self._catch_up()  # on sequence 0, before a tree's leaf sequences copy it
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
                self._flush_features()  # the next request reuses the whole context
            # (lazy: the next request's prefill feeds the drafter from dft_valid on, as a catch-up)
        s = res.summary
        s.mode = "auto"
        if self.used:
            top = self.used.most_common()
            s.verify_mode = top[0][0][0]
            s.budget_effective = top[0][0][1]
            s.auto_note = "auto: " + ", ".join(("AR" if m == "ar" else f"{m} {b}") + f" x{n}" for (m, b), n in top)
            if self.catchups:
                s.auto_note += (
                    f"; drafter caught up {self.catchups} time{'s' if self.catchups > 1 else ''} "
                    f"on {self.catchup_rows} AR tokens"
                )
            if self.rechecked:
                s.auto_note += f"; the calibration was measured again first ({self.rechecked})"
            if self.kind_changes:
                s.auto_note += f"; the text changed kind {self.kind_changes} time{'s' if self.kind_changes > 1 else ''}"
        return res


def feature_path(engine) -> str:
    """How auto's AR steps keep the drafter's context: ``"host"`` (extraction stays on and each AR
    step's feature row is copied to the host, decoded into the drafter in one batch when
    speculation resumes), ``"host-only"`` (the same, and the only way: a recurrent or hybrid target
    cannot drop a span to decode it again) or ``"redecode"`` (extraction off; before speculation the
    tokens committed since are decoded again with it on: Engine.catch_up_drafter).

    ``engine.auto_keep_features`` ("host" or "redecode") decides when set, then the environment's
    ``DFLASH_AUTO_FEATURES``. Otherwise "host", on CPU and on a GPU alike: toggling extraction makes
    llama.cpp reserve its compute graphs again (a one-row decode after a toggle: 8.3 ms against 1.1
    on an H100), a re-decode costs about a third of an AR step per token caught up on CPU, and an
    AR step with extraction on and its row copied costs 1.01 plain AR steps on the H100
    (docs/benchmarks.md, "Step cost (issue 28)"; an earlier measurement that read ~1.4 there
    included such toggles)."""
    if not getattr(engine, "span_rollback", False):
        return "host-only"
    # (DFLASH_AUTO_FEATURES: the same choice for a whole process, for benchmarks of both paths)
    chosen = getattr(engine, "auto_keep_features", None) or os.environ.get("DFLASH_AUTO_FEATURES")
    if chosen in ("host", "redecode"):
        return chosen
    return "host"


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
