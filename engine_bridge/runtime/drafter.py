"""The DFlash / DSpark drafter: its model, its context, and its two operations.

* ``inject``: target features (the inputs of the drafter's target layers, concatenated per token)
  decoded into the drafter's context as an embedding batch. This writes K/V only.
* ``draft``: one non-causal decode of the noise block ``[last, mask, mask, ...]``; the drafter's
  greedy token at each mask position is the draft. The block's own K/V is removed afterwards.
"""

from __future__ import annotations

import ctypes
import os
import time
from pathlib import Path

import numpy as np

from . import llama_ffi as ffi
from . import tree as tree_mod
from ..common.placement import Placement
from .config import MIN_DRAFT_WINDOW, EngineConfig
from ..common.errors import ModelLoadError
from .native import Batch, Context, LoraAdapter, Model, set_adapters

#: Whether the decoding loop ends each step's inject phase at a synchronisation point. On a GPU
#: llama_process returns before the device is done: without the sync the host goes straight on to
#: queue the drafter's block while the device still runs the inject, and the inject's device time is
#: charged to the draft phase. The sync buys exact phase times at the price of speed (-2.5 % tok/s at
#: chain 7 on an H100, docs/benchmarks.md), so a step syncs only when asked for exact phases
#: (GenerationSettings.exact_phases: the profiler's setting) or when $DFLASH_SYNC_INJECT says so.
SYNC_INJECT = False
#: Environment variable that forces the inject's sync on ("1") or off ("0") whatever the request
#: asks, for A/B measurements (gpu/gpu_ncu.sh sides); unset or empty: the request decides.
SYNC_INJECT_ENV = "DFLASH_SYNC_INJECT"


def sync_inject_on(exact_phases: bool = False) -> bool:
    """Whether a step's inject ends at a sync: $DFLASH_SYNC_INJECT, else exact_phases or SYNC_INJECT."""
    raw = os.environ.get(SYNC_INJECT_ENV, "").strip()
    if raw in ("0", "1"):
        return raw == "1"
    if raw:
        raise ValueError(f"{SYNC_INJECT_ENV}={raw!r}: expected 0 or 1")
    return bool(exact_phases) or SYNC_INJECT


#: Candidates per block row that a tree step's backend top-k sampler returns. Tree scores are
#: log-probabilities normalised over these instead of the whole vocabulary: on the reference pair
#: (15 held-out prompts, budget 7) 32 keeps the mean commit length within 1 % of exact scoring,
#: while 4 or 8 lose 6 %.
BACKEND_TOP_K = 32

#: Where tree steps take the drafter's top-K: "auto", "host" (full logits to the host, exact
#: normalisation) or "backend" (a top-k sampler in the graph). llama.cpp runs the sampler once per
#: block row; on an H200 that cost ~60 us a row on the reference pair's 8k vocabulary (draft phase
#: 0.67 -> 1.04 ms at budget 6, docs/benchmarks.md), more than the host's pass; on a 152k vocabulary the host's pass takes 14 ms
#: against ~1.7 ms. Normalising over BACKEND_TOP_K candidates also flatters deep nodes of an
#: uncertain drafter (a flat synthetic drafter's trees committed less at budget 32 than at 8 on
#: CUDA), so "auto" takes the backend only where the host's pass costs milliseconds -- and only
#: when the drafter runs on a GPU: on the CPU the sampler competes with the same cores and lost at
#: a 262k vocabulary (Gemma 3 270M, tree 8: draft phase 127 ms against 103 on the host; tree 16:
#: 142 against 122; docs/benchmarks.md "Gemma 3"), while on the H100 it won 3.5-4.8x.
TREE_TOP_K_ON = "auto"
BACKEND_TOP_K_MIN_VOCAB = 100_000
#: ... and, below that vocabulary, from this tree budget up. Patch 0007 runs one top-k for all the
#: block's rows. When it was a radix sort of every row (CUDA 13's CCCL), tree 15 won on an H200 and
#: tree 7 was a wash (docs/benchmarks.md "One top-k for all the rows of a drafter block"), so the
#: threshold was 12. Patch 0024's one-pass top-k made the device's pass 5.6x cheaper; on an H200 with
#: the default pair (SmolLM2, 49k vocabulary; the first 80 prompts of each public suite, two runs, the
#: sides back to back in both orders) tree 7 then ran at 1.17-1.25 / 1.55-1.58 / 1.39-1.42x AR on
#: the backend against the host's 0.88-0.95 / 1.15-1.23 / 1.10-1.11 (MT-Bench / GSM8K / HumanEval;
#: draft phase 0.58-0.71 ms a step against 1.17-1.47), commit lengths within 0.013 of each other
#: (docs/benchmarks.md "The tree's top-k on the device from budget 7"). At budget 5 on an H100 (sitting
#: s69, MT-Bench 80, a process a side) tree 5 ran at 1.310x AR on the backend against 1.133x on the host,
#: the same commit length (2.49); so the device takes it from 5. Below 5 was not measured.
BACKEND_TOP_K_MIN_BUDGET = 5
#: Environment variable that forces TREE_TOP_K_ON's choice ("host", "backend" or "auto"), for A/B
#: measurements such as patch 0007's (one top-k for all the block rows); unset or empty: TREE_TOP_K_ON.
TREE_TOP_K_ENV = "DFLASH_TREE_TOP_K"
TREE_TOP_K_CHOICES = ("auto", "host", "backend")


def tree_top_k_on() -> str:
    """Where tree steps take the drafter's top-K: $DFLASH_TREE_TOP_K where set, else TREE_TOP_K_ON."""
    on = os.environ.get(TREE_TOP_K_ENV, "").strip().lower() or TREE_TOP_K_ON
    if on not in TREE_TOP_K_CHOICES:
        raise ValueError(f"{TREE_TOP_K_ENV}={on!r}: expected one of {', '.join(TREE_TOP_K_CHOICES)}")
    return on


#: Environment variable: "0" keeps the drafter context on llama.cpp's one scheduler (patch 0008 off),
#: for A/B measurements; anything else, or unset, gives its no-output batches a scheduler of their own.
NO_OUTPUT_SCHED_ENV = "DFLASH_NO_OUTPUT_SCHED"
#: Up to this many rows (a step's accepted ones) the inject copies the target's layer inputs row by
#: row with memmove; more (a prefill) go through one numpy view per layer.
SMALL_INJECT_ROWS = 32
#: Environment variable: "1" decodes every drafter block whole (block_size rows) whatever the
#: budget and reads the first n drafts, "0" decodes only the rows the budget needs; unset, blocks
#: are whole where the drafter runs on a GPU. Read when a drafter is made.
FULL_BLOCK_ENV = "DFLASH_DRAFT_FULL_BLOCK"


def full_block_on(on_gpu: bool) -> bool:
    """Whether drafter blocks are decoded whole: $DFLASH_DRAFT_FULL_BLOCK where set, else ``on_gpu``.

    The block's rows attend to each other and the drafter was trained on whole blocks, so a whole
    block drafts more of what the target keeps (H200, public prompts: chain-7 commit +6-9 %). On a
    GPU its extra rows cost ~0.1 ms a step and the tree's block keeps one shape (its graph is
    reused); on a CPU every extra row costs a head row, so there it stays budget-sized.
    """
    v = os.environ.get(FULL_BLOCK_ENV, "").strip()
    return v == "1" if v in ("0", "1") else on_gpu


#: Environment variable: "0" marks every row of a drafter block as an output (upstream's graph:
#: the head on every row) for A/B measurements; anything else, or unset, marks only the drafts read
#: where the engine carries patch 0015.
OUT_ROWS_ENV = "DFLASH_DRAFT_OUT_ROWS"
#: The patch that lets a DFlash block's head run only on its output rows.
OUT_ROWS_PATCH = "0015-dflash-output-rows.patch"
#: A block marks only its drafts when that leaves at least this many rows out of the head: a whole
#: block read at chain 7 leaves 9 (H200: draft phase 0.539 -> 0.403 ms); a budget-sized block leaves
#: only the anchor row, and on the 2-vCPU CPU its head on 7 rows instead of 8 ran slower (3.40 ->
#: 3.60 ms; docs/benchmarks.md, "The drafter's head on the drafts alone (patch 0015)").
OUT_ROWS_MIN_SAVED = 2


def out_rows_on() -> bool:
    """Whether drafter blocks mark only the drafts read as outputs: this build carries patch 0015
    and $DFLASH_DRAFT_OUT_ROWS != "0". Without the patch llama.cpp's DFlash graph computes the head
    on every row and returns them all, so marking fewer would return the wrong rows."""
    return os.environ.get(OUT_ROWS_ENV, "").strip() != "0" and ffi.has_patch(OUT_ROWS_PATCH)


#: Environment variable: "depth" runs a tree step's drafter head on the tree's depth alone (the
#: engine's rule until 2026-12-07), for A/B measurements; anything else, or unset: ``tree_head_rows``.
TREE_HEAD_ROWS_ENV = "DFLASH_TREE_HEAD_ROWS"


def tree_head_rows(budget: int, max_draft: int) -> int:
    """How many drafts a tree step's whole block runs its head on (0: as many as it reads).

    A tree step reads ``min(budget - unwritten, ...)`` drafts, so the count moves with the last
    step's commit. With patch 0015's head on the drafts read, the block's graph then changed shape
    from step to step in a way the CUDA graph cache's key (the first and last nodes) did not see:
    on the H100 (s74, tree 15, 40 requests) 129 of ~1,300 blocks re-captured their graph and 150 ran
    without one. Reading the head on the budget's drafts every step keeps one graph; the extra rows
    are a few columns of the head's mat-vec.
    """
    if os.environ.get(TREE_HEAD_ROWS_ENV, "").strip() == "depth":
        return 0
    return min(budget, max_draft)


#: DFLASH_DRAFT_WINDOW=N keeps only the drafter's last N context cells (0: all of them), overriding
#: ``EngineConfig.draft_window``. The drafter was trained on conversations of at most ~700 tokens,
#: and in a long chat its commit fades (MT-Bench's questions asked as one chat: chain 7 commits
#: 1.16 a step past 4k cells, 2.81 with a 512-cell window); a window keeps its attention on the
#: span it was trained on. Cells are dropped WINDOW_SLACK at a time.
WINDOW_ENV = "DFLASH_DRAFT_WINDOW"
WINDOW_SLACK = 64


def draft_window(configured: int = 0) -> int:
    """The drafter's context window in cells: the environment's when set, else ``configured``
    (0: the whole context)."""
    raw = os.environ.get(WINDOW_ENV, "").strip()
    if not raw:
        return configured
    try:
        n = int(raw)
    except ValueError:
        raise ValueError(f"{WINDOW_ENV}={raw!r}: a number of cells (0: the whole context)") from None
    if n < 0 or 0 < n < MIN_DRAFT_WINDOW:
        raise ValueError(f"{WINDOW_ENV}={raw!r}: 0 or at least {MIN_DRAFT_WINDOW} cells")
    return n


def no_output_scheduler_on() -> bool:
    """Whether drafter contexts get patch 0008's second scheduler: $DFLASH_NO_OUTPUT_SCHED != "0"."""
    return os.environ.get(NO_OUTPUT_SCHED_ENV, "").strip() != "0"


#: Environment variable: the feature injects of up to this many rows (0-16) get a graph slot of their
#: own per row count (patch 0029), read at each request; unset: INJECT_SLOTS_ON_DEVICE for chain and
#: tree steps on a GPU, else 0. An inject has as many rows as the last commit, so with one slot (0)
#: llama.cpp builds and allocates its graph again whenever the commit length changes, most steps (s70's
#: profile: 37 % of the inject's host path).
INJECT_SLOTS_ENV = "DFLASH_INJECT_SLOTS"
#: Chain and tree steps on a GPU. Measured on H100s (the first 40 prompts of each public suite, 240
#: requests a side): chain 5 1.0142x (s73) and 1.0057x (s74) with 16 slots, both sides in one process;
#: tree 15 1.0154x (s76, median per request 1.0164; the inject phase 0.272 -> 0.231 ms a step, lower in
#: every suite) with each side in processes of its own. In one process tree 15 had read 0.9885x (s73)
#: and 0.9691x (s75): turning the slots down frees their schedulers, so there the slotted side started
#: half its requests without graphs, a cost a user who keeps one setting never pays. A CPU keeps one
#: slot: chain 5 read 0.9979x on a 2-vCPU machine (docs/runs/2026-12-07-cpu/inject-slots/).
INJECT_SLOTS_ON_DEVICE = 16
#: Patch 0029 keeps at most this many row counts (ROW_SLOTS_MAX in llama-context.h).
INJECT_SLOTS_MAX = 16


def inject_slots_wanted(mode: str, on_gpu: bool) -> int:
    """The inject row counts that get their own graph slot in a request of ``mode``:
    $DFLASH_INJECT_SLOTS, else INJECT_SLOTS_ON_DEVICE for chain and tree steps on a GPU, else 0."""
    raw = os.environ.get(INJECT_SLOTS_ENV, "").strip()
    if not raw:
        return INJECT_SLOTS_ON_DEVICE if mode in ("chain", "tree") and on_gpu else 0
    try:
        n = int(raw)
    except ValueError:
        n = -1
    if not 0 <= n <= INJECT_SLOTS_MAX:
        raise ValueError(f"{INJECT_SLOTS_ENV}={raw!r}: expected a row count from 0 to {INJECT_SLOTS_MAX}")
    return n


class Drafter:
    def __init__(
        self,
        path: Path,
        config: EngineConfig,
        target_ctx: Context,
        placement: Placement | None = None,
        devices: list[int] | None = None,
    ):
        self.path = Path(path)
        self.model = Model(self.path, config.draft_n_gpu_layers, placement, devices)
        #: its layers run on a GPU (a GPU build offloading them): where a sampler in the graph pays
        self.on_gpu = config.draft_n_gpu_layers != 0 and _gpu_build()
        try:
            # The drafter has no embeddings or lm_head of its own: it reads the target's through
            # ctx_other, so its context must be created with the target's as the other.
            self.ctx = Context(
                self.model,
                n_ctx=target_ctx.n_ctx,
                n_batch=target_ctx.n_batch,
                n_ubatch=target_ctx.n_ubatch,
                kv=config.draft_kv,
                flash_attn=config.flash_attn,
                n_threads=config.n_threads,
                other=target_ctx,
            )
        except ModelLoadError:
            self.model.free()
            raise
        m = self.model
        n_ids = ffi.llama_model_target_layer_ids_n(m.ptr)
        ids_ptr = ffi.llama_model_target_layer_ids(m.ptr)
        self.target_layers = [int(ids_ptr[i]) for i in range(n_ids)]
        self.block_size = int(m.meta("dflash.block_size") or 16)
        tensors = _tensor_names(m)
        self.is_dspark = m.meta("dflash.sample_from_anchor") is not None and "markov_w1.weight" in tensors
        # patch 0015: the head only on the drafts read. DSpark's Markov head and DFlash2's selector
        # read every row, so the graph keeps them whole and the engine marks every row.
        every_row_heads = {"markov_w1.weight", "selector_hidden.weight"} & tensors
        self.out_rows = out_rows_on() and not every_row_heads
        self.sample_from_anchor = (m.meta("dflash.sample_from_anchor") or "true") == "true"
        self.causal = (m.meta("dflash.attention.causal") or "false") == "true"
        self.has_confidence = (m.meta("dflash.has_confidence_head") or "true") == "true"
        self.mask_token = int(ffi.C.llama_vocab_mask(m.vocab))
        # DFlash fills [last, mask x (block-1)] in place, so at most block_size-1 draft tokens;
        # anchor-first DSpark reads every block slot, so a full block.
        self.max_draft = self.block_size if (self.is_dspark and self.sample_from_anchor) else self.block_size - 1
        self.n_embd_tgt = target_ctx.model.n_embd
        self.n_embd_enc = len(self.target_layers) * self.n_embd_tgt
        self.ctx.set_causal(self.causal)
        # the feature inject (no outputs) and the block (outputs) alternate every step: with a
        # scheduler each (patch 0008) each graph stays allocated while the other runs, so the block's
        # is reused (H200: draft phase -0.11 to -0.17 ms a chain-15 step); llama.cpp otherwise rebuilt
        # both at every step. (Padding the inject to a block's rows, so its graph is reused too, was
        # measured and dropped: no faster inject at chain 15, slower at tree 15.)
        self.two_schedulers = no_output_scheduler_on() and ffi.set_no_output_scheduler(self.ctx.ptr, True)
        self.inject_slots = 0  # patch 0029's row counts with a slot of their own (set_inject_slots)
        self.full_block = full_block_on(self.on_gpu)
        self.window = draft_window(config.draft_window)
        self.batch = Batch(self.ctx)
        self.inject_batch = Batch(self.ctx)
        self._features = np.zeros((0, self.n_embd_enc), dtype=np.float32)
        self.adapters: list[tuple[LoraAdapter, float]] = []
        self.t_native = 0.0  # time inside llama.cpp calls, read and reset by the loop

    # -- LoRA -----------------------------------------------------------------------------------
    def set_adapters(self, adapters: list[tuple[Path, float]]) -> None:
        new = [(LoraAdapter(self.model, p), float(s)) for p, s in adapters]
        set_adapters(self.ctx, new)
        for a, _ in self.adapters:
            a.free()
        self.adapters = new

    # -- target features -> drafter KV -----------------------------------------------------------
    def set_inject_slots(self, n: int) -> None:
        """Gives the injects of up to ``n`` rows a graph slot per row count (patch 0029; 0: one slot
        for all), where the build has it and the inject has patch 0008's scheduler. A change makes
        each slot's graph be built again at its next inject, so the engine calls this per request."""
        if n != self.inject_slots and self.two_schedulers and ffi.set_no_output_row_slots(self.ctx.ptr, n):
            self.inject_slots = n

    def enable_extraction(self, target_ctx: Context, on: bool) -> None:
        for lid in self.target_layers:
            ffi.llama_set_embeddings_layer_inp(target_ctx.ptr, lid, on)

    def inject(
        self,
        target_ctx: Context,
        first_row: int,
        n_rows: int,
        pos0: int,
        seq: int = 0,
        rows: list[int] | np.ndarray | None = None,
        sync: bool = False,
    ) -> None:
        """Decodes the features of target batch rows into the drafter's KV at pos0, pos0+1, ...

        ``rows`` picks arbitrary batch rows (tree verification: the accepted path); otherwise
        ``first_row .. first_row + n_rows - 1``. ``sync`` waits for the device before returning
        (the decoding loop's steps pass SYNC_INJECT; the prefill leaves it asynchronous).
        """
        if n_rows <= 0:
            return
        if rows is not None and rows[-1] - rows[0] == len(rows) - 1:
            first_row, rows = rows[0], None  # a run of rows (a tree's greedy chain): slices
        elif rows is not None:
            rows = np.asarray(rows)
        if self._features.shape[0] < n_rows:
            self._features = np.zeros((max(n_rows, 64), self.n_embd_enc), dtype=np.float32)
        feats = self._features
        d = self.n_embd_tgt
        t0 = time.perf_counter()
        if n_rows <= SMALL_INJECT_ROWS:
            # a step's few rows: one memmove per row and layer from llama.cpp's buffer; a numpy view
            # of it (np.ctypeslib.as_array) builds a ctypes array type per call (docs/benchmarks.md,
            # "The inject's host time": 21 -> 17 us for a 2-row inject, 35 -> 30 for 6)
            src_rows = range(first_row, first_row + n_rows) if rows is None else [int(r) for r in rows]
            row_bytes, dst0, dst_stride = d * 4, feats.ctypes.data, feats.strides[0]
            move = ctypes.memmove
            for k, lid in enumerate(self.target_layers):
                addr = ctypes.cast(ffi.llama_get_embeddings_layer_inp(target_ctx.ptr, lid), ctypes.c_void_p).value
                if not addr:
                    raise RuntimeError(f"the target holds no layer input for layer {lid} (extraction is off)")
                dst = dst0 + k * row_bytes
                for j, r in enumerate(src_rows):
                    move(dst + j * dst_stride, addr + r * row_bytes, row_bytes)
        else:
            for k, lid in enumerate(self.target_layers):
                ptr = ffi.llama_get_embeddings_layer_inp(target_ctx.ptr, lid)
                n_avail = first_row + n_rows if rows is None else max(rows) + 1
                layer = np.ctypeslib.as_array(ptr, shape=(n_avail, d))
                src = layer[first_row : first_row + n_rows] if rows is None else layer[rows]
                feats[:n_rows, k * d : (k + 1) * d] = src
        self.t_native += time.perf_counter() - t0
        self.inject_features(feats, n_rows, pos0, seq, sync)

    def inject_features(self, feats: np.ndarray, n_rows: int, pos0: int, seq: int = 0, sync: bool = False) -> None:
        """Decodes ``n_rows`` rows of features (read earlier from the target) at pos0, pos0+1, ..."""
        step = self.ctx.n_ubatch
        b = self.inject_batch
        if not (feats.dtype == np.float32 and feats.flags.c_contiguous):
            feats = np.ascontiguousarray(feats, dtype=np.float32)
        base, stride, n_embd = feats.ctypes.data, feats.strides[0], feats.shape[1]
        for off in range(0, n_rows, step):
            n = min(step, n_rows - off)
            b.clear()
            for i in range(off, off + n):
                b.add_embd_at(base + i * stride, n_embd, pos0 + i, seq)
            t0 = time.perf_counter()
            self.ctx.process(b)
            self.t_native += time.perf_counter() - t0
        if self.window:
            self.trim(pos0 + n_rows, seq)
        if sync:
            t0 = time.perf_counter()
            self.ctx.synchronize()
            self.t_native += time.perf_counter() - t0

    def trim(self, end: int, seq: int = 0) -> None:
        """Drops the context cells before ``end - window`` once WINDOW_SLACK of them are due."""
        first = self.ctx.seq_pos_min(seq)
        if first >= 0 and end - first > self.window + WINDOW_SLACK:
            self.ctx.seq_rm(seq, 0, end - self.window)

    # -- drafting ---------------------------------------------------------------------------------
    def _decode_block(
        self, last: int, pos: int, n: int, every_row: bool = False, head_rows: int = 0
    ) -> tuple[int, int, int]:
        """Queues the non-causal decode of the noise block for ``n`` drafts.

        Returns (output rows, batch index of the first draft, logits row of the first draft). With
        ``out_rows`` (patch 0015) and a block that has OUT_ROWS_MIN_SAVED rows more than the drafts
        read (a whole block), only the n drafts are outputs, so the head runs on n rows and the
        logits hold just them; otherwise (or with ``every_row``) every block row is an output, as
        upstream marks them, and the drafts are read from the first draft's row on. ``head_rows``
        (a whole block only) runs the head on that many drafts when it is more than ``n``, so that
        blocks read for different ``n`` build one graph (the caller reads the first ``n``).
        """
        anchor_first = self.is_dspark and self.sample_from_anchor
        b = self.batch
        b.clear()
        n_read = n
        # a whole block whatever n where full_block (a GPU drafter, or DFLASH_DRAFT_FULL_BLOCK=1):
        # the rows attend to each other, so its length shapes every draft, and the drafter was
        # trained on whole blocks; the first n drafts are read
        if self.full_block and not anchor_first and pos + self.max_draft + 1 < self.ctx.n_ctx:
            n = max(n, self.max_draft)
            n_read = max(n_read, min(head_rows, n))
        n_block = n if anchor_first else n + 1
        first_out = 0 if anchor_first else 1
        # Without patch 0015 dflash.cpp selects no output rows: its logits hold every block row in
        # order, so every entry is marked as an output and the draft is read from first_out on
        # (marking only the mask slots would make row k hold slot k, not slot k + 1).
        select = self.out_rows and not every_row and n_block - n_read >= OUT_ROWS_MIN_SAVED
        outs = [not select or first_out <= i < first_out + n_read for i in range(n_block)]
        b.add_tokens([last] + [self.mask_token] * (n_block - 1), pos, 0, outs)
        t0 = time.perf_counter()
        self.ctx.process(b)
        self.t_native += time.perf_counter() - t0
        return (n_read, first_out, 0) if select else (n_block, first_out, first_out)

    def draft(self, last: int, pos: int, n: int, p_min: float = 0.0):
        """Drafts up to ``n`` tokens after ``last`` (which sits at ``pos``).

        Returns (tokens, logits_view) where logits_view holds the n rows the draft was read from
        (None when the argmax or the top-k ran on the backend); tokens stops early below ``p_min``
        (with a backend top-k, the probability is normalised over its candidates).
        """
        n_rows, first_out, row0 = self._decode_block(last, pos, n)
        t0 = time.perf_counter()
        if self.ctx.backend_top_k > 0:
            # p_min on a GPU (p_min_top_k_backend): the device's top-k, no vocabulary-sized rows
            ids, lg = self.ctx.sampled_top_k(first_out, n)  # synchronises: the end of the draft decode
            rows = np.arange(n)
            best = lg.argmax(axis=1)
            tokens = ids[rows, best].astype(np.int64)
            if p_min > 0.0:
                # normalised over the k candidates: at least the vocabulary's probability, so this
                # cuts where the host's rule would, or later
                tokens = _cut_below(tokens, lg, lg[rows, best], p_min)
            self.ctx.seq_rm(0, pos, -1)
            self.t_native += time.perf_counter() - t0
            return tokens, None
        if self.ctx.backend_greedy:
            # argmax ran on the device; reading a token synchronises: the end of the draft decode
            tokens = self.ctx.sampled_tokens(first_out, n)
            self.ctx.seq_rm(0, pos, -1)
            self.t_native += time.perf_counter() - t0
            return tokens, None
        logits = self.ctx.logits(n_rows)[row0 : row0 + n]  # synchronises: the end of the draft decode
        tokens = logits.argmax(axis=1)
        if p_min > 0.0:
            tokens = _cut_below(tokens, logits, logits[np.arange(n), tokens], p_min)
        # the noise block's K/V must not stay in the drafter's cache
        self.ctx.seq_rm(0, pos, -1)
        self.t_native += time.perf_counter() - t0
        return tokens, logits

    def draft_candidates(
        self, last: int, pos: int, n: int, k: int, head_rows: int = 0
    ) -> tuple[np.ndarray, np.ndarray]:
        """The drafter's k best tokens (best first) and their log-probabilities at each of ``n``
        block positions after ``last``: the input of tree construction. Both (n, k).

        ``head_rows``: on a whole block, the head runs on that many drafts however few are read
        (see ``tree_head_rows``), so that the block's graph keeps one shape.

        With a backend top-k sampler attached (``ctx.set_backend_top_k``) the device returns
        BACKEND_TOP_K candidates per row and no vocabulary-sized logits; log-probabilities are
        then normalised over those candidates (the rest of the vocabulary is left out of the sum).
        Otherwise the host reads the logits and normalises over the whole vocabulary.
        """
        n_rows, first_out, row0 = self._decode_block(last, pos, n, head_rows=head_rows)
        t0 = time.perf_counter()
        if self.ctx.backend_top_k >= k:
            ids, lg = self.ctx.sampled_top_k(first_out, n)  # synchronises
            t1 = time.perf_counter()
            tokens, logp = tree_mod.rank_candidates(ids, lg, k)
        else:
            logits = self.ctx.logits(n_rows)[row0 : row0 + n]  # synchronises
            t1 = time.perf_counter()
            tokens, logp = tree_mod.top_candidates(logits, k)
        t2 = time.perf_counter()
        self.ctx.seq_rm(0, pos, -1)
        self.t_native += (t1 - t0) + (time.perf_counter() - t2)  # the ranking is host work
        return tokens, logp

    def tree_top_k_backend(self, budget: int = 0) -> int:
        """How many candidates a tree step's backend top-k sampler should return (0: use the host).

        ``budget``: the tree's node budget (the drafter block has up to that many rows)."""
        on = tree_top_k_on()
        if on == "auto":
            big = self.model.n_vocab >= BACKEND_TOP_K_MIN_VOCAB or budget >= BACKEND_TOP_K_MIN_BUDGET
            on = "backend" if big and self.on_gpu else "host"
        return BACKEND_TOP_K if on == "backend" else 0

    def p_min_top_k_backend(self) -> int:
        """How many candidates a chain step with ``p_min`` should take from a backend top-k sampler
        (0: the host reads the block's logits). Where the drafter runs on a GPU the host's logits
        cost a vocabulary-sized copy per block row (16 x 49k floats on the default pair) and the
        device argmax gives no probability; patch 0007's top-k gives both in one launch.
        $DFLASH_TREE_TOP_K ("host" / "backend") decides here too, for A/B runs."""
        on = tree_top_k_on()
        if on == "auto":
            on = "backend" if self.on_gpu else "host"
        return BACKEND_TOP_K if on == "backend" else 0

    def free(self) -> None:
        for a, _ in self.adapters:
            a.free()
        self.adapters = []
        self.batch.free()
        self.inject_batch.free()
        self.ctx.free()
        self.model.free()


def _cut_below(tokens: np.ndarray, logits: np.ndarray, top: np.ndarray, p_min: float) -> np.ndarray:
    """``tokens`` up to the first row whose greedy probability, 1 / sum(exp(l - l_top)) over that
    row's ``logits``, is below ``p_min`` (a chain's draft cut, GenerationSettings.p_min)."""
    p = 1.0 / np.exp(logits - top[:, None]).sum(axis=1)
    low = np.nonzero(p < p_min)[0]
    return tokens[: int(low[0])] if low.size else tokens


def _gpu_build() -> bool:
    from . import llama_ffi

    return llama_ffi.build_info().get("backend", "cpu") != "cpu"


def _tensor_names(model: Model) -> set[str]:
    # DSpark (a Markov head) and DFlash2 (a selector) are told apart from DFlash by their tensors,
    # which the C API cannot list, so the GGUF header is read (cheap: metadata only).
    from gguf import GGUFReader

    try:
        reader = GGUFReader(model.path)
    except Exception:
        return set()
    return {t.name for t in reader.tensors}
