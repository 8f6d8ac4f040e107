"""The engine: a target and an optional DFlash/DSpark drafter loaded into llama.cpp.

Typical use::

    from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT

    eng = Engine.load(EngineConfig(target="t.gguf", draft="d.gguf"), preflight=PAIR_PREFLIGHT)
    res = eng.generate("Hello", GenerationSettings(mode="chain", budget=7))
    print(res.text, res.summary.mean_commit_len)
    eng.close()

An Engine is not thread-safe: one thread drives it (the GUI's worker thread, the CLI, a bench);
another thread may only set the ``cancel`` event it passed to ``generate``.

KV bookkeeping: ``kv`` lists the tokens whose K/V sit in the target's cache (positions
0..len-1); ``dft_valid`` counts the leading positions whose target features sit in the
drafter's cache. A new request reuses the longest common prefix (multi-turn chat), so only the
new part of the conversation is prefilled.

The pairing checks run before anything loads, but they live a layer above (runtime imports only
common): the caller hands them over as ``preflight`` (runtime.preflight says what it must do).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from .config import EngineConfig, GenerationSettings
from ..common.placement import Placement
from .drafter import Drafter
from ..common.errors import ContextOverflowError, IncompatiblePairError, UnsupportedSettingError
from .file_pin import FilePin, ModelChangedError, pin
from .generation import Generation, tree_fixed_outputs
from . import tree as tree_mod
from . import context_size, llama_ffi, llama_log
from .llama_ffi import C
from .native import Batch, Context, Model
from .preflight import Preflight, missing as _no_checks
from .records import GenerationResult


@dataclass(frozen=True)
class TargetSnapshot:
    """What ``Engine.snapshot_target`` saved: the cached tokens and llama.cpp's bytes for them."""

    tokens: list[int]
    state: bytes
    wide_batches: tuple[tuple[int, int], ...] = ()  # Engine.wide_batches for those tokens
    drafter_state: bytes | None = None  # the drafter's cache too (snapshot_target(drafter=True))
    dft_valid: int = 0  # how many of the tokens the drafter's cache held


EXACT_CUDA_PATCH = "0016-batch-invariant-cuda.patch"
#: "1" / "0" turns the exact verify on / off whatever the config says, for A/B runs of one script
#: (gpu/gpu_fuse_ab.py --env DFLASH_EXACT); unset: the config's choice
EXACT_ENV = "DFLASH_EXACT"


#: The widest batch whose rows the exact verify's kernels compute as one-row decodes compute them
#: (patch 0016 on CUDA: MMVQ up to 16 columns, the vector attention up to 16 rows; longer batches,
#: prompts, keep upstream's kernels). An exact engine decodes tokens it decodes again (a drafter's
#: catch-up, a prefill that starts before what the cache holds) in batches of at most this many, so
#: their K/V is what AR wrote for them.
EXACT_ROWS = 16


def exact_from_env(config: EngineConfig) -> EngineConfig:
    """``config`` with ``exact`` as $DFLASH_EXACT says ("1" on, "0" off; anything else: unchanged)."""
    v = os.environ.get(EXACT_ENV, "").strip()
    if v in ("0", "1") and (v == "1") != config.exact:
        return config.replace(exact=v == "1")
    return config


def _make_exact(ctx: Context, gpus: list[dict]) -> None:
    """Switches the target context to batch-invariant kernels (EngineConfig.exact) or says why not;
    ``gpus``: the devices the target's layers go to (offload_gpus; none with GPU layers 0).

    On CPU they are ggml's reference kernels (patch 0005). A GPU-offloaded target needs patch 0016
    as well: its CUDA backend then runs every verify row with a one-row decode's matmul order and
    attention split. RPC devices cannot switch, so an RPC split is refused."""
    from . import llama_ffi

    if any(g.get("type") == "rpc" for g in gpus):
        ctx.free()
        raise UnsupportedSettingError(
            "the exact verify cannot run on RPC devices (their kernels are not batch-invariant); "
            "drop the RPC servers, or turn exact off"
        )
    if gpus and not llama_ffi.has_patch(EXACT_CUDA_PATCH):
        ctx.free()
        raise UnsupportedSettingError(
            "this engine build has no exact verify on a GPU (llama.cpp patch 0016): run `make setup` "
            "to rebuild it, set GPU layers to 0, or turn exact off"
        )
    if not llama_ffi.set_batch_invariant(ctx.ptr, True):
        ctx.free()
        if gpus:
            raise UnsupportedSettingError(
                "a device of this target cannot run batch-invariant kernels (only CUDA GPUs and the "
                "CPU can); set GPU layers to 0 for the exact verify, or turn exact off"
            )
        raise UnsupportedSettingError(
            "this engine build lacks the exact verify (llama.cpp patch 0005): run `make setup` to rebuild it"
        )


def offload_gpus(config: EngineConfig) -> list[dict]:
    """The devices this engine offloads to, in the order the layers are spread over them: the RPC
    servers' devices first (llama.cpp's default order), then this machine's GPUs (none on a CPU
    build or with --ngl 0)."""
    if config.n_gpu_layers == 0 and config.draft_n_gpu_layers == 0:
        return []
    from . import llama_ffi

    remote = []
    if config.rpc_servers:
        from . import rpc

        remote = [d.as_gpu() for d in rpc.devices(config.rpc_servers)]
    if llama_ffi.build_info().get("backend", "cpu") == "cpu":
        return remote
    return remote + llama_ffi.gpus()


def device_handles(config: EngineConfig) -> list[int] | None:
    """The explicit device list for llama.cpp when RPC servers are configured (registering them:
    from here on a lost server aborts this process); None: llama.cpp's own default."""
    if not config.rpc_servers:
        return None
    from . import llama_ffi, rpc

    remote = rpc.register(config.rpc_servers)
    local = [] if llama_ffi.build_info().get("backend", "cpu") == "cpu" else llama_ffi.local_gpu_handles()
    return remote + local


def draft_placement(config: EngineConfig, gpus: list[dict], preflight: Preflight | None) -> Placement:
    """The drafter's placement: the configured one, or, with several GPUs, the pre-flight's (all of
    it on the GPU that holds the target's output: the drafter reads the target's last layers'
    features and its lm_head there; elsewhere every draft would copy them across). Without a
    pre-flight (an unchecked load), llama.cpp's own default."""
    if config.draft_placement is not None:
        return config.draft_placement
    if len(gpus) < 2 or preflight is None:
        return Placement()
    return preflight.draft_placement(config, gpus)


def run_checks(preflight: Preflight | None, config: EngineConfig):
    """The pairing checks (from the layer above); raise IncompatiblePairError instead of letting
    llama.cpp abort."""
    if preflight is None:
        raise _no_checks()
    return preflight.check(config, offload_gpus(config))


#: Environment variable: "0" leaves the target's one-row decodes in llama.cpp's shared graph slot
#: (patch 0009 off), for A/B measurements; anything else, or unset, gives them a slot of their own.
ONE_ROW_SCHED_ENV = "DFLASH_ONE_ROW_SCHED"


def one_row_scheduler_on() -> bool:
    """Whether a target paired with a drafter gets patch 0009's one-row slot: $DFLASH_ONE_ROW_SCHED != "0"."""
    return os.environ.get(ONE_ROW_SCHED_ENV, "").strip() != "0"


#: Environment variable: the row count up to which the target's all-output batches get a graph slot
#: each (patch 0017; 0 or 1: only patch 0009's one-row slot), for A/B measurements.
ROW_SLOTS_ENV = "DFLASH_ROW_SLOTS"
#: A verify has at most 16 rows (budget 15), so every verify width gets its own slot: the first verify
#: after a prompt, auto's probes of other budgets and a chain cut short (p_min) then reuse their graphs.
ROW_SLOTS = 16


def row_slots_wanted() -> int:
    """Patch 0017's row count for a target paired with a drafter: $DFLASH_ROW_SLOTS, else ROW_SLOTS."""
    raw = os.environ.get(ROW_SLOTS_ENV, "").strip()
    try:
        return min(max(int(raw), 0), ROW_SLOTS) if raw else ROW_SLOTS
    except ValueError:
        raise ValueError(f"{ROW_SLOTS_ENV}={raw!r}: expected a row count from 0 to {ROW_SLOTS}") from None


class Engine:
    def __init__(self, config: EngineConfig, target: Model, target_ctx: Context, report=None):
        self.config = config
        self.target = target
        self.target_ctx = target_ctx
        self.target_batch = Batch(target_ctx)
        self.drafter: Drafter | None = None
        self.devices: list[int] | None = None  # the explicit device list (RPC servers configured)
        self.draft_placement: Placement | None = None  # set when the first drafter is attached
        self.report = report
        self.preflight: Preflight | None = None  # the checks handed to load(), for swap_drafter / set_adapters
        self.kv: list[int] = []
        #: the target batches of more than EXACT_ROWS rows that wrote ``kv`` (a prompt's chunks), as
        #: (first, end) positions: an exact engine decodes such tokens again in the same batches,
        #: since a wide batch's kernels round K/V as no narrower batch does (issue 29)
        self.wide_batches: list[tuple[int, int]] = []
        #: every prompt chunk that wrote ``kv`` (first, end), whole: a prompt cached to its end decodes
        #: its last token again for the first token's logits, in the chunk that first wrote it (_prefill)
        self.prompt_chunks: list[tuple[int, int]] = []
        self.dft_valid = 0
        self._extracting = False
        self.one_row_graph = False  # patch 0009 on the target context (set when a drafter is attached)
        self.row_slots = 0  # patch 0017's row count on the target context (likewise; 0: not in use)
        #: an exact engine on a GPU reads a tree verify's rows on its seeded chain only: a row whose
        #: ancestors lie behind other branches' masked cells drifts from a one-row decode there
        #: (bench_drift's "branch" shapes, H200: up to 3.8 logits), so a path that leaves the chain
        #: commits the first node off it (read from its parent's row, on the chain) and stops
        self.exact_chain_rows = False
        #: the target's layers run on a GPU (or RPC device): its decodes return before the device is
        #: done, so a plain run can stream a step's tokens while the next decode runs (generation.py)
        self.target_on_device = False
        ok, reason = _tree_support(target)
        # a transformer's KV drops any span of positions; a recurrent/hybrid state cannot be rolled
        # back by an arbitrary number of tokens (auto mode's drafter catch-up needs the former)
        self.span_rollback = ok
        self.tree_max_nodes = int(C.llama_n_seq_max(target_ctx.ptr)) if ok else 0
        self.tree_capable = ok and self.tree_max_nodes > 1
        self.tree_reason = reason if not ok else ("" if self.tree_capable else "the context has one sequence")
        #: keep each tree step's verify batch in the result (GenerationResult.verify_batches): what a
        #: losslessness check replays a parting in (near_tie.parting); off for chat and bench
        self.record_verify = False
        self.calibration = None  # calibration.CostTable: step costs on this machine (auto mode)
        self.auto_policy = None  # auto_mode.AutoPolicy: the pair's running commit lengths
        #: how auto's AR steps keep the drafter's context: "host", "redecode", or None (by device:
        #: auto_mode.feature_path)
        self.auto_keep_features: str | None = None

    # -- loading ----------------------------------------------------------------------------------
    @classmethod
    def load(
        cls,
        config: EngineConfig,
        *,
        preflight: Preflight | None = None,
        check: bool = True,
        progress: Callable[[str], None] | None = None,
    ) -> "Engine":
        """``preflight``: the pairing checks from the layer above (models.pair_preflight.PAIR_PREFLIGHT),
        run unless ``check`` is False; asking for checks without handing them over is an error."""
        say = progress or (lambda msg: None)
        config = exact_from_env(config)
        report = None
        pins: dict[str, FilePin] = {}
        if check:
            # pinned before the check, verified around each load: what loads is what was checked
            pins = {"target": pin(config.target, "target")}
            if config.draft is not None:
                pins["drafter"] = pin(config.draft, "drafter")
            say("checking the pair")
            report = run_checks(preflight, config)
        say(f"loading target {config.target.name}")
        if "target" in pins:
            pins["target"].verify()
        devices = device_handles(config)
        # the devices layers go to: the drafter's placement and the exact verify read them (one probe)
        gpus = offload_gpus(config) if (config.draft is not None or config.exact) else []
        target = Model(config.target, config.n_gpu_layers, config.target_placement, devices)
        try:
            if "target" in pins:
                pins["target"].verify()
            tree_ok, _ = _tree_support(target)
            # Tree verification gives each leaf a sequence id in one unified KV cache; a plain chain
            # needs one sequence. llama.cpp allows at most 256 sequences.
            n_seq = min(config.max_tree_nodes, 256, config.n_batch - 1) if (tree_ok and config.draft) else 1
            # 0: the target's own context length, capped by memory. The config keeps the 0 it was
            # asked with (the app compares it with the settings to tell what needs a reload); the
            # resolved size is the context's n_ctx.
            n_ctx = config.n_ctx or context_size.default_n_ctx(target, config.target_kv.k, config.target_kv.v)
            ctx = Context(
                target,
                n_ctx=n_ctx,
                n_batch=config.n_batch,
                n_ubatch=config.n_ubatch,
                kv=config.target_kv,
                flash_attn=config.flash_attn,
                n_threads=config.n_threads,
                n_seq_max=max(1, n_seq),
                kv_unified=True,
            )
            if config.exact:
                _make_exact(ctx, gpus if config.n_gpu_layers != 0 else [])
        except Exception:
            target.free()
            raise
        eng = cls(config, target, ctx, report)
        eng.exact_chain_rows = config.exact and config.n_gpu_layers != 0 and bool(gpus)
        eng.target_on_device = config.n_gpu_layers != 0 and (
            bool(gpus) or llama_ffi.build_info().get("backend", "cpu") != "cpu"
        )
        eng.devices = devices
        eng.preflight = preflight
        if config.draft is not None:
            eng.draft_placement = draft_placement(config, gpus, preflight)
            say(f"loading drafter {config.draft.name}")
            try:
                eng._attach_drafter(config.draft, pins.get("drafter"))
                if config.adapters:
                    assert eng.drafter is not None
                    eng.drafter.set_adapters(list(config.adapters))
            except Exception:
                eng.close()
                raise
        return eng

    def _attach_drafter(self, path: Path, pinned: FilePin | None = None) -> None:
        if pinned is not None:
            pinned.verify()
        if self.draft_placement is None:
            self.draft_placement = draft_placement(self.config, offload_gpus(self.config), self.preflight)
        drafter = Drafter(path, self.config, self.target_ctx, self.draft_placement, self.devices)
        if pinned is not None:
            try:
                pinned.verify()
            except ModelChangedError:
                drafter.free()
                raise
        self.drafter = drafter
        self.dft_valid = 0
        self._extracting = False
        # auto mode alternates the target's AR steps (one row) with verifies and probes (several):
        # with patch 0009 each keeps its graph (and CUDA graph) instead of rebuilding it at every switch
        self.one_row_graph = one_row_scheduler_on() and llama_ffi.set_one_row_scheduler(self.target_ctx.ptr, True)
        # patch 0017: every verify width keeps its graph too (0 where the build lacks it or 0009 is off)
        slots = row_slots_wanted() if self.one_row_graph else 0
        self.row_slots = slots if slots > 1 and llama_ffi.set_row_slots(self.target_ctx.ptr, slots) else 0

    def swap_drafter(self, path: str | os.PathLike, *, check: bool = True) -> None:
        """Replaces the drafter file (e.g. a quantised variant) without reloading the target.

        The new drafter's KV is empty, so the next speculative request re-prefills its prompt.
        """
        path = Path(path)
        cfg = self.config.replace(draft=path)
        pinned = None
        if check:
            pinned = pin(path, "drafter")
            self.report = run_checks(self.preflight, cfg)
        old = self.drafter
        if old is not None:
            old.enable_extraction(self.target_ctx, False)
            old.free()
            self.drafter = None
        self.config = cfg
        self._attach_drafter(path, pinned)
        if cfg.adapters:
            assert self.drafter is not None
            self.drafter.set_adapters(list(cfg.adapters))

    def set_adapters(self, adapters: list[tuple[str | os.PathLike, float]], *, check: bool = True) -> None:
        """Applies LoRA adapters to the drafter (replacing any); the next step uses them."""
        if self.drafter is None:
            raise IncompatiblePairError("LoRA adapters apply to the drafter, and no drafter is loaded")
        resolved = [(Path(p), float(s)) for p, s in adapters]
        cfg = self.config.replace(adapters=tuple(resolved))
        if check and resolved:
            self.report = run_checks(self.preflight, cfg)
        self.drafter.set_adapters(resolved)
        self.config = cfg

    # -- text ---------------------------------------------------------------------------------------
    def tokenize(self, text: str, add_special: bool = True) -> list[int]:
        return self.target.tokenize(text, add_special=add_special, parse_special=True)

    def detokenize(self, tokens: list[int]) -> str:
        return b"".join(self.target.piece(t) for t in tokens).decode("utf-8", "replace")

    def chat_template(self) -> str | None:
        return self.target.chat_template()

    def format_chat(self, messages: list[dict], add_generation_prompt: bool = True) -> str:
        """Renders a conversation with the target's chat template (plain text when it has none).

        The template comes from the model file: it is rendered sandboxed, in its own process, with
        a time and memory bound (chat_template.py); ChatTemplateError says what went wrong."""
        from .chat_template import render_chat

        tmpl = self.chat_template()
        if not tmpl:
            lines = [f"{m['role']}: {m['content']}" for m in messages]
            return "\n".join(lines) + ("\nassistant:" if add_generation_prompt else "")
        v = self.target.vocab
        bos = self.target.token_text(C.llama_vocab_bos(v)) if C.llama_vocab_bos(v) >= 0 else ""
        eos = self.target.token_text(C.llama_vocab_eos(v)) if C.llama_vocab_eos(v) >= 0 else ""
        return render_chat(tmpl, messages, bos_token=bos, eos_token=eos, add_generation_prompt=add_generation_prompt)

    def tokenize_chat(self, messages: list[dict], add_generation_prompt: bool = True) -> list[int]:
        """The conversation rendered with the chat template and tokenized so that only the template
        makes control tokens: a message holding ``<|im_end|><|im_start|>system`` stays text (parsing
        special tokens in the whole rendered prompt let a user forge a turn).

        Messages without control-token text tokenize exactly as ``tokenize(format_chat(...))``."""
        text = self.format_chat(messages, add_generation_prompt)
        contents = [m.get("content") for m in messages]
        if not any(isinstance(c, str) and self._holds_control_text(c) for c in contents):
            return self.tokenize(text)
        # Render again with a marker in place of each message, to find where the template put them;
        # template text is tokenized with special tokens, message text without.
        markers = [f"\ue000{i}\ue001" for i in range(len(messages))]
        marked = self.format_chat(
            [{**m, "content": markers[i]} if isinstance(m.get("content"), str) else m for i, m in enumerate(messages)],
            add_generation_prompt,
        )
        tokens: list[int] = []
        rest, first = marked, True
        for i, m in enumerate(messages):
            if not isinstance(m.get("content"), str):
                continue
            before, found, after = rest.partition(markers[i])
            if not found or markers[i] in after:
                raise ValueError(
                    "a message holds control-token text (such as <|im_end|>) and this chat template "
                    "rewrites message text, so it cannot be kept as text; remove those markers"
                )
            tokens += self.target.tokenize(before, add_special=first, parse_special=True) if before or first else []
            tokens += self.target.tokenize(m["content"], add_special=False, parse_special=False)
            rest, first = after, False
        tokens += self.target.tokenize(rest, add_special=False, parse_special=True) if rest else []
        return tokens

    def _holds_control_text(self, text: str) -> bool:
        return self.target.tokenize(text, add_special=False, parse_special=True) != self.target.tokenize(
            text, add_special=False, parse_special=False
        )

    # -- generation -------------------------------------------------------------------------------
    def generate(
        self,
        prompt: str | list[int],
        settings: GenerationSettings | None = None,
        *,
        on_token: Callable | None = None,
        on_step: Callable | None = None,
        cancel: threading.Event | None = None,
        on_progress: Callable[[str], None] | None = None,
    ) -> GenerationResult:
        """Generates a continuation of ``prompt`` (text or token ids).

        ``on_token(TokenEvent)`` and ``on_step(StepRecord)`` are called from this thread as each
        step commits; ``cancel`` stops the run within one step (finish_reason 'cancelled') and
        leaves the engine ready for the next request. ``on_progress(text)`` hears what runs before
        the first token where that takes a while: auto's first request on a pair and machine
        measures their step costs (calibration), some seconds on a CPU.
        """
        from . import auto_mode

        settings = settings or GenerationSettings()
        tokens = self.tokenize(prompt) if isinstance(prompt, str) else list(prompt)
        runner: Generation
        if settings.mode == "auto":
            # a follow-up: the prompt holds most of what the last request left in the KV (its prompt
            # and answer), as the next turn of a chat does; a new conversation shares only the template
            follow_up = bool(self.kv) and 2 * _common_prefix(self.kv, tokens) >= len(self.kv)
            runner = auto_mode.AutoGeneration(
                self, settings, on_token, on_step, cancel, on_progress=on_progress, follow_up=follow_up
            )
        else:
            runner = Generation(self, settings, on_token, on_step, cancel)
        res = runner.run(tokens)
        auto_mode.after_run(self, settings, res)  # teaches the auto policy; notes the break-even
        return res

    def next_token_logits(self, tokens: list[int]):
        """The target's logits for the token after ``tokens`` (a copy), all of them prefilled as one
        prompt: what a request whose prompt is ``tokens`` picks its first token from."""
        if not tokens:
            raise ValueError("empty prompt")
        self.target_ctx.set_backend_greedy(False)  # raw logits are needed on the host
        self._prefill(list(tokens), need_features=False, out_last=True)
        self.target_ctx.synchronize()
        return self.target_ctx.logits(1)[0].copy()

    def greedy_logits(self, prompt_tokens: list[int], n: int) -> tuple[list[int], np.ndarray]:
        """The target's greedy answer to ``prompt_tokens`` (at most ``n`` tokens, ending at an
        end-of-generation token) and the logits each token was picked from, one token per decode
        over one cache, as autoregressive decoding writes it. Leaves the KV empty."""
        if not prompt_tokens:
            raise ValueError("empty prompt")
        tctx, b = self.target_ctx, self.target_batch
        tctx.set_backend_greedy(False)
        gen: list[int] = []
        rows = []
        try:
            self.reset()
            # the first token from the prompt's prefill, as a request takes it; then one per decode
            self._prefill(list(prompt_tokens), need_features=False, out_last=True)
            tok = -1
            for i in range(n):
                if i:
                    b.clear()
                    b.add_token(tok, len(self.kv), 0, True)
                    tctx.process(b)
                    self.kv.append(tok)
                row = tctx.logits(1)[0].copy()
                tok = int(np.argmax(row))
                rows.append(row)
                gen.append(tok)
                if self.target.is_eog(tok) or len(self.kv) + 1 >= tctx.n_ctx:
                    break
        finally:
            self.reset()
        return gen, np.array(rows)

    def replay_logits(
        self,
        prompt_tokens: list[int],
        generated: list[int],
        rows: int,
        follow: Sequence[int] = (),
        history_rows: int | None = None,
        prompt_split: int = 0,
    ):
        """The target's logits for the token after ``prompt_tokens + generated``, with the generated
        tokens decoded in batches of ``rows`` (1 = as autoregressive decoding wrote them; 8 = as a
        chain-7 verify does), the prompt prefilled as a request does. The last batch ends at the
        end, so the logits come from its last row -- or, with ``follow``, the last batch goes on with
        those tokens (as a verify batch goes on with drafts after the row that is read) and the row
        read is the one of the last generated token. ``history_rows`` (default ``rows``) sets the
        batch size of the earlier batches. ``prompt_split`` > 0 prefills the prompt in two requests,
        split there, as a request that reuses a cached prefix does. Batched and single-row decodes
        round differently, so this tells whether the target itself picks differently by batch shape.
        With no ``generated`` tokens the logits are the prompt's prefill's last row, where a request
        takes its first token (``rows`` and ``follow`` do not apply)."""
        if not prompt_tokens:
            raise ValueError("empty prompt")
        tail = list(generated)
        self.target_ctx.set_backend_greedy(False)
        if 0 < prompt_split < len(prompt_tokens) - 1:
            self._prefill(list(prompt_tokens[:prompt_split]), need_features=False)  # then reused below
        # the prompt as one request; the generated tokens after it in batches as a run decodes them
        self._prefill(list(prompt_tokens), need_features=False, out_last=True)
        if not tail:
            self.target_ctx.synchronize()
            return self.target_ctx.logits(1)[0].copy()
        b = self.target_batch
        hrows = history_rows or rows
        last_n = max(1, rows - len(follow))  # the generated tokens in the last batch
        head, end = tail[:-last_n], tail[-last_n:]
        first = len(head) % hrows or hrows  # a first, shorter batch keeps the others full
        spans = ([head[:first]] if head else []) + [head[i : i + hrows] for i in range(first, len(head), hrows)]
        for span in spans + [end + list(follow)]:
            b.clear()
            pos = len(self.kv)
            for i, tok in enumerate(span):
                b.add_token(tok, pos + i, 0, i == len(end) - 1)
            self.target_ctx.process(b)
            self.kv.extend(span)
        return self.target_ctx.logits(1)[0].copy()

    def replay_verify(self, prompt_tokens: list[int], generated: list[int], batches, every_batch: bool = False):
        """The target's logits for the committed rows of the last of ``batches``, recorded tree
        verify batches (records.VerifyBatch, in run order): each decoded as the run decoded it --
        the same tokens, positions and sequence sets in one batch -- and trimmed to its accepted
        path as the run trimmed it (tree.keep_path), over the prompt prefilled as a request does.
        Tokens of ``generated`` that no batch covers (a chain step's) are decoded one per decode.

        Given one batch, the prefix before it is written as the target alone writes it; given the
        run's batches up to it, the cache is rebuilt as the run left it (the K/V its earlier batches
        wrote, sibling cells dropped): what the target reads there, with no drafter involved, tells
        whether a parting is the target's own pick under that batching. Leaves the KV empty.

        ``every_batch``: a list with the committed rows' logits of every batch instead (the drift
        measurement, engine_bridge.bench.drift, decodes a whole generation this way)."""
        batches = list(batches)
        if not batches:
            raise ValueError("no verify batch to replay")
        tctx, b = self.target_ctx, self.target_batch
        tctx.set_backend_greedy(False)
        fixed_outputs = tree_fixed_outputs()
        toks = list(prompt_tokens) + list(generated)
        seqs = 1
        pending_end = 0
        out: list[np.ndarray] = []
        try:
            self._prefill(list(prompt_tokens), need_features=False, out_last=True)  # as a request prefills it
            for n, vb in enumerate(batches):
                if len(toks) <= vb.pos or toks[vb.pos] != vb.last:
                    raise ValueError(f"batch {n} opens with token {vb.last} at {vb.pos}; the tokens disagree")
                bad = vb.problems()
                if bad:
                    raise ValueError(f"batch {n} is not a well-formed tree: {'; '.join(bad[:3])}")
                if vb.n_seqs > self.tree_max_nodes:
                    raise ValueError(f"a batch uses {vb.n_seqs} sequences; this context has {self.tree_max_nodes}")
                # the last batch's kept nodes off its chain: the run wrote them at the head of this
                # batch (a tree step next), or in a batch of their own (another step came between)
                start, fold = len(self.kv), []
                if pending_end > start:
                    fold = toks[start:pending_end]
                    if pending_end != vb.pos:
                        b.clear()
                        for i, tok in enumerate(fold):
                            b.add_token_seqs(tok, start + i, list(range(seqs)), False)
                        tctx.process(b)
                        self.kv.extend(fold)
                        fold = []
                for tok in toks[len(self.kv) + len(fold) : vb.pos]:  # tokens no recorded batch wrote
                    b.clear()
                    b.add_token_seqs(tok, len(self.kv), list(range(seqs)), True)
                    tctx.process(b)
                    self.kv.append(tok)
                for seq in range(seqs, vb.n_seqs):  # as Generation._add_tree_seqs
                    tctx.seq_cp(0, seq, -1, -1)
                seqs = max(seqs, vb.n_seqs)
                b.clear()
                off = len(fold) if fixed_outputs else 0  # as Generation._tree_step's batch
                for i, tok in enumerate(fold):
                    b.add_token_seqs(tok, start + i, list(range(seqs)), fixed_outputs)
                b.add_token_seqs(vb.last, vb.pos, list(range(seqs)), True)
                for tok, dep, sq in zip(vb.tokens, vb.depth, vb.seqs):
                    b.add_token_seqs(tok, vb.pos + 1 + dep, list(sq), True)
                tctx.process(b)
                tctx.synchronize()
                if every_batch or n == len(batches) - 1:
                    rows = tctx.logits(off + len(vb.tokens) + 1)
                    picked = np.array([rows[off + r] for r in vb.rows])
                    if not every_batch:
                        return picked
                    out.append(picked)
                # as Generation._tree_step: the path's run along the seeded chain stays; the rest
                # of it is written with the next batch
                nodes = [r - 1 for r in vb.rows[1:]]
                on_chain = 0
                while on_chain < len(nodes) and nodes[on_chain] == on_chain:
                    on_chain += 1
                win = vb.seqs[nodes[on_chain - 1]][0] if on_chain else None
                n_leaves = 1 + max((max(sq) for sq in vb.seqs if sq), default=0)
                tree_mod.keep_path(tctx, vb.pos, 1 + on_chain, win, n_leaves, range(seqs))
                self.kv = toks[: vb.pos + 1 + on_chain]  # the root and the kept run: now cached
                pending_end = vb.pos + len(vb.rows) if len(vb.rows) > 1 + on_chain else 0
            return out
        finally:
            self.reset()

    def _set_extraction(self, on: bool) -> None:
        if self.drafter is not None and on != self._extracting:
            self.drafter.enable_extraction(self.target_ctx, on)
            self._extracting = on

    def _prefill(self, tokens: list[int], need_features: bool, out_last: bool = False) -> int:
        """Brings the target KV (and, when needed, the drafter KV) to hold exactly ``tokens``.

        ``out_last``: the last token is decoded (never reused from the cache) with an output, so the
        target's logits for the token after ``tokens`` are row 0 of the last batch: a request's first
        token comes from its prefill, as llama.cpp's server takes it
        (docs/design/first-token-from-prefill.md).

        Returns how many of them were already there (reused from the previous request).
        """
        common = _common_prefix(self.kv, tokens)
        if out_last and common >= len(tokens):
            # cached to its end: the last token is decoded again for its logits, in the chunk that
            # first wrote it where the cache knows it (decoded alone, its K/V round differently from
            # a wide batch's, and a regenerated answer or a bench's next repetition would change)
            common = next((a for a, b in self.prompt_chunks if b == len(tokens)), len(tokens) - 1)
        reuse = min(common, self.dft_valid) if need_features else common
        self._set_extraction(need_features)
        self.target_ctx.seq_rm(0, reuse, -1)
        wide = list(self.wide_batches)
        self._cut_kv(reuse)
        if self.drafter is not None:
            self.drafter.ctx.seq_rm(0, min(reuse, self.dft_valid), -1)
            self.dft_valid = min(reuse, self.dft_valid)
        todo = tokens[reuse:]
        if len(todo) + reuse >= self.target_ctx.n_ctx:
            raise ContextOverflowError(f"{len(tokens)} tokens do not fit a context of {self.target_ctx.n_ctx}")
        if self.config.exact and common > reuse:
            # cached tokens decoded again for the drafter's features (auto's AR steps left it behind):
            # as AR wrote them, then the new ones batched from where AR's prefill starts them
            self._decode_again(tokens[reuse:common], reuse, need_features, wide)
            self._decode_span(tokens[common:], common, need_features, out_last=out_last, record=True)
        else:
            self._decode_span(todo, reuse, need_features, out_last=out_last, record=True)
        self.target_ctx.synchronize()
        return reuse

    def _cut_kv(self, n: int) -> None:
        """Forgets cached tokens from position ``n`` on (the caller removes their K/V). A wide batch
        cut short keeps its first part: those rows were still written by the wide batch."""
        del self.kv[n:]
        self.wide_batches = [(a, min(b, n)) for a, b in self.wide_batches if a < n]
        self.prompt_chunks = [(a, b) for a, b in self.prompt_chunks if b <= n]  # a chunk cut short: not one

    def _decode_again(self, tokens: list[int], pos0: int, features: bool, wide: list[tuple[int, int]]) -> None:
        """Decodes cached ``tokens`` again at pos0.. in the batches that first wrote them, as far as
        an exact engine can tell: each of ``wide`` (the wide batches before the cut) as one batch,
        everything else (AR's single rows, verify batches) at most EXACT_ROWS rows a batch, whose
        rows round as a one-row decode does. Asynchronous, as _decode_span."""
        end = pos0 + len(tokens)
        p = pos0
        for a, b in sorted(wide):
            if b <= p or a >= end:
                continue
            if a > p:
                self._decode_span(tokens[p - pos0 : a - pos0], p, features, rows=EXACT_ROWS)
                p = a
            hi = min(b, end)
            self._decode_span(tokens[p - pos0 : hi - pos0], p, features, rows=hi - p)
            p = hi
        if p < end:
            self._decode_span(tokens[p - pos0 :], p, features, rows=EXACT_ROWS)

    def _decode_span(
        self,
        tokens: list[int],
        pos0: int,
        features: bool,
        rows: int = 0,
        out_last: bool = False,
        record: bool = False,
    ) -> None:
        """Decodes ``tokens`` into the target at pos0.. in n_batch chunks (``rows`` > 0: at most that
        many a chunk; no outputs, but the last token's with ``out_last``) and appends them to ``kv``;
        with ``features`` (extraction must be on) each chunk's features go into the drafter at the
        same positions. Asynchronous: the caller synchronises."""
        b = self.target_batch
        step = min(rows, self.target_ctx.n_batch) if rows > 0 else self.target_ctx.n_batch
        n = len(tokens)
        for off in range(0, n, step):
            chunk = tokens[off : off + step]
            p = pos0 + off
            b.clear()
            b.add_tokens(chunk, p, 0, [out_last and off + i == n - 1 for i in range(len(chunk))])
            self.target_ctx.process(b)
            if features:
                assert self.drafter is not None  # features are extracted for a drafter only
                self.drafter.inject(self.target_ctx, 0, len(chunk), p)
            if len(chunk) > EXACT_ROWS:
                self.wide_batches.append((p, p + len(chunk)))
            if record:  # (a prompt's chunk: _prefill)
                self.prompt_chunks.append((p, p + len(chunk)))
            self.kv.extend(chunk)
            if features:
                self.dft_valid = len(self.kv)

    def catch_up_drafter(self) -> int:
        """Gives the drafter the target features of every committed token it lacks (positions
        ``dft_valid .. len(kv)-1``, decoded by the target with extraction off), and turns
        extraction on. Those tokens' target K/V is removed and decoded again in one batch with
        extraction on (an exact engine: batches of at most EXACT_ROWS, whose rows round as AR's
        one-row decodes did): the same tokens at the same positions, so the cache holds what a
        chain step's verify batch would have written for them. Returns how many tokens were
        decoded again; 0 when nothing was missing.

        Raises RuntimeError when the target cannot drop that span (a recurrent or hybrid state
        cannot be rolled back by an arbitrary number of tokens): the caller must then keep
        extraction on while it decodes (auto mode does, for such targets)."""
        if self.drafter is None:
            return 0
        self._set_extraction(True)
        lo = self.dft_valid
        span = self.kv[lo:]
        if not span:
            return 0
        if not self.target_ctx.seq_rm(0, lo, -1):
            raise RuntimeError(f"the target cannot remove positions {lo}.. to re-decode them")
        self.drafter.ctx.seq_rm(0, lo, -1)
        wide = list(self.wide_batches)
        self._cut_kv(lo)
        if self.config.exact:
            self._decode_again(span, lo, True, wide)
        else:
            self._decode_span(span, lo, True)
        self.target_ctx.synchronize()
        self.drafter.ctx.synchronize()  # the drafter's decodes belong to the catch-up's time
        return len(span)

    def snapshot_target(self, drafter: bool = False) -> "TargetSnapshot":
        """The target's cache as it stands between requests: its tokens and its K/V bytes. On CPU the
        target's own greedy output depends on how its cached prefix was written (batch shapes round
        differently), so a check of a run against "the target alone" must start from this state.
        ``drafter``: the drafter's cache too, so that putting it back costs no catch-up."""
        keep_dft = drafter and self.drafter is not None and self.dft_valid > 0
        return TargetSnapshot(
            tokens=list(self.kv),
            state=self.target_ctx.seq_state(0),
            wide_batches=tuple(self.wide_batches),
            drafter_state=self.drafter.ctx.seq_state(0) if keep_dft and self.drafter is not None else None,
            dft_valid=self.dft_valid if keep_dft else 0,
        )

    def restore_target(self, snap: "TargetSnapshot", keep: int | None = None) -> None:
        """Puts a ``snapshot_target`` back, keeping its first ``keep`` tokens (default: all), byte for
        byte. The drafter's cache is put back with it where the snapshot holds it; otherwise it is
        emptied (it catches up on the next drafted request)."""
        self.reset()  # an empty cache first: a state llama.cpp refuses leaves it empty, not stale
        self.target_ctx.set_seq_state(0, snap.state)
        keep = len(snap.tokens) if keep is None else min(keep, len(snap.tokens))
        self.target_ctx.seq_rm(0, keep, -1)
        self.kv = list(snap.tokens[:keep])
        self.wide_batches = [(a, min(b, keep)) for a, b in snap.wide_batches if a < keep]
        self.prompt_chunks = []  # (not in a snapshot: a wholly cached prompt's last token is decoded alone)
        if snap.drafter_state is not None and self.drafter is not None:
            self.drafter.ctx.set_seq_state(0, snap.drafter_state)
            self.dft_valid = min(snap.dft_valid, keep)
            self.drafter.ctx.seq_rm(0, self.dft_valid, -1)

    def reset(self) -> None:
        """Forgets every cached token (both caches)."""
        self.target_ctx.clear()
        if self.drafter is not None:
            self.drafter.ctx.clear()
        self.kv = []
        self.wide_batches = []
        self.prompt_chunks = []
        self.dft_valid = 0

    # -- facts --------------------------------------------------------------------------------------
    @property
    def has_drafter(self) -> bool:
        return self.drafter is not None

    def memory(self) -> dict:
        """Bytes: model weights, context state (KV + outputs), and the process's resident set."""
        out = {"target_weights": self.target.size_bytes, "target_context": self.target_ctx.state_size()}
        if self.drafter is not None:
            out["draft_weights"] = self.drafter.model.size_bytes
            out["draft_context"] = self.drafter.ctx.state_size()
        out["process_rss"] = _rss_bytes()
        return out

    def llama_messages(self) -> list[str]:
        """llama.cpp's warnings and errors since the last call ("llama.cpp warning: ..."), for the
        user: its log itself stays quiet unless DFLASH_LLAMA_LOG is set (engine_bridge.runtime.llama_log)."""
        return llama_log.drain()

    def describe(self) -> dict:
        d = {
            "target": str(self.config.target),
            "target_params": self.target.n_params,
            "n_ctx": self.target_ctx.n_ctx,
            "n_vocab": self.target.n_vocab,
            "target_kv": str(self.config.target_kv),
            "flash_attn": self.config.flash_attn,
            "exact": self.config.exact,
        }
        from . import llama_ffi

        d["target_devices"] = llama_ffi.model_devices(self.target.ptr)
        if self.config.rpc_servers:
            from . import rpc

            d["rpc_devices"] = [rpc.describe_device(dev) for dev in rpc.devices(self.config.rpc_servers)]
        if self.drafter is not None:
            dr = self.drafter
            d.update(
                draft=str(dr.path),
                draft_params=dr.model.n_params,
                block_size=dr.block_size,
                max_draft=dr.max_draft,
                target_layers=dr.target_layers,
                mask_token=dr.mask_token,
                draft_window=dr.window,
                dspark=dr.is_dspark,
                draft_kv=str(self.config.draft_kv),
                adapters=[(str(a.path), s) for a, s in dr.adapters],
                draft_devices=llama_ffi.model_devices(dr.model.ptr),
            )
        return d

    def close(self) -> None:
        if self.drafter is not None:
            self.drafter.free()
            self.drafter = None
        self.target_batch.free()
        self.target_ctx.free()
        self.target.free()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _tree_support(model: Model) -> tuple[bool, str]:
    """Recurrent and hybrid targets keep one state per sequence, so branches cannot share a prefix."""
    if C.llama_model_is_recurrent(model.ptr):
        return False, "the target is recurrent: one state per sequence"
    if C.llama_model_is_hybrid(model.ptr):
        return False, "the target is hybrid (recurrent layers): one state per sequence"
    return True, ""


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 0
