"""Typed handles over the FFI: a model, a context, an extended batch, a sampler.

Each owns one llama.cpp object and frees it exactly once. They hold no speculative logic; the
loop in ``speculative.py`` composes them. Logits are read through zero-copy numpy views.
"""

from __future__ import annotations

import ctypes
import functools
import os
from pathlib import Path
from typing import Any

import numpy as np

from .config import FLASH_ATTN, KV_TYPES, KVTypes
from ..common.placement import MAX_DEVICES, SPLIT_MODES, Placement
from ..common.errors import ContextOverflowError, DecodeError, ModelLoadError
from . import llama_log
from . import llama_ffi
from .llama_ffi import C

# llama.cpp's log is quiet unless DFLASH_LLAMA_LOG is set; its warnings are kept for our messages
llama_log.install()

_backend_ready = False


def ensure_backend() -> None:
    global _backend_ready
    if not _backend_ready:
        C.llama_backend_init()
        _backend_ready = True


class _Handle:
    """Owns one llama.cpp object: ``free()`` releases it exactly once (``__del__`` is a safety net;
    owners call ``free()`` explicitly, in dependency order)."""

    ptr: Any = None  # a ctypes pointer from llama.cpp, falsy once freed

    def _release(self, ptr) -> None:
        raise NotImplementedError

    def free(self) -> None:
        if self.ptr:
            ptr, self.ptr = self.ptr, None
            self._release(ptr)

    def __del__(self):
        try:
            self.free()
        except Exception:
            pass


def apply_placement(params, placement: Placement):
    """Writes a Placement into llama_model_params; returns the tensor-split array, which must stay
    alive until the model is loaded (llama.cpp copies it then)."""
    params.split_mode = SPLIT_MODES[placement.split_mode]
    params.main_gpu = placement.main_gpu
    if not placement.tensor_split:
        params.tensor_split = None
        return None
    arr = (ctypes.c_float * max(MAX_DEVICES, len(placement.tensor_split)))(*placement.tensor_split)
    params.tensor_split = ctypes.cast(arr, ctypes.POINTER(ctypes.c_float))
    return arr


class Model(_Handle):
    """A loaded GGUF model (weights only; no KV)."""

    def __init__(
        self,
        path: str | os.PathLike,
        n_gpu_layers: int = -1,
        placement: Placement | None = None,
        devices: list[int] | None = None,
    ):
        """``devices``: ggml device handles to spread the layers over, in order (None: llama.cpp's
        default list). With RPC servers registered the list must be explicit: llama.cpp's default
        would put every layer on the remote devices first."""
        ensure_backend()
        self.path = Path(path)
        if not self.path.is_file():
            raise ModelLoadError(f"{self.path}: no such file")
        params = C.llama_model_default_params()
        params.n_gpu_layers = n_gpu_layers if n_gpu_layers >= 0 else 999
        split = apply_placement(params, placement or Placement())  # noqa: F841 - alive until the load returns
        devs = None
        if devices is not None:
            # NULL-terminated; read only while loading (llama.cpp copies the list into the model)
            devs = (ctypes.c_void_p * (len(devices) + 1))(*devices, None)
            params.devices = ctypes.cast(devs, ctypes.c_void_p).value
        ptr = C.llama_model_load_from_file(str(self.path).encode(), params)
        if not ptr:
            said = [line for line in llama_log.drain() if " error: " in line]  # the first say why
            why = ("; " + "; ".join(said[:2])) if said else " (see its log with DFLASH_LLAMA_LOG=1)"
            raise ModelLoadError(f"llama.cpp could not load {self.path.name}{why}")
        self.ptr = ptr
        self.vocab = C.llama_model_get_vocab(ptr)
        self.n_vocab = int(C.llama_vocab_n_tokens(self.vocab))
        self.n_embd = int(C.llama_model_n_embd(ptr))
        self.n_layer = int(C.llama_model_n_layer(ptr))
        self.size_bytes = int(C.llama_model_size(ptr))
        self.n_params = int(C.llama_model_n_params(ptr))
        # token -> its text bytes (special tokens rendered as text): a vocabulary's pieces never change,
        # and a streamed token's piece is read on every commit, inside the step's host time
        self._pieces: dict[int, bytes] = {}

    def meta(self, key: str) -> str | None:
        buf = ctypes.create_string_buffer(4096)
        n = C.llama_model_meta_val_str(self.ptr, key.encode(), buf, len(buf))
        return buf.value.decode("utf-8", "replace") if n >= 0 else None

    def chat_template(self) -> str | None:
        tmpl = C.llama_model_chat_template(self.ptr, None)
        return tmpl.decode("utf-8", "replace") if tmpl else None

    def token_text(self, token: int) -> str:
        t = C.llama_vocab_get_text(self.vocab, token)
        return t.decode("utf-8", "replace") if t else ""

    def is_eog(self, token: int) -> bool:
        return bool(C.llama_vocab_is_eog(self.vocab, token))

    @functools.cached_property
    def eog_ids(self) -> np.ndarray:
        """Every end-of-generation token of the vocabulary (one pass over it, kept)."""
        return np.array([t for t in range(self.n_vocab) if self.is_eog(t)], dtype=np.int64)

    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = True) -> list[int]:
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError as exc:  # a lone surrogate (JSON "\\ud800" in a served request, ...)
            raise ValueError(
                f"the text holds a character that is not valid Unicode (a lone surrogate at "
                f"character {exc.start}); it cannot be tokenized"
            ) from None
        cap = len(data) + 16
        buf = (C.llama_token * cap)()
        n = C.llama_tokenize(self.vocab, data, len(data), buf, cap, add_special, parse_special)
        if n < 0:  # buffer too small: -n is the size needed
            cap = -n
            buf = (C.llama_token * cap)()
            n = C.llama_tokenize(self.vocab, data, len(data), buf, cap, add_special, parse_special)
        return list(buf[:n])

    def text_piece(self, token: int) -> bytes:
        """``piece(token)``, kept after the first read (what the streaming detokenizer reads)."""
        got = self._pieces.get(token)
        if got is None:
            got = self._pieces[token] = self.piece(token)
        return got

    def piece(self, token: int, special: bool = False) -> bytes:
        buf = ctypes.create_string_buffer(64)
        n = C.llama_token_to_piece(self.vocab, token, buf, len(buf), 0, special)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = C.llama_token_to_piece(self.vocab, token, buf, len(buf), 0, special)
        return buf.raw[:n]

    def _release(self, ptr) -> None:
        C.llama_model_free(ptr)


class Context(_Handle):
    """A llama.cpp context: KV cache, compute buffers, outputs."""

    _backend_spec = None  # (kind, k, n_seqs) of the backend samplers attached, if any
    _backend_chains: dict = {}

    def __init__(
        self,
        model: Model,
        *,
        n_ctx: int,
        n_batch: int,
        n_ubatch: int,
        kv: KVTypes,
        flash_attn: str = "auto",
        n_threads: int | None = None,
        n_seq_max: int = 1,
        kv_unified: bool = False,
        other: "Context | None" = None,
        outputs_per_seq: int = 64,
    ):
        params = C.llama_context_default_params()
        params.n_ctx = n_ctx
        params.n_batch = n_batch
        params.n_ubatch = min(n_ubatch, n_batch)
        params.n_seq_max = n_seq_max
        # Backend samplers handle at most this many outputs of one sequence per decode: enough for
        # a verified draft block (llama.cpp's default is 1, i.e. one token at a time).
        params.n_outputs_max_per_seq = min(outputs_per_seq, n_batch)
        threads = n_threads or os.cpu_count() or 1
        params.n_threads = threads
        params.n_threads_batch = threads
        params.flash_attn_type = FLASH_ATTN[flash_attn]
        params.type_k = KV_TYPES[kv.k]
        params.type_v = KV_TYPES[kv.v]
        params.kv_unified = kv_unified
        params.no_perf = True
        if other is not None:
            params.ctx_other = other.ptr
        ptr = C.llama_init_from_model(model.ptr, params)
        if not ptr:
            raise ModelLoadError(
                f"llama.cpp could not create a context for {model.path.name} "
                f"(n_ctx={n_ctx}, KV {kv}, flash attention {flash_attn})"
            )
        self.ptr = ptr
        self.model = model
        self.mem = C.llama_get_memory(ptr)
        self.n_ctx = int(C.llama_n_ctx(ptr))
        self.n_batch = int(C.llama_n_batch(ptr))
        self.n_ubatch = int(C.llama_n_ubatch(ptr))
        self.n_vocab = model.n_vocab
        self._sampled_buf = (ctypes.c_int32 * 64)()  # sampled_tokens' output, grown on demand
        # greedy_run's picks, their times and its return code (patch 0028), grown on demand
        self._run_tokens = (ctypes.c_int32 * 64)()
        self._run_ns = (ctypes.c_int64 * 64)()
        self._run_rc = ctypes.c_int32(0)

    # -- backend sampling ---------------------------------------------------------------------------
    @property
    def backend_greedy(self) -> bool:
        return self._backend_spec is not None and self._backend_spec[0] == "greedy"

    @property
    def backend_top_k(self) -> int:
        """k of the attached backend top-k samplers (0: none)."""
        return self._backend_spec[1] if self._backend_spec and self._backend_spec[0] == "top_k" else 0

    def set_backend_greedy(self, on: bool, n_seqs: int = 1) -> bool:
        """Attaches (or removes) a greedy sampler that runs inside the graph, for sequences 0..n_seqs-1.

        With it, llama.cpp computes the argmax on the device and does not copy the raw logits of
        those sequences' outputs to the host (on a GPU: n_outputs x n_vocab floats per decode).
        llama.cpp picks an output's sampler by the entry's first sequence id, so tree verification
        (entries in many sequences) attaches one per leaf sequence. Returns whether it is attached.
        """
        return self._set_backend(("greedy", 0, n_seqs) if on else None)

    def set_backend_top_k(self, k: int) -> bool:
        """Attaches (k > 0) or removes a top-k sampler for sequence 0: each output then returns its
        k best candidates and their raw logits (``sampled_top_k``) and no full-vocabulary row."""
        return self._set_backend(("top_k", k, 1) if k > 0 else None)

    def _set_backend(self, spec) -> bool:
        if spec == self._backend_spec:
            return spec is not None
        for seq, chain in self._backend_chains.items():
            C.llama_set_sampler(self.ptr, seq, None)
            C.llama_sampler_free(chain)
        self._backend_chains, self._backend_spec = {}, None
        if spec is None:
            return False
        kind, k, n_seqs = spec
        chains: dict = {}
        for seq in range(n_seqs):
            # a chain can be initialised for the backend only once, so each attach builds a new one
            chain = C.llama_sampler_chain_init(C.llama_sampler_chain_default_params())
            C.llama_sampler_chain_add(
                chain, C.llama_sampler_init_greedy() if kind == "greedy" else C.llama_sampler_init_top_k(k)
            )
            if not C.llama_set_sampler(self.ptr, seq, chain):
                C.llama_sampler_free(chain)
                self._backend_chains = chains
                self._backend_spec = spec
                self._set_backend(None)  # all or nothing
                return False
            chains[seq] = chain
        self._backend_chains, self._backend_spec = chains, spec
        return True

    def graph_reuses(self) -> int:
        """How many decodes of this context so far kept llama.cpp's previous compute graph (no
        rebuild, no re-allocation; llama_perf_context's n_reused, counted since the context began)."""
        return int(C.llama_perf_context(self.ptr).n_reused)

    def sampled_token(self, i: int) -> int:
        """The backend sampler's token for batch entry ``i`` of the last decode (synchronises)."""
        return int(C.llama_get_sampled_token_ith(self.ptr, i))

    def sampled_tokens(self, first: int, n: int) -> np.ndarray:
        """The backend sampler's tokens of batch entries first .. first + n - 1 (int64; synchronises):
        sampled_token for each, in one FFI call with patch 0023."""
        api = llama_ffi.bulk_batch_api()
        if api is None:
            return np.fromiter((self.sampled_token(first + i) for i in range(n)), np.int64, n)
        if n > len(self._sampled_buf):
            self._sampled_buf = (ctypes.c_int32 * n)()
        api[1](self.ptr, first, n, self._sampled_buf)
        return np.array(self._sampled_buf[:n], dtype=np.int64)

    def sampled_top_k(self, first: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Backend top-k results of entries first..first+n-1: (token ids, raw logits), each (n, k),
        in llama.cpp's order (not sorted). Synchronises.

        llama.cpp keeps each output's candidates in a row of n_vocab slots, rows in output order;
        the rows are read as one strided view when they are laid out so, else row by row.
        """
        k = self.backend_top_k
        get_ids, get_logits = C.llama_get_sampled_candidates_ith, C.llama_get_sampled_logits_ith
        ids0, lg0 = get_ids(self.ptr, first), get_logits(self.ptr, first)
        if not lg0 or int(C.llama_get_sampled_candidates_count_ith(self.ptr, first)) < k:
            raise DecodeError("the backend top-k sampler returned no candidates")
        stride = self.n_vocab
        if n == 1 or (
            ctypes.addressof(get_ids(self.ptr, first + n - 1).contents)
            == ctypes.addressof(ids0.contents) + 4 * stride * (n - 1)
            and ctypes.addressof(get_logits(self.ptr, first + n - 1).contents)
            == ctypes.addressof(lg0.contents) + 4 * stride * (n - 1)
        ):
            ids = np.ctypeslib.as_array(ids0, shape=(n, stride))[:, :k]
            lg = np.ctypeslib.as_array(lg0, shape=(n, stride))[:, :k]
            return ids, lg
        ids = np.empty((n, k), np.int32)
        lg = np.empty((n, k), np.float32)
        for i in range(n):
            ids[i] = np.ctypeslib.as_array(get_ids(self.ptr, first + i), shape=(k,))
            lg[i] = np.ctypeslib.as_array(get_logits(self.ptr, first + i), shape=(k,))
        return ids, lg

    # -- decoding ---------------------------------------------------------------------------
    def process(self, batch: "Batch") -> None:
        """Decodes a batch. llama_process may return before a GPU finishes: see synchronize()."""
        self.check_decode(C.llama_process(self.ptr, C.LLAMA_PROCESS_TYPE_DECODE, batch.ptr))

    def check_decode(self, rc: int) -> None:
        """Raises what a decode's return code means (0: nothing; from ``greedy_run`` also -1: the
        backend sampler gave no token)."""
        if rc == 1:
            raise ContextOverflowError(
                f"no room left in the KV cache of {self.model.path.name} (context size {self.n_ctx})"
            )
        if rc == -1:
            raise DecodeError(f"the backend sampler gave no token after a decode on {self.model.path.name}")
        if rc != 0:
            raise DecodeError(f"llama_process failed with code {rc} on {self.model.path.name}")

    def greedy_run(
        self, batch: "Batch", token: int, pos: int, n_max: int, stop_at_eog: bool
    ) -> tuple[list[int], list[int], int]:
        """Up to ``n_max`` one-token decodes of sequence 0 in one call (patch 0028; the build must
        export it: ``llama_ffi.greedy_run_api``): ``token`` at ``pos``, then each backend greedy pick
        at the next position, stopping after an end-of-generation pick with ``stop_at_eog``.

        Returns (picks, ns, rc): decode i's pick and the nanoseconds from the call's start until it
        was read, for the decodes that gave one (their inputs are in the cache), and 0 or the code of
        the decode that failed (llama_process's, or -1: no sampled token). ``batch`` is refilled."""
        fn = llama_ffi.greedy_run_api()
        if fn is None:
            raise RuntimeError("this engine lacks patch 0028 (llama_decode_greedy_run)")
        if n_max > len(self._run_tokens):
            self._run_tokens = (ctypes.c_int32 * n_max)()
            self._run_ns = (ctypes.c_int64 * n_max)()
        rc = self._run_rc
        n = fn(self.ptr, batch.ptr, 0, token, pos, n_max, stop_at_eog, self._run_tokens, self._run_ns, ctypes.byref(rc))
        batch.n = 0
        return self._run_tokens[:n], self._run_ns[:n], int(rc.value)

    def synchronize(self) -> None:
        """A synchronisation point: returns once the device has finished all queued work."""
        C.llama_synchronize(self.ptr)

    def logits(self, n_rows: int) -> np.ndarray:
        """The first ``n_rows`` output rows of the last decode, as a zero-copy (n_rows, n_vocab) view."""
        ptr = C.llama_get_logits(self.ptr)
        return np.ctypeslib.as_array(ptr, shape=(n_rows, self.n_vocab))

    def set_causal(self, causal: bool) -> None:
        C.llama_set_causal_attn(self.ptr, causal)

    # -- KV cache -----------------------------------------------------------------------------
    def seq_rm(self, seq: int, p0: int, p1: int = -1) -> bool:
        return bool(C.llama_memory_seq_rm(self.mem, seq, p0, p1))

    def seq_cp(self, src: int, dst: int, p0: int = -1, p1: int = -1) -> None:
        C.llama_memory_seq_cp(self.mem, src, dst, p0, p1)

    def seq_pos_min(self, seq: int) -> int:
        """The smallest position ``seq`` holds in the KV cache, -1 when it holds none."""
        return int(C.llama_memory_seq_pos_min(self.mem, seq))

    def seq_pos_max(self, seq: int) -> int:
        """The largest position ``seq`` holds in the KV cache, -1 when it holds none."""
        return int(C.llama_memory_seq_pos_max(self.mem, seq))

    def seq_keep(self, seq: int) -> None:
        C.llama_memory_seq_keep(self.mem, seq)

    def clear(self) -> None:
        C.llama_memory_clear(self.mem, True)

    def state_size(self) -> int:
        return int(C.llama_state_get_size(self.ptr))

    def seq_state(self, seq: int) -> bytes:
        """One sequence's cache contents (cells, positions, K/V bytes) as llama.cpp serialises them."""
        n = int(C.llama_state_seq_get_size(self.ptr, seq))
        buf = (ctypes.c_uint8 * n)()
        got = int(C.llama_state_seq_get_data(self.ptr, buf, n, seq))
        return bytes(memoryview(buf)[:got])

    def set_seq_state(self, seq: int, data: bytes) -> None:
        """Writes ``seq_state``'s bytes back into ``seq`` (which should be empty)."""
        buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        if not C.llama_state_seq_set_data(self.ptr, buf, len(data), seq):
            raise DecodeError(f"llama.cpp refused a saved state of {len(data)} bytes for sequence {seq}")

    def free(self) -> None:
        if self.ptr:
            self._set_backend(None)  # samplers must outlive their use by the context
        super().free()

    def _release(self, ptr) -> None:
        C.llama_free(ptr)


class Batch(_Handle):
    """An extended batch (``llama_batch_ext``): tokens or embedding rows, positions, outputs.

    Embedding rows are copied by llama.cpp when added, so callers may reuse their buffers.
    """

    def __init__(self, ctx: Context):
        self.ptr = C.llama_batch_ext_init(ctx.ptr)
        if not self.ptr:
            raise ModelLoadError("llama_batch_ext_init failed")
        self._pos = (C.llama_pos * 4)()
        self._embd = C.llama_embd()
        self._embd.n_rows = 1
        # the struct's data pointer as a plain integer field: setting it from an address is a store,
        # where row.ctypes.data_as built a ctypes pointer object per row (docs/benchmarks.md, "The
        # inject's host time": with the copy below, 21 -> 17 us for a 2-row inject)
        offset = vars(C.llama_embd)["data"].offset  # (the field's descriptor; 0: the struct's first field)
        self._embd_data = ctypes.c_size_t.from_buffer(self._embd, offset)
        self.n = 0
        # add_tokens' arguments, kept between calls (a step's blocks are 1-16 rows; grown on demand)
        self._tok_buf = (ctypes.c_int32 * 64)()
        self._out_buf = (ctypes.c_int8 * 64)()

    def clear(self) -> None:
        C.llama_batch_ext_clear(self.ptr)
        self.n = 0

    def _place(self, idx: int, pos: int, output: bool) -> int:
        if idx < 0:
            raise DecodeError(f"batch is full or the entry is invalid (code {idx})")
        p = self._pos
        p[0] = p[1] = p[2] = pos
        p[3] = 0
        C.llama_batch_ext_set_pos(self.ptr, idx, p)
        if output:
            C.llama_batch_ext_set_output_logits(self.ptr, idx, True)
        self.n += 1
        return idx

    def add_token(self, token: int, pos: int, seq: int = 0, output: bool = False) -> int:
        return self._place(C.llama_batch_ext_add_token(self.ptr, seq, token), pos, output)

    def add_tokens(self, tokens, pos0: int, seq: int = 0, outputs=None) -> int:
        """Entries for ``tokens`` at positions pos0, pos0 + 1, ... of one sequence, an output where
        ``outputs[i]`` is true (None: no outputs): add_token for each, in one FFI call with patch
        0023 (``llama_ffi.bulk_batch_api``). Returns the batch index of the first entry."""
        n = len(tokens)
        api = llama_ffi.bulk_batch_api()
        if api is None or n == 0:
            first = -1
            for i in range(n):
                idx = self.add_token(int(tokens[i]), pos0 + i, seq, bool(outputs[i]) if outputs is not None else False)
                first = idx if i == 0 else first
            return first
        if n > len(self._tok_buf):
            self._tok_buf = (ctypes.c_int32 * n)()
            self._out_buf = (ctypes.c_int8 * n)()
        self._tok_buf[:n] = [int(t) for t in tokens]
        if outputs is not None:
            self._out_buf[:n] = [1 if o else 0 for o in outputs]
        first = api[0](self.ptr, seq, self._tok_buf, n, pos0, self._out_buf if outputs is not None else None)
        if first < 0:
            raise DecodeError(f"batch is full or an entry is invalid (code {first})")
        self.n += n
        return first

    def add_token_seqs(self, token: int, pos: int, seqs, output: bool = False) -> int:
        """One entry that belongs to several sequences (tree verification)."""
        seqs = list(seqs)
        if not seqs:
            raise DecodeError("a batch entry needs at least one sequence")
        idx = C.llama_batch_ext_add_token(self.ptr, seqs[0], token)
        if idx < 0:
            raise DecodeError(f"batch is full (code {idx})")
        for s in seqs[1:]:
            if not C.llama_batch_ext_add_seq(self.ptr, idx, s):
                raise DecodeError(f"could not add sequence {s} to a batch entry")
        return self._place(idx, pos, output)

    def add_token_sets(self, tokens, positions, seq_sets, outputs) -> int:
        """Entries ``tokens[i]`` at ``positions[i]`` in the sequences ``seq_sets[i]`` (tree
        verification), an output where ``outputs[i]``: add_token_seqs for each, in one FFI call with
        patch 0026 (``llama_ffi.token_sets_api``). Returns the batch index of the first entry."""
        n = len(tokens)
        fn = llama_ffi.token_sets_api()
        if fn is None or n == 0:
            first = -1
            for i in range(n):
                idx = self.add_token_seqs(int(tokens[i]), int(positions[i]), seq_sets[i], bool(outputs[i]))
                first = idx if i == 0 else first
            return first
        counts = [len(s) for s in seq_sets]
        if min(counts) < 1:
            raise DecodeError("a batch entry needs at least one sequence")
        # ctypes takes Python and numpy integers as they are (no int() a value: this runs every tree step)
        i32 = ctypes.c_int32
        flat = [q for s in seq_sets for q in s]
        first = fn(
            self.ptr,
            (i32 * n)(*tokens),
            (i32 * n)(*positions),
            (i32 * n)(*counts),
            (i32 * len(flat))(*flat),
            n,
            (ctypes.c_int8 * n)(*map(bool, outputs)),
        )
        if first < 0:
            raise DecodeError(f"batch is full or an entry is invalid (code {first})")
        self.n += n
        return first

    def add_embd_at(self, addr: int, n_embd: int, pos: int, seq: int = 0) -> int:
        """One token given by the embedding row of ``n_embd`` float32 values at address ``addr``
        (copied by llama.cpp here: the caller's buffer may change afterwards)."""
        e = self._embd
        self._embd_data.value = addr
        e.n_embd = n_embd
        return self._place(C.llama_batch_ext_add_embd(self.ptr, seq, e), pos, False)

    def _release(self, ptr) -> None:
        C.llama_batch_ext_free(ptr)


class Sampler(_Handle):
    """The target's sampler: it decides every committed token, in AR and speculative modes alike.

    Greedy decoding does not use it (the loop takes a vectorised argmax over the logits block);
    temperature sampling runs llama.cpp's chain top-k -> top-p -> temperature -> dist(seed), which
    draws once per committed token in both modes, so a fixed seed gives the same text.
    """

    def __init__(self, temperature: float, top_k: int, top_p: float, seed: int):
        chain = C.llama_sampler_chain_init(C.llama_sampler_chain_default_params())
        if top_k > 0:
            C.llama_sampler_chain_add(chain, C.llama_sampler_init_top_k(top_k))
        if top_p < 1.0:
            C.llama_sampler_chain_add(chain, C.llama_sampler_init_top_p(top_p, 1))
        C.llama_sampler_chain_add(chain, C.llama_sampler_init_temp(temperature))
        C.llama_sampler_chain_add(chain, C.llama_sampler_init_dist(seed & 0xFFFFFFFF))
        self.ptr = chain

    def sample(self, ctx: Context, idx: int) -> int:
        """Samples output row ``idx`` of the last decode and records the token as accepted."""
        return int(C.llama_sampler_sample(self.ptr, ctx.ptr, idx))

    def _release(self, ptr) -> None:
        C.llama_sampler_free(ptr)


class LoraAdapter(_Handle):
    def __init__(self, model: Model, path: str | os.PathLike):
        self.path = Path(path)
        ptr = C.llama_adapter_lora_init(model.ptr, str(self.path).encode())
        if not ptr:
            raise ModelLoadError(f"llama.cpp could not load the LoRA adapter {self.path.name} for {model.path.name}")
        self.ptr = ptr

    def _release(self, ptr) -> None:
        C.llama_adapter_lora_free(ptr)


def set_adapters(ctx: Context, adapters: list[tuple[LoraAdapter, float]]) -> None:
    """Replaces the context's whole adapter list (an empty list removes them all)."""
    n = len(adapters)
    arr = (C.llama_adapter_lora_p_ctypes * max(n, 1))(*[a.ptr for a, _ in adapters])
    scales = (ctypes.c_float * max(n, 1))(*[s for _, s in adapters])
    rc = C.llama_set_adapters_lora(ctx.ptr, arr if n else None, n, scales if n else None)
    if rc != 0:
        raise ModelLoadError(f"llama_set_adapters_lora failed with code {rc}")
