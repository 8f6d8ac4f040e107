"""One request's run: prefill, then autoregressive or chain-speculative steps, with statistics.

Chain step (positions: the target KV holds ``pos`` tokens; ``last`` is committed but not decoded):

1. draft   — drafter decodes ``[last, mask x n]`` at pos..pos+n non-causally; greedy tokens at
             the mask positions are the draft; the block's K/V is removed from the drafter.
2. verify  — target decodes ``[last, d0 .. d(n-1)]`` at pos.. with every row an output.
3. accept  — the target's own choice at each row (argmax, or its sampler) is compared with the
             draft; the longest agreeing prefix plus the target's next token are committed.
4. inject  — the features of the rows that stay (``last`` and the accepted drafts) are decoded
             into the drafter's KV at the same positions.
5. trim    — both caches drop everything past the committed length.

The committed tokens are exactly those the target alone would produce: every committed token is
the target's choice at its position given the committed prefix.

Timing: on a GPU llama_process returns before the device is done. Each phase ends at a
synchronisation point — reading logits (``Context.logits`` / the sampler) or an explicit
``synchronize()`` — so phase times are device-inclusive and sum to at most the step's wall time.
The inject is the exception unless ``GenerationSettings.exact_phases`` is set: it is left
asynchronous for speed, so its device time lands in the next step's draft phase. With
OVERLAP_COMMIT_ENV (opt-in) a plain AR or chain run streams a step's tokens during the next step's
decode: that host time is the next step's ``t_other``, and its verify phase leaves it out.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Callable

import numpy as np

from . import ar_run
from . import drafter as drafter_mod
from .config import GenerationSettings
from .detok import StreamingDetokenizer
from ..common.errors import ContextOverflowError, UnsupportedSettingError
from .native import Context, Sampler
from . import tree as tree_mod
from .records import FROM_DRAFT, FROM_TARGET, GenerationResult, RunSummary, StepRecord, TokenEvent, VerifyBatch

now = time.perf_counter

#: Where tree verification takes the target's argmax: "host" (its logits) or "backend" (a greedy
#: sampler per leaf sequence). Measured on an H200, reference pair, budget 6-7: the samplers made
#: the verify decode ~0.9 ms slower than host argmax (docs/benchmarks.md, tree variants). Measured
#: again with patches 0006/0007 on an H200 (default pair, SmolLM2; docs/benchmarks.md "One top-k for
#: all the rows of a drafter block"): the verify phase grew by 0.5-2 ms a step, so the host stays.
TREE_ARGMAX_ON = "host"
#: Environment variable that forces TREE_ARGMAX_ON ("host" or "backend") for A/B measurements: the
#: ~0.9 ms above was one argmax launch and one copy per row; since patch 0006 all greedy rows share
#: one argmax, which may change the verdict. Unset or empty: TREE_ARGMAX_ON.
TREE_ARGMAX_ENV = "DFLASH_TREE_ARGMAX"


def tree_argmax_on() -> str:
    """Where tree verification takes the target's argmax: $DFLASH_TREE_ARGMAX, else TREE_ARGMAX_ON."""
    on = os.environ.get(TREE_ARGMAX_ENV, "").strip().lower() or TREE_ARGMAX_ON
    if on not in ("host", "backend"):
        raise ValueError(f"{TREE_ARGMAX_ENV}={on!r}: expected host or backend")
    return on


#: Tree verification marks the batch's leading unwritten tokens (kept nodes off the last step's
#: chain) as outputs too, so every tree verify of one budget has the same output count and llama.cpp
#: keeps its compute graph from step to step (it rebuilds and re-allocates the target's whole graph
#: when the output count changes: 39 of 95 tree-15 steps did, benchmarks/bench_graph_reuse.py). Those rows' logits
#: are not read. Environment variable "0" for A/B measurements: upstream's outputs (root and nodes).
TREE_FIXED_OUTPUTS_ENV = "DFLASH_TREE_FIXED_OUTPUTS"
#: Where a request's first token comes from: "prefill" (the default: the prefill's last row) or
#: "decode" (the start before: the prompt's last token decoded by the first step, with a draft after
#: it in a speculative mode). Read at each request, so that one process can alternate the two for an
#: A/B (gpu/gpu_first_token_ab.py); the replays of the judge and of drift follow "prefill" only.
FIRST_TOKEN_ENV = "DFLASH_FIRST_TOKEN"


def first_token_from_prefill() -> bool:
    return os.environ.get(FIRST_TOKEN_ENV, "prefill").strip().lower() != "decode"


#: With it, plain AR and chain runs stream a step's tokens (detokenising, the token events, the step's
#: record) while the device decodes the next step's batch, not between the two steps while it waits:
#: on a GPU, ``llama_decode`` returns once the decode is queued, so that host work hides behind it.
#: The tokens, their order and the steps are the same; each event arrives one step later. Never on a
#: CPU target (its decode returns when done: nothing to hide behind), with exact phase times, or in
#: auto (its policy reads each step's record as the step ends, and its calibration times steps as auto
#: runs them: ``GenerationSettings.overlap_commit``). Environment variable "0" or "1" forces it either
#: way otherwise (A/B measurements; tests on a CPU build).
OVERLAP_COMMIT_ENV = "DFLASH_OVERLAP_COMMIT"
#: Whether a run whose target is on a GPU overlaps when the switch is unset. On: in sitting s71 (H100,
#: 2026-12-07, one process per mode, each of 120 public prompts on both sides twice, the side that goes
#: first alternating) AR read 1.0033x (median per request 1.0021) and chain 5 1.0060x (1.0073) with
#: it, identical tokens on all 480 pairs (docs/benchmarks.md, "Sitting s71"). s70's first A/B, which
#: read AR +6.0 % and chain 5 -4.3 %, was confounded by its request order.
OVERLAP_COMMIT_ON_DEVICE = True


def overlap_commit_on(target_on_device: bool, settings: GenerationSettings) -> bool:
    forced = os.environ.get(OVERLAP_COMMIT_ENV, "").strip()
    if forced and forced not in ("0", "1"):
        raise ValueError(f"{OVERLAP_COMMIT_ENV}={forced!r}: expected 0 or 1")
    if not settings.overlap_commit:  # the caller times the steps auto runs (calibration)
        return False
    if forced:
        return forced == "1"
    return OVERLAP_COMMIT_ON_DEVICE and target_on_device and not settings.exact_phases


def tree_fixed_outputs() -> bool:
    """Whether a tree verify's unwritten leading tokens are outputs: $DFLASH_TREE_FIXED_OUTPUTS != "0"."""
    return os.environ.get(TREE_FIXED_OUTPUTS_ENV, "").strip() != "0"


class Generation:
    """Runs one request against an Engine's contexts. Created and driven by ``Engine.generate``."""

    def __init__(
        self,
        engine,
        settings: GenerationSettings,
        on_token: Callable | None,
        on_step: Callable | None,
        cancel: threading.Event | None,
    ):
        self.e = engine
        self.s = settings
        self.on_token = on_token
        self.on_step = on_step
        self.cancel = cancel
        self.sampler = (
            None if settings.greedy else Sampler(settings.temperature, settings.top_k, settings.top_p, settings.seed)
        )
        self.detok = StreamingDetokenizer(engine.target.text_piece)
        self.tokens: list[int] = []
        self.sources: list[str] = []
        self.text_parts: list[str] = []
        self.steps: list[StepRecord] = []
        self.finish = "max_tokens"
        self.t_first = 0.0
        self.n_drafted = self.n_accepted = 0
        self.mode = settings.mode  # what actually runs (tree may fall back to chain)
        self.budget, self.budget_note = self._effective_budget()
        # tree steps: one KV sequence per leaf, each holding the whole committed prefix (see tree.py);
        # the tree run's sequences are added after prefill
        self.tree_seqs, self.all_seqs = 1, [0]
        self.tree_fixed_outputs = tree_fixed_outputs()
        self.verify_batches: list[VerifyBatch] = []
        # committed tokens whose target K/V is not in the cache yet (a tree step's accepted nodes
        # off the seeded chain: see _tree_step); they lead the next decode
        self.unwritten: list[int] = []
        self._margins: list[float] = []  # the current step's top-2 margins (settings.record_margins)
        # a step's inject ends at a sync only for exact phase times (drafter.SYNC_INJECT says why)
        self._sync_inject = drafter_mod.sync_inject_on(self.s.exact_phases)
        # with OVERLAP_COMMIT_ENV, a plain AR or chain run's last step, committed but not streamed yet:
        # (chosen tokens, drafts among them, its record, t0); streamed while the next decode runs
        self.defer_commit = False
        self._deferred: tuple[list[int], int, StepRecord, float] | None = None
        self._runs: ar_run.ArRuns | None = None  # a plain greedy AR run's decodes in runs (ar_run.py)

    def _effective_budget(self) -> tuple[int, str]:
        s, d = self.s, self.e.drafter
        if s.mode == "ar":
            return 0, ""
        if d is None:
            raise UnsupportedSettingError(f"mode {s.mode!r} needs a drafter; load one or use mode 'ar'")
        if s.mode == "chain" and s.budget > d.max_draft:
            return d.max_draft, (
                f"budget {s.budget} clamped to {d.max_draft}: the drafter's block size is "
                f"{d.block_size}, so one step drafts at most {d.max_draft} tokens"
            )
        if s.mode == "tree":
            if not self.e.tree_capable:
                self.mode = "chain"
                budget = min(s.budget, d.max_draft)
                return budget, f"tree verification unavailable ({self.e.tree_reason}); verified as a chain"
            cap = self.e.tree_max_nodes
            if s.budget > cap:
                return cap, (
                    f"node budget {s.budget} clamped to {cap}: the target context was created for "
                    f"{cap} tree nodes (llama.cpp allows at most 256 sequences)"
                )
        return s.budget, ""

    # -- the run ------------------------------------------------------------------------------------
    def run(self, prompt: list[int]) -> GenerationResult:
        e, s = self.e, self.s
        t0 = now()
        if not prompt:
            raise ValueError("empty prompt")
        n_ctx = e.target_ctx.n_ctx
        if len(prompt) >= n_ctx:
            raise ContextOverflowError(
                f"the prompt has {len(prompt)} tokens but the context holds {n_ctx}; "
                "raise the context size or shorten the conversation"
            )
        self._choose_samplers()
        # the whole prompt, with an output on its last token: the first token comes from the prefill,
        # as llama.cpp's server takes it, so the first step's block opens at the first response token
        # (where drafters are trained) and no step decodes the prompt's last token alone
        # (docs/design/first-token-from-prefill.md)
        from_prefill = first_token_from_prefill()
        reused = e._prefill(prompt if from_prefill else prompt[:-1], self._prefill_features(), out_last=from_prefill)
        if self.mode == "tree":
            self._add_tree_seqs(min(e.tree_max_nodes, tree_mod.max_leaves(self.budget, e.drafter.max_draft)))
        t_prefill = now() - t0
        t_gen0 = now()
        reuses0 = e.target_ctx.graph_reuses()
        step_fn = self._step_function()
        try:
            if self.cancel is not None and self.cancel.is_set():
                self.finish, done = "cancelled", True
            elif from_prefill:
                last, done = self._first_token(t0)
            else:
                last, done = prompt[-1], False  # the first step decodes it
            while not done:
                if self.cancel is not None and self.cancel.is_set():
                    self.finish = "cancelled"
                    break
                if len(e.kv) + 1 >= n_ctx:
                    self.finish = "context_full"
                    break
                last, done = step_fn(last, t0)
            self._stream_deferred()
            if self.unwritten and self.finish in ("eog", "max_tokens"):
                # a last tree step's kept nodes off its chain: written now, in batch-invariant rows,
                # as AR leaves them in the cache, rather than prefilled with the next request's prompt
                self._write_unwritten()
        finally:
            if self.sampler is not None:
                self.sampler.free()
            if self.tree_seqs > 1:
                e.target_ctx.seq_keep(0)  # back to one sequence: what prefill reuse expects
            # tokens never written stay out of the cache's record: the next request decodes them
            self.unwritten = []
            e.dft_valid = min(e.dft_valid, len(e.kv))
        tail = self.detok.flush()
        if tail:
            self.text_parts.append(tail)
        t_gen = now() - t_gen0
        summary = RunSummary(
            mode=s.mode,
            n_prompt=len(prompt),
            n_prompt_reused=reused,
            n_generated=len(self.tokens),
            # a last step whose first pick is end-of-generation commits nothing: it is timed in
            # `steps` but is no commit step (AR read "7 tokens in 8 steps, mean commit 0.88")
            n_steps=sum(1 for r in self.steps if r.committed),
            n_drafted=self.n_drafted,
            n_accepted=self.n_accepted,
            t_prefill=t_prefill,
            t_first_token=self.t_first,
            t_generate=t_gen,
            budget_requested=s.budget if s.mode != "ar" else 0,
            budget_effective=self.budget,
            budget_note=self.budget_note,
            finish_reason=self.finish,
            verify_mode=self.mode,
            graphs_reused=e.target_ctx.graph_reuses() - reuses0,
        )
        return GenerationResult(
            text="".join(self.text_parts),
            tokens=self.tokens,
            sources=self.sources,
            steps=self.steps,
            summary=summary,
            verify_batches=self.verify_batches,
        )

    def _prefill_features(self) -> bool:
        """Whether the prefill feeds the drafter (auto mode's subclass decides by its policy)."""
        return self.s.mode != "ar"

    def _step_function(self):
        """What runs each step (auto mode's subclass picks per step, and never defers a commit)."""
        self.defer_commit = self.mode in ("ar", "chain") and overlap_commit_on(self.e.target_on_device, self.s)
        if self.mode == "ar" and self._ar_runs_on():
            self._runs = ar_run.ArRuns(self.e.target_ctx, self.e.target_batch, self.s.stop_at_eog)
            return self._ar_run_step
        return {"ar": self._ar_step, "chain": self._chain_step, "tree": self._tree_step}[self.mode]

    def _ar_runs_on(self) -> bool:
        """Whether AR steps go in runs (ar_run.py): greedy picks on the backend, no margins to read,
        a caller that does not time the steps one call each (``GenerationSettings.ar_runs``), and
        ``ar_run.runs_on`` (the engine has them; where the target runs)."""
        s = self.s
        greedy = self.sampler is None and self.e.target_ctx.backend_greedy and not s.record_margins
        return greedy and s.ar_runs and ar_run.runs_on(self.e.target_on_device)

    def _choose_samplers(self) -> None:
        """Greedy runs take the target's argmax on the backend (chain and AR); tree steps may take
        the drafter's top-K there (``Drafter.tree_top_k_backend``).

        The target needs raw logits for temperature sampling; the drafter for p_min, unless a top-k
        sampler gives the drafter's candidates on the device (``Drafter.p_min_top_k_backend``). Tree
        verification reads the target's logits on the host unless tree_argmax_on() says "backend"
        (then each leaf sequence gets a greedy sampler: llama.cpp picks an output's sampler by
        the entry's first sequence id).
        """
        e, s = self.e, self.s
        on = e.config.backend_sampling
        tree = self.mode == "tree"
        e.target_ctx.set_backend_greedy(
            on and s.greedy and not s.record_margins and (not tree or tree_argmax_on() == "backend"),
            n_seqs=self.tree_seqs,
        )
        if e.drafter is not None and self.mode != "ar":
            e.drafter.set_inject_slots(drafter_mod.inject_slots_wanted(self.mode, e.drafter.on_gpu))
            # (AR steps leave the drafter's sampler as it is: they never run the drafter, and
            # attaching or removing a sampler makes llama.cpp reserve the drafter's graphs again,
            # ~5-10 ms on an H100/H200 at each switch of auto between AR and chain)
            if tree:
                kb = e.drafter.tree_top_k_backend(s.budget)
                e.drafter.ctx.set_backend_top_k(max(kb, s.tree_top_k) if on and kb else 0)
            elif on and self.mode == "chain" and s.p_min > 0:
                e.drafter.ctx.set_backend_top_k(e.drafter.p_min_top_k_backend())
            else:
                e.drafter.ctx.set_backend_greedy(on and self.mode == "chain")

    # -- picking the target's token ----------------------------------------------------------------
    def _target_choices(self, ctx: Context, n_rows: int, draft: np.ndarray) -> list[int]:
        """The target's committed tokens for a verified block: accepted drafts + its own next one."""
        if self.sampler is None:
            if n_rows == 1 and ctx.backend_greedy and not self.s.record_margins:
                # an AR step: one FFI call and no array (its host time leaves a GPU idle)
                return [ctx.sampled_token(0)]
            if ctx.backend_greedy:  # argmax already taken on the device: every row's pick in one read
                pick = ctx.sampled_tokens(0, n_rows).__getitem__
            else:  # one vectorised pass over the logits block, no per-row copies
                picks = ctx.logits(n_rows).argmax(axis=1)
                pick = picks.__getitem__
            out = []
            for i in range(n_rows):
                tok = int(pick(i))
                out.append(tok)
                if i >= len(draft) or tok != draft[i]:
                    break
            if self.s.record_margins:
                self._margins = top2_margins(ctx.logits(n_rows), range(len(out)))
            return out
        out = []
        for i in range(n_rows):  # the sampler must see rows in order: it draws once per commit
            tok = self.sampler.sample(ctx, i)
            out.append(tok)
            if i >= len(draft) or tok != draft[i]:
                break
        if self.s.record_margins:
            self._margins = top2_margins(ctx.logits(n_rows), range(len(out)))
        return out

    # -- committing -------------------------------------------------------------------------------
    def _commit(self, chosen: list[int], n_draft_ok: int, step: int, t0: float) -> tuple[int, bool]:
        """Streams the committed tokens; returns (how many were committed, finished?)."""
        e, s = self.e, self.s
        n = 0
        for i, tok in enumerate(chosen):
            if s.stop_at_eog and e.target.is_eog(tok):
                self.finish = "eog"
                return n, True
            src = FROM_DRAFT if i < n_draft_ok else FROM_TARGET
            piece = self.detok.push(tok)
            if not self.tokens:
                self.t_first = now() - t0
            ev = TokenEvent(tok, piece, src, step, len(self.tokens))
            self.tokens.append(tok)
            self.sources.append(src)
            self.text_parts.append(piece)
            n += 1
            if self.on_token is not None:
                self.on_token(ev)
            if len(self.tokens) >= s.max_tokens:
                self.finish = "max_tokens"
                return n, True
        return n, False

    def _keep_rows(self, n_commit: int) -> int:
        """How many rows of a verify batch stay in the cache: ``last`` and the committed tokens but
        the newest, which the next step decodes. A step that ended on end-of-generation keeps its
        newest committed token too: the row whose pick was the EOG token holds it, verified, and
        AR leaves it in the cache the same way (its last step decoded it to pick the EOG token).
        Without it the next request of a chat would prefill that token in its prompt batch, whose
        kernels round its K/V differently from a one-row decode on a GPU, and an exact chat would
        part from AR a few turns later (docs/benchmarks.md, "An exact chat parted from AR")."""
        return n_commit + 1 if self.finish == "eog" else n_commit

    def _record(self, rec: StepRecord) -> None:
        if self.s.record_margins:
            rec.margins = tuple(self._margins[: rec.committed])
            self._margins = []
        self.steps.append(rec)
        if self.on_step is not None:
            self.on_step(rec)

    # -- a commit streamed while the next decode runs (OVERLAP_COMMIT_ENV) -------------------------
    def _n_out(self) -> int:
        """Tokens committed so far, the deferred step's included."""
        return len(self.tokens) + (len(self._deferred[0]) if self._deferred is not None else 0)

    def _may_defer(self, chosen: list[int]) -> bool:
        """Whether a step's commit can wait for the next decode: a plain run that overlaps, and a
        commit that does not end the run (end-of-generation or max_tokens end it at once, as before,
        so that no decode is queued after the last one)."""
        if not self.defer_commit:
            return False
        if self.s.stop_at_eog and any(self.e.target.is_eog(t) for t in chosen):
            return False
        return self._n_out() + len(chosen) < self.s.max_tokens

    def _stream_deferred(self) -> None:
        """Streams the deferred step: its tokens (events, text) and then its record, in step order."""
        if self._deferred is None:
            return
        chosen, n_ok, rec, t0 = self._deferred
        self._deferred = None
        rec.step = len(self.steps)
        self._commit(chosen, n_ok, rec.step, t0)  # commits all of them: _may_defer said so
        self._record(rec)

    def _stream_deferred_during_decode(self) -> tuple[float, bool]:
        """Streams the deferred step while the decode just queued runs. Returns (the seconds it took,
        whether a callback cancelled the run meanwhile: then the queued decode's picks are dropped, as
        the run would have stopped before queueing it)."""
        if self._deferred is None:
            return 0.0, False
        th = now()
        self._stream_deferred()
        return now() - th, self.cancel is not None and self.cancel.is_set()

    # -- the first token --------------------------------------------------------------------------
    def _first_token(self, t0: float) -> tuple[int, bool]:
        """Picks the first token from the prefill's last row (the target's logits after the prompt)
        and commits it as step 0: no draft, no decode of its own (the prefill's time is the run's
        t_prefill), so AR's steps still equal its tokens. Returns (the next step's ``last``, done)."""
        e = self.e
        ctx = e.target_ctx
        ts = now()
        # the prefill's one output is its last batch entry: index -1 (llama.cpp reads sampled tokens
        # and the sampler's logits by batch entry; the logits block holds output rows only)
        if self.sampler is not None:
            tok = self.sampler.sample(ctx, -1)
        elif ctx.backend_greedy:
            tok = ctx.sampled_token(-1)
        else:
            tok = int(ctx.logits(1)[0].argmax())
        if self.s.record_margins:
            self._margins = top2_margins(ctx.logits(1), range(1))
        chosen = [tok]
        t_accept = now() - ts
        n, done = self._commit(chosen, 0, len(self.steps), t0)
        wall = now() - ts
        self._record(
            StepRecord(
                step=len(self.steps),
                pos=len(e.kv) - 1,
                drafted=0,
                accepted=0,
                committed=n,
                t_accept=t_accept,
                t_other=max(0.0, wall - t_accept),
                t_native=t_accept,
                wall=wall,
                prefill=True,
            )
        )
        return chosen[-1], done

    # -- autoregressive ---------------------------------------------------------------------------
    def _write_unwritten(self) -> None:
        """Decodes the tokens a tree step committed but left out of the cache (no outputs), in
        every sequence, before a step that does not fold them into its own batch."""
        if not self.unwritten:
            return
        e = self.e
        b = e.target_batch
        b.clear()
        base = len(e.kv)
        n = len(self.unwritten)
        b.add_token_sets(self.unwritten, range(base, base + n), [self.all_seqs] * n, [False] * n)
        e.target_ctx.process(b)
        e.kv.extend(self.unwritten)
        self.unwritten = []

    def _ar_step(self, last: int, t0: float) -> tuple[int, bool]:
        e = self.e
        self._write_unwritten()
        ts = now()
        pos = len(e.kv)
        b = e.target_batch
        b.clear()
        b.add_token(last, pos, 0, True)
        tv = now()
        e.target_ctx.process(b)
        e.kv.append(last)  # in the cache from here on (a cancelled run keeps it: its K/V is right)
        t_hidden, cancelled = self._stream_deferred_during_decode()
        e.target_ctx.synchronize()  # sync point: end of verify (the forward pass)
        t_verify = now() - tv - t_hidden
        if cancelled:
            self.finish = "cancelled"
            return last, True
        ta = now()
        chosen = self._target_choices(e.target_ctx, 1, np.empty(0, dtype=np.int64))
        t_accept = now() - ta
        defer = self._may_defer(chosen)
        if defer:
            n, done = len(chosen), False
        else:
            n, done = self._commit(chosen, 0, len(self.steps), t0)
        wall = now() - ts
        rec = StepRecord(
            step=len(self.steps),
            pos=pos,
            drafted=0,
            accepted=0,
            committed=n,
            t_verify=t_verify,
            t_accept=t_accept,
            # with the deferred step's streaming, which ran inside this step's decode
            t_other=max(0.0, wall - t_verify - t_accept),
            t_native=t_verify + t_accept,
            wall=wall,
        )
        if defer:
            self._deferred = (chosen, 0, rec, t0)
        else:
            self._record(rec)
        return (chosen[-1] if chosen else last), done

    def _ar_run_step(self, last: int, t0: float) -> tuple[int, bool]:
        """A run of AR steps decoded in one engine call (ar_run.py), committed as one-token steps with
        the per-step loop's tokens, events and records (each record's time is its decode's, read by the
        engine, and the streaming of its token after the run)."""
        e, s, runs = self.e, self.s, self._runs
        assert runs is not None  # _step_function made them
        pos = len(e.kv)
        picks, ns, rc = runs.run(last, pos, min(s.max_tokens - len(self.tokens), e.target_ctx.n_ctx - pos - 1))
        e.kv.extend(([last] + picks)[: len(picks)])  # the inputs of the decodes that gave a pick
        prev = 0
        for i, (tok, t_ns) in enumerate(zip(picks, ns)):
            if i and self.cancel is not None and self.cancel.is_set():
                # the per-step loop stops before the next step: the rest of the run is not committed
                # (its decodes' inputs stay in the cache, as e.kv says)
                self.finish = "cancelled"
                return tok, True
            wall = (t_ns - prev) * 1e-9
            prev = t_ns
            tc = now()
            n, done = self._commit([tok], 0, len(self.steps), t0)
            t_other = now() - tc
            self._record(
                StepRecord(
                    step=len(self.steps),
                    pos=pos + i,
                    drafted=0,
                    accepted=0,
                    committed=n,
                    t_verify=wall,
                    t_other=t_other,
                    t_native=wall,
                    wall=wall + t_other,
                )
            )
            if done:
                return tok, True
        e.target_ctx.check_decode(rc)
        return picks[-1], False

    # -- chain speculative ------------------------------------------------------------------------
    def _chain_step(self, last: int, t0: float) -> tuple[int, bool]:
        e, s, d = self.e, self.s, self.e.drafter
        tctx = e.target_ctx
        self._write_unwritten()
        ts = now()
        pos = len(e.kv)
        remaining = s.max_tokens - self._n_out()
        n_draft = max(0, min(self.budget, tctx.n_ctx - pos - 2, remaining - 1))
        d.t_native = 0.0

        # 1. draft
        td = now()
        if n_draft > 0:
            draft, _ = d.draft(last, pos, n_draft, s.p_min)
        else:
            draft = np.empty(0, dtype=np.int64)
        t_draft = now() - td
        native = d.t_native

        # 2. verify
        tv = now()
        b = e.target_batch
        b.clear()
        b.add_tokens([last, *draft], pos, 0, [True] * (len(draft) + 1))
        tn = now()  # batch building above is host work, not native
        tctx.process(b)
        t_hidden, cancelled = self._stream_deferred_during_decode()
        tctx.synchronize()  # sync point: end of verify
        t_verify = now() - tv - t_hidden
        native += now() - tn - t_hidden
        if cancelled:  # nothing of this step stays: its rows leave the target's cache (the drafter
            # dropped its block after drafting)
            tctx.seq_rm(0, pos, -1)
            self.finish = "cancelled"
            return last, True

        # 3. accept
        ta = now()
        chosen = self._target_choices(tctx, len(draft) + 1, draft)
        t_accept = now() - ta
        n_ok = len(chosen) - 1  # drafts the target agreed with
        native += t_accept

        # 4. commit (stream) -- may stop early at EOG or max_tokens; or streamed during the next
        # step's verify (_may_defer: a plain run on a GPU), when it cannot end the run
        defer = self._may_defer(chosen)
        if defer:
            n_commit, done = len(chosen), False
        else:
            n_commit, done = self._commit(chosen, n_ok, len(self.steps), t0)
        # rows that enter the KV: `last` and the committed tokens but the newest, which becomes
        # the next `last` (it is decoded by the next step's verify); after end-of-generation the
        # newest too (`_keep_rows`), as AR leaves it
        keep = self._keep_rows(n_commit)

        # 5. inject the kept rows' features, then trim both caches
        d.t_native = 0.0
        ti = now()
        d.inject(tctx, 0, keep, pos, sync=self._sync_inject)
        t_inject = now() - ti
        native += d.t_native
        tt = now()
        tctx.seq_rm(0, pos + keep, -1)
        self._tag_prefix(pos)  # a tree run's last steps: keep every leaf sequence whole
        if keep:
            e.kv.append(last)
            e.kv.extend(int(x) for x in chosen[: keep - 1])
        e.dft_valid = len(e.kv)
        t_trim = now() - tt
        native += t_trim
        wall = now() - ts
        self.n_drafted += len(draft)
        accepted = min(n_ok, n_commit)
        self.n_accepted += accepted
        rec = StepRecord(
            step=len(self.steps),
            pos=pos,
            drafted=len(draft),
            accepted=accepted,
            committed=n_commit,
            t_draft=t_draft,
            t_inject=t_inject,
            t_verify=t_verify,
            t_accept=t_accept,
            t_other=max(0.0, wall - t_draft - t_inject - t_verify - t_accept),
            t_native=native,
            wall=wall,
        )
        if defer:
            self._deferred = (chosen, n_ok, rec, t0)
        else:
            self._record(rec)
        return (chosen[n_commit - 1] if n_commit else last), done

    # -- tree speculative (DDTree) -------------------------------------------------------------------
    def _tag_prefix(self, p0: int) -> None:
        """Adds every tree sequence to the target's cells from position p0 on (sequence 0 holds them).

        The committed prefix stays in all leaf sequences for the whole run, so a step only fixes the
        cells it wrote; copying the prefix into each branch every step (and keeping one sequence
        afterwards) cost time linear in the context length.
        """
        for seq in self.all_seqs[1:]:
            self.e.target_ctx.seq_cp(0, seq, p0, -1)

    def _add_tree_seqs(self, n: int) -> None:
        """Grows the run's leaf sequences to ``n``, each given the committed prefix."""
        tctx = self.e.target_ctx
        for seq in range(self.tree_seqs, n):
            tctx.seq_cp(0, seq, -1, -1)
        self.tree_seqs, self.all_seqs = n, list(range(n))
        if tctx.backend_greedy:
            tctx.set_backend_greedy(True, n_seqs=n)

    def _tree_step(self, last: int, t0: float) -> tuple[int, bool]:
        e, s, d = self.e, self.s, self.e.drafter
        tctx = e.target_ctx
        ts = now()
        # the last step's unwritten tokens lead this batch; the root follows them, and the tree's
        # budget shrinks by as many rows, so that the verify costs what the budget asked for
        unwritten, base = self.unwritten, len(e.kv)
        n_un = len(unwritten)
        pos = base + n_un
        remaining = s.max_tokens - len(self.tokens)
        budget = max(0, min(self.budget - n_un, tctx.n_ctx - pos - 2))
        depth = min(d.max_draft, budget, remaining - 1)
        if depth <= 0:
            return self._chain_step(last, t0)
        # fewer block rows (the run's last tokens, the context's end) shorten the seeded chain, so
        # the tree may branch more: give it the sequences, as long as llama.cpp has them
        need = min(e.tree_max_nodes, tree_mod.max_leaves(budget, depth))
        if need > self.tree_seqs:
            self._add_tree_seqs(need)
        d.t_native = 0.0

        # 1. draft once, read the top-K per position, build the tree
        td = now()
        k = tree_mod.useful_top_k(budget, depth, s.tree_top_k)
        cand, logp = d.draft_candidates(
            last, pos, depth, k, head_rows=drafter_mod.tree_head_rows(self.budget, d.max_draft)
        )
        # The greedy chain is seeded to half the budget, at most tree.SEEDED_CHAIN_MAX deep (the tree
        # always holds what a chain of that depth verifies); the rest goes best-first on cumulative
        # log-probability.
        tr = tree_mod.build_tree(
            cand, logp, budget, chain_len=tree_mod.seeded_chain_len(budget), leaf_cap=self.tree_seqs
        )
        t_draft = now() - td
        native = d.t_native

        # 2. verify every node in one decode (ancestor-only attention through sequence ids)
        tv = now()
        sets, _ = tr.leaf_sets()
        b = e.target_batch
        b.clear()
        # their next tokens are committed: outputs only to keep the output count (and the graph)
        off = n_un if self.tree_fixed_outputs else 0  # output rows ahead of the root's
        # one FFI call with patch 0026 (entry by entry without it)
        b.add_token_sets(
            [*unwritten, last, *tr.tokens],
            [*range(base, base + n_un), pos, *(pos + 1 + dep for dep in tr.depth)],
            [self.all_seqs] * (n_un + 1) + sets,
            [self.tree_fixed_outputs] * n_un + [True] * (len(tr) + 1),
        )
        tn = now()
        tctx.process(b)
        tctx.synchronize()  # sync point: end of verify
        t_verify = now() - tv
        native += now() - tn

        # 3. accept: follow the target's choices down the tree
        ta = now()
        if self.sampler is not None:
            pick = lambda row: self.sampler.sample(tctx, n_un + row)  # noqa: E731 -- by batch entry, in row order
        elif tctx.backend_greedy:
            pick = lambda row: tctx.sampled_token(n_un + row)  # noqa: E731 -- by batch entry
        else:
            # the argmax of the rows the walk visits only (commit length + 1 of the budget's rows):
            # 16 rows x 49k logits took ~160 us of host time a step, the visited ~3 rows ~16 us
            rows = tctx.logits(off + len(tr) + 1)  # output rows only
            pick = lambda row: rows[off + row].argmax()  # noqa: E731 -- same ties as argmax(axis=1)
        chosen: list[int] = []
        path: list[int] = []
        node, row = -1, 0
        chain_rows_only = e.exact_chain_rows  # Engine.exact_chain_rows says why
        while True:
            tok = int(pick(row))
            chosen.append(tok)
            child = tr.children.get(node, {}).get(tok)
            if child is None or (chain_rows_only and child != len(path)):
                break  # (off the seeded chain: tok is committed as this row's pick; its row is not read)
            path.append(child)
            node, row = child, child + 1
        if s.record_margins:  # (the target's logits are on the host: record_margins keeps them there)
            self._margins = top2_margins(tctx.logits(off + len(tr) + 1), [off] + [off + c + 1 for c in path])
        t_accept = now() - ta
        native += t_accept

        first = len(self.tokens)
        n_commit, done = self._commit(chosen, len(path), len(self.steps), t0)
        keep = self._keep_rows(n_commit)  # rows kept: the root and the first keep-1 path nodes
        if e.record_verify:
            self.verify_batches.append(
                VerifyBatch(
                    first=first,
                    pos=pos,
                    last=last,
                    n_seqs=len(self.all_seqs),
                    tokens=tuple(int(t) for t in tr.tokens),
                    depth=tuple(int(x) for x in tr.depth),
                    seqs=tuple(tuple(int(q) for q in st) for st in sets),
                    rows=tuple([0] + [n + 1 for n in path])[:n_commit],
                )
            )

        # 4. keep the winning branch only, in every sequence: drop what lies deeper than the kept
        # path, then the other branches' cells beside it (they hold no sequence of the winning
        # leaf), then give the path's cells to every sequence again.
        # Only the path's run along the seeded chain stays in the cache: its cells follow the root
        # in batch order. A kept node off the chain sits after rejected cells, whose holes the next
        # decode fills with later positions; attention then adds the cache's rows out of position
        # order, and the rounding of its accumulation differs from AR's (on CPU the greedy output
        # parted from AR at top-2 gaps up to 0.31 on MT-Bench prompts; bit-identical with this).
        # Those nodes' tokens are committed, and written by the next decode, ahead of its root.
        tt = now()
        kept_nodes = path[: max(0, keep - 1)]
        on_chain = 0
        while on_chain < len(kept_nodes) and kept_nodes[on_chain] == on_chain:
            on_chain += 1
        in_cache = 1 + on_chain if keep else 0
        tree_mod.keep_path(
            tctx, pos, in_cache, sets[kept_nodes[on_chain - 1]][0] if on_chain else None, tr.n_leaves, self.all_seqs
        )
        t_trim = now() - tt

        # 5. inject only the accepted path's features (all of it: the drafter's cache is in order)
        d.t_native = 0.0
        ti = now()
        d.inject(tctx, 0, keep, pos, rows=[n_un] + [n_un + n + 1 for n in kept_nodes], sync=self._sync_inject)
        t_inject = now() - ti
        native += d.t_native + t_trim
        e.kv.extend(unwritten)
        self.unwritten = []
        if keep:
            e.kv.append(last)
            e.kv.extend(int(x) for x in chosen[:on_chain])
            self.unwritten = [int(x) for x in chosen[on_chain : keep - 1]]
        e.dft_valid = len(e.kv) + len(self.unwritten)
        wall = now() - ts
        n_draft = len(tr)
        accepted = min(len(path), n_commit)
        self.n_drafted += n_draft
        self.n_accepted += accepted
        self._record(
            StepRecord(
                step=len(self.steps),
                pos=pos,
                drafted=n_draft,
                accepted=accepted,
                committed=n_commit,
                t_draft=t_draft,
                t_inject=t_inject,
                t_verify=t_verify,
                t_accept=t_accept,
                t_other=max(0.0, wall - t_draft - t_inject - t_verify - t_accept),
                t_native=native,
                wall=wall,
                tree_nodes=n_draft,
                tree_depth=tr.max_depth,
                path_len=accepted,
            )
        )
        return (chosen[n_commit - 1] if n_commit else last), done


def top2_margins(logits: np.ndarray, rows) -> list[float]:
    """The gap between the largest and the second largest logit of each of ``rows``."""
    rows = list(rows)
    if not rows:
        return []
    top = np.partition(np.asarray(logits[rows], dtype=np.float32), -2, axis=1)[:, -2:]
    return [float(x) for x in np.abs(top[:, 1] - top[:, 0])]
