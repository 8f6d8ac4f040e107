"""The thin FFI: llama-cpp-python's ctypes bindings plus the llama-ext symbols it lacks.

``C`` is ``llama_cpp.llama_cpp`` (the C API, already bound). The DFlash functions live in
``src/llama-ext.h`` with C++ linkage, so they are exported under mangled names; they are bound
here by name, the way llama-cpp-python's own ``llama_cpp_ext.py`` binds the nextn functions.
Nothing above this module touches ctypes symbol lookup.
"""

from __future__ import annotations

import ctypes
import functools
import json
from pathlib import Path
from typing import Any, Iterable


class EngineUnavailableError(ImportError):
    """llama-cpp-python is missing or was built without the symbols DFlash needs."""


def _preload_libstdcxx() -> None:
    """Makes the system libstdc++ the first provider of C++ runtime symbols (Linux).

    Some toolchains (seen: the GPU machines' /opt/gcc 13.3) link libstdc++ statically into every
    llama.cpp library, each exporting its own partial copy. An executable unifies them, but
    Python loads libllama with RTLD_LOCAL, so a call can land in one copy and its data in
    another: llama_model_load_from_file crashed in std::ostream there. With the shared
    libstdc++ loaded globally first, every library binds to that one copy. Harmless where the
    libraries link libstdc++ dynamically (the usual case): it is the same library.
    """
    import sys

    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL("libstdc++.so.6", mode=ctypes.RTLD_GLOBAL)
    except OSError:
        pass


_preload_libstdcxx()

try:
    from llama_cpp import llama_cpp as C  # noqa: N812  (the C API, by convention upper-case)
except Exception as exc:  # pragma: no cover - depends on the machine
    raise EngineUnavailableError(
        "llama-cpp-python is not installed or failed to load; run `make setup` "
        f"(packaging/build_engine.sh builds it from source). Cause: {exc}"
    ) from exc

_lib = C._lib


def _bind(names: Iterable[str], argtypes: list[Any], restype: Any):
    """Binds the first exported name of ``names`` (plain, Itanium-mangled, MSVC-mangled)."""

    def decorator(py_func):
        missing = []
        for name in names:
            try:
                fn = getattr(_lib, name)
            except AttributeError:
                missing.append(name)
                continue
            fn.argtypes = argtypes
            fn.restype = restype
            functools.wraps(py_func)(fn)
            return fn
        raise EngineUnavailableError(
            f"{py_func.__name__}: none of the symbols {', '.join(missing)} is exported by libllama; "
            "this llama.cpp build has no DFlash support"
        )

    return decorator


ctx_p = C.llama_context_p_ctypes
model_p = C.llama_model_p_ctypes


# LLAMA_API void llama_set_embeddings_layer_inp(struct llama_context * ctx, uint32_t lid, bool value);
@_bind(
    (
        "llama_set_embeddings_layer_inp",
        "_Z30llama_set_embeddings_layer_inpP13llama_contextjb",
        "?llama_set_embeddings_layer_inp@@YAXPEAUllama_context@@I_N@Z",
    ),
    [ctx_p, ctypes.c_uint32, ctypes.c_bool],
    None,
)
def llama_set_embeddings_layer_inp(ctx, lid: int, value: bool, /) -> None:
    """Record (or stop recording) the input embeddings of target layer ``lid`` on every decode."""


# LLAMA_API float * llama_get_embeddings_layer_inp(struct llama_context * ctx, uint32_t lid);
# Aborts (GGML_ASSERT) when the layer was not enabled: callers must only ask for enabled layers.
@_bind(
    (
        "llama_get_embeddings_layer_inp",
        "_Z30llama_get_embeddings_layer_inpP13llama_contextj",
        "?llama_get_embeddings_layer_inp@@YAPEAMPEAUllama_context@@I@Z",
    ),
    [ctx_p, ctypes.c_uint32],
    ctypes.POINTER(ctypes.c_float),
)
def llama_get_embeddings_layer_inp(ctx, lid: int, /):
    """Rows [n_tokens_of_last_batch, n_embd] of layer ``lid``'s input, one per batch entry."""


# LLAMA_API const int32_t * llama_model_target_layer_ids(const struct llama_model * model);
@_bind(
    (
        "llama_model_target_layer_ids",
        "_Z28llama_model_target_layer_idsPK11llama_model",
        "?llama_model_target_layer_ids@@YAPEBHPEBUllama_model@@@Z",
    ),
    [model_p],
    ctypes.POINTER(ctypes.c_int32),
)
def llama_model_target_layer_ids(model, /):
    """The drafter's target layer ids (GGUF ``dflash.target_layers``)."""


# LLAMA_API uint32_t llama_model_target_layer_ids_n(const struct llama_model * model);
@_bind(
    (
        "llama_model_target_layer_ids_n",
        "_Z30llama_model_target_layer_ids_nPK11llama_model",
        "?llama_model_target_layer_ids_n@@YAIPEBUllama_model@@@Z",
    ),
    [model_p],
    ctypes.c_uint32,
)
def llama_model_target_layer_ids_n(model, /) -> int:
    """How many target layers the drafter reads."""


# LLAMA_API int32_t llama_model_dflash_selector_top_k(const struct llama_model * model);
@_bind(
    (
        "llama_model_dflash_selector_top_k",
        "_Z33llama_model_dflash_selector_top_kPK11llama_model",
        "?llama_model_dflash_selector_top_k@@YAHPEBUllama_model@@@Z",
    ),
    [model_p],
    ctypes.c_int32,
)
def llama_model_dflash_selector_top_k(model, /) -> int:
    """> 0 for DFlash2 drafters (selector lattice), 0 for DFlash / DSpark."""


# llama-ext.h (C++ linkage): the devices a loaded model spreads its layers over, in order
@_bind(
    (
        "llama_model_n_devices",
        "_Z21llama_model_n_devicesPK11llama_model",
        "?llama_model_n_devices@@YAHPEBUllama_model@@@Z",
    ),
    [model_p],
    ctypes.c_int32,
)
def llama_model_n_devices(model, /) -> int:
    """How many devices the model's layers were placed on (0: CPU only)."""


@_bind(
    (
        "llama_model_get_device",
        "_Z22llama_model_get_devicePK11llama_modeli",
        "?llama_model_get_device@@YAPEAUggml_backend_device@@PEBUllama_model@@H@Z",
    ),
    [model_p, ctypes.c_int],
    ctypes.c_void_p,
)
def llama_model_get_device(model, i: int, /):
    """The ggml device handle of the model's i-th device."""


# Already bound by llama-cpp-python (llama_cpp_ext.py); re-exported so callers see one FFI module.
from llama_cpp.llama_cpp_ext import llama_get_embeddings_nextn, llama_set_embeddings_nextn  # noqa: E402


#: The llama.cpp commit vendored in each pinned llama-cpp-python release (read from its sdist).
LLAMA_CPP_COMMITS = {"0.3.36": "0c1e57098"}


def build_info() -> dict:
    """What packaging/build_engine.sh recorded next to the installed llama_cpp package."""
    import llama_cpp

    info_file = Path(llama_cpp.__file__).with_name("dflash_build_info.json")
    info = json.loads(info_file.read_text()) if info_file.exists() else {}
    info["llama_cpp_python"] = getattr(llama_cpp, "__version__", "unknown")
    info["llama_cpp_commit"] = LLAMA_CPP_COMMITS.get(info["llama_cpp_python"], "unknown")
    sys_info = C.llama_print_system_info()
    info["system_info"] = sys_info.decode() if isinstance(sys_info, bytes) else str(sys_info)
    return info


@functools.lru_cache(maxsize=1)
def _patch_names() -> frozenset[str]:
    return frozenset(p.get("name", "") for p in build_info().get("patches", []))


def has_patch(name: str) -> bool:
    """Whether the installed engine was built with ``name`` (a file of packaging/patches), as its
    build record lists; a patch that changes a graph's meaning without a symbol is known only so."""
    return name in _patch_names()


def set_batch_invariant(ctx, on: bool) -> bool:
    """Patch 0005's ``llama_set_batch_invariant``: the context's CPU kernels compute every batch row
    as a one-token decode does (the exact verify). False when this build lacks the patch or the
    context has no CPU backend that supports it."""
    try:
        fn = _lib.llama_set_batch_invariant
    except AttributeError:
        return False
    fn.argtypes = [ctx_p, ctypes.c_bool]
    fn.restype = ctypes.c_bool
    return bool(fn(ctx, on))


@functools.lru_cache(maxsize=1)
def bulk_batch_api() -> tuple[Any, Any] | None:
    """Patch 0023's ``llama_batch_ext_add_tokens`` and ``llama_get_sampled_tokens``, bound: a step's
    token block filled and its backend picks read in one call each, where per-entry calls cost the
    host ~5 us an entry through ctypes (H200 machine: 75 us for a 16-row drafter block, 45 us for its
    7 reads and seq_rm). None when this build lacks the patch, or with DFLASH_BULK_BATCH=0 (the
    per-entry calls, for A/B runs)."""
    import os

    if os.environ.get("DFLASH_BULK_BATCH", "") == "0":
        return None
    try:
        add, read = _lib.llama_batch_ext_add_tokens, _lib.llama_get_sampled_tokens
    except AttributeError:
        return None
    add.argtypes = [
        ctypes.c_void_p,
        ctypes.c_int32,
        ctypes.POINTER(ctypes.c_int32),
        ctypes.c_int32,
        ctypes.c_int32,
        ctypes.POINTER(ctypes.c_int8),
    ]
    add.restype = ctypes.c_int32
    read.argtypes = [ctx_p, ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(ctypes.c_int32)]
    read.restype = ctypes.c_int32
    return add, read


@functools.lru_cache(maxsize=1)
def token_sets_api() -> Any | None:
    """Patch 0026's ``llama_batch_ext_add_token_sets``, bound: a tree verify's entries, each in its
    set of sequences, added in one call, where per-entry calls cost three ctypes calls an entry and
    one per extra sequence (~97 us a tree-15 step on the H200 machine's host). None when this build
    lacks the patch, or with DFLASH_BULK_BATCH=0 (the per-entry calls, as for patch 0023) or
    DFLASH_TREE_BATCH=0 (this patch alone off, for its own A/B)."""
    import os

    if os.environ.get("DFLASH_BULK_BATCH", "") == "0" or os.environ.get("DFLASH_TREE_BATCH", "") == "0":
        return None
    try:
        fn = _lib.llama_batch_ext_add_token_sets
    except AttributeError:
        return None
    i32p = ctypes.POINTER(ctypes.c_int32)
    fn.argtypes = [ctypes.c_void_p, i32p, i32p, i32p, i32p, ctypes.c_int32, ctypes.POINTER(ctypes.c_int8)]
    fn.restype = ctypes.c_int32
    return fn


@functools.lru_cache(maxsize=1)
def greedy_run_api() -> Any | None:
    """Patch 0028's ``llama_decode_greedy_run``, bound: an AR request's one-token decodes, each fed
    the last one's backend greedy pick, several in one call, with no Python between them. None when
    this build lacks the patch (``ar_run.runs_on`` decides where runs are used, at every request)."""
    try:
        fn = _lib.llama_decode_greedy_run
    except AttributeError:
        return None
    i32p = ctypes.POINTER(ctypes.c_int32)
    fn.argtypes = [
        ctx_p,
        ctypes.c_void_p,
        ctypes.c_int32,
        ctypes.c_int32,
        ctypes.c_int32,
        ctypes.c_int32,
        ctypes.c_bool,
        i32p,
        ctypes.POINTER(ctypes.c_int64),
        i32p,
    ]
    fn.restype = ctypes.c_int32
    return fn


def _patched_switch(symbol: str, ctx, value, ctype=ctypes.c_bool) -> bool:
    """Calls a patch's ``void symbol(llama_context *, <ctype>)``; False when this build lacks it."""
    try:
        fn = getattr(_lib, symbol)
    except AttributeError:
        return False
    fn.argtypes = [ctx_p, ctype]
    fn.restype = None
    fn(ctx, value)
    return True


def set_no_output_scheduler(ctx, on: bool) -> bool:
    """Patch 0008's ``llama_set_no_output_scheduler``: the context's batches without outputs get a
    scheduler of their own, so alternating no-output and output batches each keep their graph.
    False when this build lacks the patch."""
    return _patched_switch("llama_set_no_output_scheduler", ctx, on)


def set_one_row_scheduler(ctx, on: bool) -> bool:
    """Patch 0009's ``llama_set_one_row_scheduler``: the context's one-row decodes with outputs get a
    graph slot and a scheduler of their own, so AR steps between verifies each keep their graph.
    False when this build lacks the patch."""
    return _patched_switch("llama_set_one_row_scheduler", ctx, on)


def set_row_slots(ctx, max_rows: int) -> bool:
    """Patch 0017's ``llama_set_row_slots``: the context's batches of up to ``max_rows`` rows (at most
    16), every row an output, get a graph slot and a scheduler per row count, so AR steps, verifies of
    several widths and prompts in between each keep their graph (1: patch 0009's one-row slot only;
    0: none). False when this build lacks the patch."""
    return _patched_switch("llama_set_row_slots", ctx, int(max_rows), ctypes.c_int32)


def set_no_output_row_slots(ctx, max_rows: int) -> bool:
    """Patch 0029's ``llama_set_no_output_row_slots``: the context's batches without outputs of up to
    ``max_rows`` rows (at most 16; with patch 0008's scheduler on) get a graph slot and a scheduler per
    row count, so a drafter's feature inject keeps a graph for each commit length (0: patch 0008's one
    slot). False when this build lacks the patch."""
    return _patched_switch("llama_set_no_output_row_slots", ctx, int(max_rows), ctypes.c_int32)


__all__ = [
    "C",
    "EngineUnavailableError",
    "build_info",
    "has_patch",
    "llama_set_embeddings_layer_inp",
    "llama_get_embeddings_layer_inp",
    "llama_model_target_layer_ids",
    "llama_model_target_layer_ids_n",
    "llama_model_dflash_selector_top_k",
    "llama_get_embeddings_nextn",
    "llama_set_embeddings_nextn",
    "set_batch_invariant",
    "set_no_output_scheduler",
    "set_no_output_row_slots",
    "set_one_row_scheduler",
    "set_row_slots",
]


# -- ggml devices (for `doctor`, the status bar, the GPU plan): C functions of libggml ---------------
@functools.lru_cache(maxsize=1)
def _ggml_devices_api():
    """The device registry and device methods, looked up through libllama's own handle: dlsym there
    searches its dependencies, so these are the very libggml / libggml-base that llama.cpp uses.
    (Opening llama_cpp/lib/libggml.so by name loads a second copy beside libllama's libggml.so.0,
    with a registry of its own: found by the issue-18 investigation, two different addresses.)"""
    lib = _lib
    try:
        lib.ggml_backend_dev_count.restype = ctypes.c_size_t
    except AttributeError:
        return None
    lib.ggml_backend_dev_get.argtypes = [ctypes.c_size_t]
    lib.ggml_backend_dev_get.restype = ctypes.c_void_p
    for fn in ("ggml_backend_dev_name", "ggml_backend_dev_description"):
        getattr(lib, fn).argtypes = [ctypes.c_void_p]
        getattr(lib, fn).restype = ctypes.c_char_p
    lib.ggml_backend_dev_type.argtypes = [ctypes.c_void_p]
    lib.ggml_backend_dev_type.restype = ctypes.c_int
    lib.ggml_backend_dev_memory.argtypes = [
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_size_t),
        ctypes.POINTER(ctypes.c_size_t),
    ]
    lib.ggml_backend_dev_memory.restype = None
    lib.ggml_backend_dev_backend_reg.argtypes = [ctypes.c_void_p]
    lib.ggml_backend_dev_backend_reg.restype = ctypes.c_void_p
    lib.ggml_backend_reg_name.argtypes = [ctypes.c_void_p]
    lib.ggml_backend_reg_name.restype = ctypes.c_char_p
    return lib, lib


_DEV_TYPES = {0: "cpu", 1: "gpu", 2: "igpu", 3: "accel", 4: "meta"}


def _is_rpc(lib, dev) -> bool:
    """An RPC device (it says "GPU"): its registry is ggml-rpc's, as llama.cpp itself tells them apart."""
    return lib.ggml_backend_reg_name(lib.ggml_backend_dev_backend_reg(dev)) == b"RPC"


def device_memory(dev) -> tuple[int, int]:
    """(free, total) bytes of one device handle. On an RPC device this is a network call through the
    engine's own connection: only in the engine's process, with the server known alive."""
    _, lib = _ggml_devices_api()
    free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
    lib.ggml_backend_dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
    return int(free.value), int(total.value)


def devices() -> list[dict]:
    """This machine's ggml backend devices: name, description, type, free and total memory in
    bytes. RPC devices registered in this process are left out (runtime.rpc lists those: asking
    their memory here would be a network call that aborts the process if the server is gone)."""
    C.llama_backend_init()  # loads the backends (idempotent)
    api = _ggml_devices_api()
    if api is None:
        return []
    reg, lib = api
    out = []
    for i in range(reg.ggml_backend_dev_count()):
        dev = reg.ggml_backend_dev_get(i)
        if _is_rpc(lib, dev):
            continue
        free, total = device_memory(dev)
        out.append(
            {
                "name": (lib.ggml_backend_dev_name(dev) or b"").decode(),
                "description": (lib.ggml_backend_dev_description(dev) or b"").decode(),
                "type": _DEV_TYPES.get(lib.ggml_backend_dev_type(dev), "unknown"),
                "memory_free": free,
                "memory_total": total,
            }
        )
    return out


def gpus() -> list[dict]:
    return [d for d in devices() if d["type"] in ("gpu", "igpu")]


def model_devices(model_ptr) -> list[str]:
    """The devices a loaded model uses, as "NAME (description)": e.g. "RPC0 (127.0.0.1:50052)"."""
    api = _ggml_devices_api()
    if api is None:
        return []
    _, lib = api
    out = []
    for i in range(llama_model_n_devices(model_ptr)):
        dev = llama_model_get_device(model_ptr, i)
        out.append(
            f"{(lib.ggml_backend_dev_name(dev) or b'').decode()} ({(lib.ggml_backend_dev_description(dev) or b'').decode()})"
        )
    return out


def local_gpu_handles() -> list[int]:
    """The local GPUs llama.cpp's default device list would take, in its order (discrete GPUs; the
    integrated ones only when there is none): with RPC servers, the engine passes RPC devices +
    these explicitly."""
    C.llama_backend_init()
    api = _ggml_devices_api()
    if api is None:
        return []
    reg, lib = api
    handles = [reg.ggml_backend_dev_get(i) for i in range(reg.ggml_backend_dev_count())]
    local = [(d, lib.ggml_backend_dev_type(d)) for d in handles if not _is_rpc(lib, d)]
    discrete = [d for d, t in local if t == 1]
    return discrete or [d for d, t in local if t == 2]
