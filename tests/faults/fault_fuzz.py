"""Property-based fuzzing (Hypothesis) of five surfaces a user or a download controls: GGUF header
values, the settings file, Hugging Face drafter folders for the converter, CLI arguments, and chat
prompts. Each generated case must end in a named refusal (our own error type, a FAIL of the pairing
checks, an exit code with one line) or in a normal result, never in a traceback, an abort or a hang,
and a message the user typed is never lost.

Every case is counted per surface (``COUNTS``): tried, refused, accepted, and the failures by kind
(tracebacks, aborts, hangs, lost). A failure is also raised, so Hypothesis shrinks it. Two settings
profiles: ``fuzz-fast`` (deterministic, a few dozen cases per surface, in ``make test``) and
``fuzz-long`` (1,000 random cases per surface, ``-m faults_long``), whose counts go to the fault table
in docs/benchmarks.md.

A pair that passes the pairing checks is loaded and run in a child process (``python fault_fuzz.py
loader``), so a llama.cpp abort is counted as one, with its file, instead of ending the test run.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import struct
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]

SURFACES = ("headers", "settings", "converter", "cli", "prompts")
#: surface -> Counter(tried, refused, accepted, tracebacks, aborts, hangs, lost, bad_files)
COUNTS: dict[str, Counter] = {s: Counter() for s in SURFACES}
#: seconds one case may take before it counts as a hang (a loaded pair's short run takes ~1 s)
HANG_S = 60.0

_COMMON = dict(
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
        HealthCheck.large_base_example,
    ],
)
settings.register_profile(
    "fuzz-fast", max_examples=int(os.environ.get("DFLASH_FUZZ_FAST", "40")), derandomize=True, **_COMMON
)
settings.register_profile("fuzz-long", max_examples=int(os.environ.get("DFLASH_FUZZ_LONG", "1000")), **_COMMON)


class CaseFailure(AssertionError):
    """A case ended in something other than a named refusal or a normal result."""


def fail(surface: str, kind: str, what: str):
    COUNTS[surface][kind] += 1
    write_counts({"last_failure": what[:2000]})
    raise CaseFailure(f"{surface}: {kind}: {what}")


def record(surface: str, refused: bool) -> None:
    COUNTS[surface]["tried"] += 1
    COUNTS[surface]["refused" if refused else "accepted"] += 1
    write_counts()


def profile(name: str, surface: str) -> settings:
    """The profile's settings for one surface; the fast profile runs fewer prompt cases (each runs the
    engine), keeping the whole fast fuzz near a minute on two cores."""
    base = settings.get_profile(name)
    if name == "fuzz-fast" and surface == "prompts" and "DFLASH_FUZZ_FAST" not in os.environ:
        return settings(base, max_examples=25)
    return base


def counts_table() -> dict:
    keys = ("tried", "refused", "accepted", "tracebacks", "aborts", "hangs", "lost", "bad_files")
    return {s: {k: COUNTS[s][k] for k in keys} for s in SURFACES if COUNTS[s]}


def write_counts(extra: dict | None = None) -> None:
    """With DFLASH_FUZZ_COUNTS=PATH, the counts so far go there as JSON (the long profile's record)."""
    path = os.environ.get("DFLASH_FUZZ_COUNTS")
    if path:  # after every case, so a run stopped early still leaves its counts
        tmp = Path(path + ".tmp")
        tmp.write_text(json.dumps({"counts": counts_table(), **(extra or {})}, indent=2))
        os.replace(tmp, path)


# ------------------------------------------------------------------------------------------------
# values


def hostile_ints():
    edges = [0, 1, -1, 2, 3, 7, 16, 255, 256, 4096, 65535, 65536, 2**31 - 1, -(2**31), 2**32 - 1, 2**63 - 1]
    return st.one_of(st.sampled_from(edges), st.integers(-(2**31), 2**32 - 1), st.integers(0, 64))


def hostile_floats(width: int = 32):
    edges = [0.0, -0.0, 1e-6, -1e-6, 1.0, -1.0, 1e-45, 3.4e38, -3.4e38, 1e4, float("nan"), float("inf"), -float("inf")]
    return st.one_of(st.sampled_from(edges), st.floats(width=width))


#: characters that make text hostile: controls, NUL, BOM, bidi overrides, lone surrogates, ChatML
HOSTILE_TEXT_PIECES = [
    "\x00",
    "\x1b[2J",
    "\r\n",
    "\t",
    "\ufeff",
    "\u202e",
    "\ud800",
    "\udfff",
    "\U0010ffff",
    "<|im_start|>",
    "<|im_end|>",
    "<|endoftext|>",
    "<s>",
    "</s>",
    "{{",
    "{%",
    "\\",
    '"',
    "'",
    "%s",
    "=1+1",
    "\u0000\u0001",
    "é",
    "日本",
    "🙂",
    " ",
    "",
]


def hostile_text(max_size: int = 40, surrogates: bool = True):
    chars = st.characters(codec=None) if surrogates else st.characters(exclude_categories=("Cs",))
    pieces = st.sampled_from(
        HOSTILE_TEXT_PIECES
        if surrogates
        else [p for p in HOSTILE_TEXT_PIECES if not any(0xD800 <= ord(c) <= 0xDFFF for c in p)]
    )
    return st.lists(st.one_of(pieces, st.text(chars, max_size=8)), max_size=max(1, max_size // 4)).map("".join)


def json_values(max_leaves: int = 6):
    leaves = st.one_of(
        st.none(),
        st.booleans(),
        hostile_ints(),
        st.integers(-(10**30), 10**30),
        hostile_floats(64),
        hostile_text(20, surrogates=False),
    )
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4), st.dictionaries(hostile_text(8, surrogates=False), inner, max_size=3)
        ),
        max_leaves=max_leaves,
    )


# ------------------------------------------------------------------------------------------------
# the child that loads pairs which passed the checks


class Loader:
    """One child process that loads pairs and runs a few tokens; restarted after an abort or a hang."""

    def __init__(self):
        self.proc: subprocess.Popen | None = None
        self.stderr_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"fault_fuzz_loader_{os.getpid()}.log"

    def _start(self):
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "loader"],
            cwd=str(ROOT),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=open(self.stderr_path, "wb"),
            env=env,
            text=True,
            bufsize=1,
        )

    def run(self, target: str, draft: str | None, timeout: float = HANG_S) -> dict:
        """{"ok": ...} or {"refused": message} or {"traceback": ...} / {"abort": rc} / {"hang": seconds}."""
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        self.proc.stdin.write(json.dumps({"target": target, "draft": draft}) + "\n")
        self.proc.stdin.flush()
        t0 = time.monotonic()
        while True:
            left = timeout - (time.monotonic() - t0)
            ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, left))
            if not ready:
                self.close(keep_log=True)
                return {"hang": round(time.monotonic() - t0, 1)}
            line = self.proc.stdout.readline()
            if not line:  # the child died
                rc = self.proc.wait()
                tail = self.stderr_path.read_text(errors="replace")[-400:] if self.stderr_path.exists() else ""
                self.proc = None
                return {"abort": rc, "stderr": tail}
            if line.startswith("@@"):
                return json.loads(line[2:])

    def close(self, keep_log: bool = False):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
        if not keep_log:
            self.stderr_path.unlink(missing_ok=True)


def loader_child() -> None:
    from engine_bridge.common.errors import EngineError
    from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
    from engine_bridge.runtime.config import EngineConfig, GenerationSettings
    from engine_bridge.runtime.engine import Engine

    for line in sys.stdin:
        req = json.loads(line)
        try:
            eng = Engine.load(
                EngineConfig(target=req["target"], draft=req["draft"], n_ctx=256, n_threads=1), preflight=PAIR_PREFLIGHT
            )
            try:
                res = eng.generate("Hello", GenerationSettings(mode="chain" if req["draft"] else "ar", max_tokens=4))
                out = {"ok": res.summary.finish_reason if res.summary else "", "tokens": len(res.tokens)}
            finally:
                eng.close()
        except (EngineError, ValueError) as exc:
            out = {"refused": f"{type(exc).__name__}: {exc}"[:300]}
        except Exception as exc:  # noqa: BLE001 - the parent counts it as a traceback
            out = {"traceback": f"{type(exc).__name__}: {exc}"[:300]}
        sys.stdout.write("@@" + json.dumps(out) + "\n")
        sys.stdout.flush()


def judge_load(surface: str, res: dict, what: str) -> bool:
    """True when the loaded pair ran, False when it was refused by name; any other end fails the case."""
    if "ok" in res:
        return True
    if "refused" in res:
        return False
    kind = "aborts" if "abort" in res else "hangs" if "hang" in res else "tracebacks"
    fail(surface, kind, f"{what}: {res}")


# ------------------------------------------------------------------------------------------------
# surface 1: GGUF header values


def _gguf_types():
    from gguf import GGUFValueType as T

    return T


def typed_values():
    """(value, GGUFValueType, element type for arrays) as a hostile file would carry them."""
    T = _gguf_types()
    return st.one_of(
        hostile_floats(32).map(lambda v: (v, T.FLOAT32, None)),
        hostile_floats(64).map(lambda v: (v, T.FLOAT64, None)),
        st.integers(0, 2**32 - 1).map(lambda v: (v, T.UINT32, None)),
        hostile_ints().filter(lambda v: -(2**31) <= v < 2**31).map(lambda v: (v, T.INT32, None)),
        st.integers(-(2**63), 2**63 - 1).map(lambda v: (v, T.INT64, None)),
        st.integers(0, 2**64 - 1).map(lambda v: (v, T.UINT64, None)),
        st.booleans().map(lambda v: (v, T.BOOL, None)),
        hostile_text(12, surrogates=False).map(lambda v: (v, T.STRING, None)),
        st.lists(hostile_ints().filter(lambda v: -(2**31) <= v < 2**31), min_size=1, max_size=6).map(
            lambda v: (v, T.ARRAY, T.INT32)
        ),
        st.lists(hostile_floats(32), min_size=1, max_size=4).map(lambda v: (v, T.ARRAY, T.FLOAT32)),
    )


#: keys a hostile file may change; "<a>" is the file's architecture
HEADER_KEYS = (
    "<a>.attention.layer_norm_rms_epsilon",
    "<a>.rope.freq_base",
    "<a>.block_count",
    "<a>.embedding_length",
    "<a>.feed_forward_length",
    "<a>.attention.head_count",
    "<a>.attention.head_count_kv",
    "<a>.attention.key_length",
    "<a>.attention.value_length",
    "<a>.context_length",
    "<a>.rope.dimension_count",
    "<a>.rope.scaling.factor",
    "<a>.final_logit_softcapping",
    "<a>.attention.sliding_window",
    "<a>.logit_scale",
    "<a>.embedding_scale",
    "<a>.vocab_size",
    "tokenizer.ggml.bos_token_id",
    "tokenizer.ggml.eos_token_id",
    "tokenizer.ggml.mask_token_id",
    "general.file_type",
)
DRAFTER_ONLY_KEYS = ("dflash.target_layers", "dflash.block_size", "dflash.attention.sliding_window_pattern")


def header_edits():
    """[(role, key, (value, type, elem))]: one to three values changed in the target or the drafter."""

    def key_for(role):
        keys = HEADER_KEYS + (DRAFTER_ONLY_KEYS if role == "drafter" else ())
        return st.sampled_from(keys)

    def native(key):  # the type a real file uses for the key, so more cases reach the load
        T = _gguf_types()
        if any(w in key for w in ("epsilon", "freq_base", "scale", "softcap", "factor")):
            return hostile_floats(32).map(lambda v: (v, T.FLOAT32, None))
        if key == "dflash.target_layers":
            return st.lists(st.integers(-2, 8), min_size=1, max_size=5).map(lambda v: (v, T.ARRAY, T.INT32))
        if key.endswith("sliding_window_pattern"):
            return st.lists(st.booleans(), min_size=1, max_size=5).map(lambda v: (v, T.ARRAY, T.BOOL))
        return st.one_of(st.integers(0, 64), hostile_ints().filter(lambda v: 0 <= v < 2**32)).map(
            lambda v: (v, T.UINT32, None)
        )

    one = st.sampled_from(["drafter", "drafter", "target"]).flatmap(
        lambda role: key_for(role).flatmap(
            lambda key: st.tuples(st.just(role), st.just(key), st.one_of(native(key), typed_values()))
        )
    )
    return st.lists(one, min_size=1, max_size=3, unique_by=lambda e: (e[0], e[1]))


def rewrite_with(src: Path, dst: Path, values: dict) -> Path:
    """A copy of ``src`` with ``values`` (key -> (value, type, elem)) set with exactly those GGUF types."""
    import numpy as np
    from gguf import GGMLQuantizationType, GGUFValueType, GGUFWriter, quants

    from engine_bridge.models.convert_quant import copy_fields
    from engine_bridge.models.gguf_header import read_header

    hdr = read_header(src)
    writer = GGUFWriter(str(dst), hdr.fields["general.architecture"])
    copy_fields(writer, hdr, skip=set(values))
    for key, (value, vtype, elem) in values.items():
        if vtype == GGUFValueType.ARRAY:
            writer.add_key_value(key, list(value), vtype, sub_type=elem)
        else:
            writer.add_key_value(key, value, vtype)
    for name, t in hdr.tensors.items():
        raw = np.frombuffer(hdr.tensor_bytes(name), dtype=np.uint8)
        if t.type_name in ("F32", "F16"):
            writer.add_tensor(name, raw.view(np.float32 if t.type_name == "F32" else np.float16).reshape(t.shape))
        else:
            qt = GGMLQuantizationType(t.ggml_type)
            writer.add_tensor(name, raw.reshape(quants.quant_shape_to_byte_shape(t.shape, qt)), raw_dtype=qt)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return dst


def _out_of_domain(short: str, value) -> bool:
    """The independent oracle: values llama.cpp cannot use for the keys whose domain is plain."""
    import math

    if isinstance(value, bool) or isinstance(value, (str, list)):
        return False  # a wrong type: the checks may ignore a key llama.cpp would not read as a number
    if short in ("attention.layer_norm_rms_epsilon", "rope.freq_base"):
        return not math.isfinite(value) or value <= 0
    if short in ("block_count", "embedding_length", "attention.head_count"):
        return value <= 0 or value > 2**20
    return False


def case_header(work: Path, target: Path, drafter: Path, edits: list, loader: Loader) -> None:
    from engine_bridge.common.errors import UnreadableModelError
    from engine_bridge.models import compat
    from engine_bridge.models.modelinfo import inspect_model

    s = "headers"
    t0 = time.monotonic()
    arch = {"target": inspect_model(target).arch, "drafter": "dflash"}
    values = {"target": {}, "drafter": {}}
    for role, key, typed in edits:
        values[role][key.replace("<a>", arch[role])] = typed
    paths = {}
    for role, src in (("target", target), ("drafter", drafter)):
        paths[role] = rewrite_with(src, work / f"{role}.gguf", values[role]) if values[role] else src
    what = f"edits {[(r, k, v[0]) for r, k, v in edits]}"
    try:
        for p in paths.values():
            try:
                inspect_model(p)
            except UnreadableModelError:
                pass  # a named refusal; check() says the same as a FAIL
        report = compat.check(paths["target"], paths["drafter"])
    except Exception as exc:  # noqa: BLE001 - the property: nothing but a report
        fail(s, "tracebacks", f"{what}: {type(exc).__name__}: {exc}")
    for role, key, (value, _, _) in edits:
        short = key.replace("<a>.", "")
        if key.startswith("<a>.") and _out_of_domain(short, value):
            named = [c for c in report.failures if short in c.reason or "readable" in c.name]
            if not named:
                fail(
                    s,
                    "tracebacks",
                    f"{what}: {role} {short} = {value!r} passed the checks "
                    f"(failures: {[c.line() for c in report.failures]})",
                )
    for c in report.failures:
        if not c.name or not c.reason:
            fail(s, "tracebacks", f"{what}: a FAIL without a name or a reason: {c!r}")
    if not report.ok:
        record(s, refused=True)
        return
    ran = judge_load(s, loader.run(str(paths["target"]), str(paths["drafter"])), what)
    if time.monotonic() - t0 > HANG_S:
        fail(s, "hangs", f"{what}: {time.monotonic() - t0:.0f} s")
    record(s, refused=not ran)


# ------------------------------------------------------------------------------------------------
# surface 2: settings files


def settings_entries():
    """(key, raw ini value text) lines: the StudioSettings fields and ui/conversation, hand-edited."""
    from app.shell.app_settings import StudioSettings
    import dataclasses

    names = [f.name for f in dataclasses.fields(StudioSettings)]
    raw = st.one_of(
        hostile_ints().map(str),
        st.integers(-(10**30), 10**30).map(str),
        hostile_floats(64).map(repr),
        st.sampled_from(
            [
                "true",
                "false",
                "yes",
                "",
                "@Invalid()",
                "@Variant(\\0\\0\\0\\x7f\\0\\0\\0\\x1)",
                "@ByteArray(\\xff\\0)",
                "@Rect(1 2 3 4)",
                "@Point(1 2)",
                "@Size(-1 -1)",
                '[["a.gguf", 1.0]]',
                '[["a", NaN]]',
                "[[1, 2]]",
                '{"a": 1}',
                "[1,2",
                '""',
                "q8_0",
                "f16",
                "chain",
                "tree",
                "auto",
                "layer",
                "row",
                "none",
                "on",
                "off",
                "a, b, c",
                "1,2,3",
                "\\x1",
                "\\n",
                "%2F",
                "%U",
            ]
        ),
        hostile_text(30, surrogates=False).map(lambda t: t.replace("\n", " ").replace("\r", " ")),
        json_values(4).map(lambda v: json.dumps(v)),
    )
    key = st.one_of(
        st.sampled_from(names).map(lambda n: f"studio/{n}"),
        st.just("ui/conversation"),
        hostile_text(10, surrogates=False).map(lambda t: "studio/" + t),
    )
    return st.lists(st.tuples(key, raw), max_size=12)


def settings_objects():
    """(key, Python value) as QSettings.setValue would store it (other types than the field's)."""
    from app.shell.app_settings import StudioSettings
    import dataclasses

    names = [f.name for f in dataclasses.fields(StudioSettings)]
    val = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**62), 2**62),
        hostile_floats(64),
        hostile_text(20, surrogates=False),
        st.binary(max_size=8),
        st.lists(st.one_of(st.integers(-5, 5), hostile_text(5, surrogates=False)), max_size=3),
    )
    return st.lists(st.tuples(st.sampled_from(names).map(lambda n: f"studio/{n}"), val), max_size=6)


def _ini_text(entries) -> str:
    groups: dict[str, list[str]] = {}
    for key, value in entries:
        group, _, name = key.partition("/")
        groups.setdefault(group, []).append(f"{name}={value}")
    return "".join(f"[{g}]\n" + "\n".join(lines) + "\n" for g, lines in groups.items())


def case_settings(work: Path, entries: list, objects: list) -> None:
    import dataclasses
    import math

    from app.shell.app_settings import CHOICES, FLOAT_RANGES, INT_RANGES, StudioSettings, open_settings

    s = "settings"
    path = work / "settings.ini"
    path.write_text(_ini_text(entries), encoding="utf-8", errors="surrogatepass")
    what = f"ini {path.read_text(errors='replace')[:300]!r}, objects {objects!r}"
    try:
        qs = open_settings(path)
        for key, value in objects:
            qs.setValue(key, value)
        loaded, resets = StudioSettings.load_checked(qs)
        loaded.engine_config()
        loaded.generation_settings()
        loaded.target_placement()
        loaded.rpc_endpoints()
    except Exception as exc:  # noqa: BLE001 - the property: a hand-edited file never stops the app
        fail(s, "tracebacks", f"{what}: {type(exc).__name__}: {exc}")
    defaults = StudioSettings()
    for f in dataclasses.fields(StudioSettings):
        v, d = getattr(loaded, f.name), getattr(defaults, f.name)
        if type(v) is not type(d):
            fail(s, "tracebacks", f"{what}: {f.name} = {v!r} is a {type(v).__name__}, not a {type(d).__name__}")
        if f.name in INT_RANGES or f.name in FLOAT_RANGES:
            lo, hi = INT_RANGES.get(f.name) or FLOAT_RANGES[f.name]
            if not (lo <= v <= hi) or (isinstance(v, float) and not math.isfinite(v)):
                fail(s, "tracebacks", f"{what}: {f.name} = {v!r} outside {lo}..{hi}")
        if f.name in CHOICES and v not in CHOICES[f.name]:
            fail(s, "tracebacks", f"{what}: {f.name} = {v!r} not one of {CHOICES[f.name]}")
    # what was loaded saves and loads again unchanged, with nothing more to reset
    again_path = work / "again.ini"
    again_qs = open_settings(again_path)
    loaded.save(again_qs)
    again, more = StudioSettings.load_checked(open_settings(again_path))
    if again != loaded or more:
        fail(s, "lost", f"{what}: a saved settings file does not load as it was: {more}")
    for line in resets:
        if ":" not in line or "\n" in line:
            fail(s, "tracebacks", f"{what}: a reset note that names no field: {line!r}")
    record(s, refused=bool(resets))


# ------------------------------------------------------------------------------------------------
# surface 3: converter folders

CONFIG_KEYS = (
    "architectures",
    "model_type",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "max_position_embeddings",
    "rms_norm_eps",
    "vocab_size",
    "hidden_act",
    "torch_dtype",
    "num_target_layers",
    "block_size",
    "rope_theta",
    "rope_parameters",
    "layer_types",
    "use_sliding_window",
    "sliding_window",
    "partial_rotary_factor",
    "rope_scaling",
    "sample_from_anchor",
    "dflash_config",
    "dflash_config.mask_token_id",
    "dflash_config.target_layer_ids",
    "tie_word_embeddings",
    "attention_bias",
)
ST_FIELDS = ("dtype", "shape", "data_offsets")


def _plausible_numbers():
    return st.one_of(
        hostile_ints(),
        hostile_floats(64),
        st.integers(-(10**30), 10**30),
        st.lists(hostile_ints(), max_size=4),
        st.sampled_from([[0, 2], [1, 3], [-1], [0.5, 2]]),
    )


def converter_ops():
    cfg_set = st.tuples(
        st.just("cfg_set"), st.sampled_from(CONFIG_KEYS), st.one_of(_plausible_numbers(), json_values())
    )
    cfg_del = st.tuples(st.just("cfg_del"), st.sampled_from(CONFIG_KEYS), st.none())
    cfg_replace = st.tuples(
        st.just("cfg_replace"),
        st.none(),
        st.one_of(json_values().map(json.dumps), st.binary(max_size=20).map(lambda b: b.decode("latin-1"))),
    )
    st_set = st.tuples(
        st.just("st_set"),
        st.tuples(st.integers(0, 20), st.sampled_from(ST_FIELDS)),
        st.one_of(
            _plausible_numbers(), json_values(), st.sampled_from(["F32", "F16", "BF16", "I8", "F64", "U8", "Q8", ""])
        ),
    )
    st_drop = st.tuples(st.just("st_drop"), st.integers(0, 20), st.none())
    st_len = st.tuples(st.just("st_len"), st.none(), st.one_of(st.integers(0, 2**64 - 1), st.integers(-64, 64)))
    st_cut = st.tuples(st.just("st_cut"), st.none(), st.floats(0, 1))
    st_flip = st.tuples(st.just("st_flip"), st.floats(0, 1), st.binary(min_size=1, max_size=4))
    st_weight = st.tuples(st.just("st_weight"), st.integers(0, 20), hostile_floats(32))  # a tensor's first weight
    return st.lists(
        st.one_of(cfg_set, cfg_set, cfg_del, cfg_replace, st_set, st_set, st_drop, st_len, st_cut, st_flip, st_weight),
        min_size=1,
        max_size=3,
    )


def _apply_ops(folder: Path, ops: list) -> None:
    cfg_path, st_path = folder / "config.json", folder / "model.safetensors"
    for op, where, value in ops:
        if op.startswith("cfg"):
            try:
                cfg = json.loads(cfg_path.read_text())
            except ValueError:
                cfg = None
            if op == "cfg_replace":
                cfg_path.write_text(value, encoding="utf-8", errors="surrogatepass")
                continue
            if not isinstance(cfg, dict):
                continue
            key, _, sub = where.partition(".")
            holder = cfg.get(key) if sub else cfg
            name = sub or key
            if not isinstance(holder, dict):
                continue
            if op == "cfg_del":
                holder.pop(name, None)
            else:
                holder[name] = value
            cfg_path.write_text(json.dumps(cfg))
            continue
        raw = st_path.read_bytes()
        if op == "st_cut":
            st_path.write_bytes(raw[: int(len(raw) * value)])
            continue
        if op == "st_flip":
            at = 8 + int((len(raw) - 8) * where)
            st_path.write_bytes(raw[:at] + value + raw[at + len(value) :])
            continue
        if op == "st_len":
            st_path.write_bytes(struct.pack("<Q", value % 2**64) + raw[8:])
            continue
        try:
            n = struct.unpack("<Q", raw[:8])[0]
            table = json.loads(raw[8 : 8 + n])
            names = [k for k in table if k != "__metadata__"]
        except (ValueError, struct.error, TypeError, AttributeError):
            continue
        if not isinstance(table, dict) or not names:
            continue
        if op == "st_weight":
            entry = table[names[where % len(names)]]
            offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
            if (
                entry.get("dtype") == "F32"
                and isinstance(offsets, list)
                and offsets
                and type(offsets[0]) is int
                and 0 <= offsets[0] <= len(raw) - 8 - n - 4
            ):
                at = 8 + n + offsets[0]
                st_path.write_bytes(raw[:at] + struct.pack("<f", value) + raw[at + 4 :])
            continue
        if op == "st_drop":
            del table[names[where % len(names)]]
        else:
            i, fld = where
            entry = table[names[i % len(names)]]
            if isinstance(entry, dict):
                entry[fld] = value
        head = json.dumps(table).encode()
        head += b" " * (-len(head) % 8)
        st_path.write_bytes(struct.pack("<Q", len(head)) + head + raw[8 + n :])


def case_converter(work: Path, base: Path, target: Path, ops: list, loader: Loader) -> None:
    from engine_bridge.models import compat
    from engine_bridge.models.convert import ConversionError, convert_hf_drafter

    s = "converter"
    t0 = time.monotonic()
    folder = work / "hf"
    shutil.copytree(base, folder)
    _apply_ops(folder, ops)
    out = work / "out" / "d.gguf"
    what = f"ops {ops!r}"[:600]
    try:
        convert_hf_drafter(folder, target, out, "f16")
    except ConversionError as exc:
        if not str(exc).strip():
            fail(s, "tracebacks", f"{what}: a ConversionError without a message")
        if out.parent.exists() and any(out.parent.iterdir()):
            fail(s, "lost", f"{what}: refused ({exc}) but left {list(out.parent.iterdir())}")
        record(s, refused=True)
        return
    except Exception as exc:  # noqa: BLE001 - the property: ConversionError or a file
        fail(s, "tracebacks", f"{what}: {type(exc).__name__}: {exc}")
    if time.monotonic() - t0 > HANG_S:
        fail(s, "hangs", f"{what}: {time.monotonic() - t0:.0f} s")
    # what the converter wrote must be a file the pairing checks accept, of finite weights, and that runs
    from engine_bridge.models.convert_quant import decode
    from engine_bridge.models.gguf_header import read_header
    import numpy as np

    hdr = read_header(out)
    for name, t in hdr.tensors.items():
        if not np.isfinite(decode(hdr.tensor_bytes(name), t.ggml_type, t.shape)).all():
            fail(s, "bad_files", f"{what}: converted, but tensor {name} holds weights that are not finite")
    report = compat.check(target, out)
    if not report.ok:
        fail(
            s, "tracebacks", f"{what}: converted, but the checks FAIL the result: {[c.line() for c in report.failures]}"
        )
    ran = judge_load(s, loader.run(str(target), str(out)), what)
    record(s, refused=not ran)


# ------------------------------------------------------------------------------------------------
# surface 4: CLI arguments

#: command -> [(flag, kind)]; kind picks the values. Left out: commands that reach the network or
#: listen (pull, search, fetch-*, serve, rpc-*), that train or run long (train-drafter, bench,
#: calibrate), and --rpc (it connects wherever its text points).
CLI_COMMANDS = {
    "generate": [
        ("--target", "in"),
        ("--draft", "in"),
        ("--n-ctx", "int"),
        ("--ngl", "int"),
        ("--flash-attn", "word"),
        ("--kv-k", "word"),
        ("--kv-v", "word"),
        ("--draft-kv-k", "word"),
        ("--draft-kv-v", "word"),
        ("--adapter", "in"),
        ("--threads", "int"),
        ("--split-mode", "word"),
        ("--tensor-split", "text"),
        ("--main-gpu", "int"),
        ("--prompt", "text"),
        ("--prompt-file", "in"),
        ("--chat", None),
        ("--mode", "word"),
        ("--budget", "int"),
        ("--p-min", "float"),
        ("--max-tokens", "int"),
        ("--temp", "float"),
        ("--top-k", "int"),
        ("--top-p", "float"),
        ("--seed", "int"),
        ("--json", None),
        ("--no-check", None),
    ],
    "placement": [
        ("--target", "in"),
        ("--draft", "in"),
        ("--ngl", "int"),
        ("--n-ctx", "int"),
        ("--kv-k", "word"),
        ("--kv-v", "word"),
        ("--gpus-json", "in"),
        ("--json", None),
        ("--split-mode", "word"),
        ("--tensor-split", "text"),
        ("--main-gpu", "int"),
        ("--draft-main-gpu", "int"),
    ],
    "inspect": [("", "in"), ("--json", None)],
    "check": [
        ("", "in"),
        ("", "in"),
        ("--adapter", "in"),
        ("--kv-k", "word"),
        ("--kv-v", "word"),
        ("--flash-attn", "word"),
        ("--budget", "int"),
        ("--json", None),
    ],
    "convert": [("", "in"), ("--target", "in"), ("--out", "out"), ("--type", "word"), ("--force", None)],
    "quantize": [("", "in"), ("--type", "word"), ("--out", "out"), ("--force", None)],
    "library": [("", "word"), ("--json", None)],
}
WORDS = [
    "auto",
    "on",
    "off",
    "f16",
    "f32",
    "q8_0",
    "q4_0",
    "bf16",
    "q5_1",
    "iq4_nl",
    "chain",
    "tree",
    "ar",
    "layer",
    "row",
    "none",
    "list",
    "scan",
    "forget",
    "",
    "-",
    "--",
    "-h",
    "CHAIN",
]
#: input paths by name; made in the case's folder (``_cli_paths``)
IN_PATHS = (
    "target",
    "drafter",
    "missing",
    "folder",
    "empty",
    "garbage",
    "truncated",
    "hf",
    "json",
    "/dev/null",
    "/dev/zero",
    "fifo",
    "prompt_nul",
)


#: a command line that works, most cases start from it and add hostile flags (a later flag wins)
CLI_BASE = {
    "generate": [
        "--target",
        "@target",
        "--draft",
        "@drafter",
        "--prompt",
        "Hello",
        "--max-tokens",
        "4",
        "--n-ctx",
        "256",
        "--threads",
        "1",
    ],
    "placement": ["--target", "@target", "--draft", "@drafter"],
    "inspect": ["@target"],
    "check": ["@target", "@drafter"],
    "convert": ["@hf", "--target", "@target", "--out", "@new.gguf"],
    "quantize": ["@drafter", "--type", "q8_0", "--out", "@new.gguf"],
    "library": ["list"],
}


def cli_argvs():
    def value(kind):
        if kind == "in":
            return st.one_of(
                st.sampled_from(IN_PATHS).map(lambda p: ("path", p)),
                st.sampled_from(["target", "drafter"]).map(lambda p: ("scaled", p)),
                hostile_text(12).map(lambda t: ("raw", t)),
            )
        if kind == "out":
            return st.sampled_from(
                [
                    "new.gguf",
                    "sub/dir/new.gguf",
                    "folder",
                    "target",
                    "x" * 300 + ".gguf",
                    "garbage/under_a_file.gguf",
                    "new\nline.gguf",
                    ".hidden.gguf",
                ]
            ).map(lambda p: ("out", p))
        if kind == "int":
            return st.one_of(
                st.integers(0, 16).map(str),
                hostile_ints().map(str),
                st.sampled_from(["0x10", "1e3", "", " 5", "-0", "nan", "١٢"]),
                st.integers(-(10**20), 10**20).map(str),
            ).map(lambda t: ("raw", t))
        if kind == "float":
            return st.one_of(
                st.sampled_from(["0", "0.5", "1", "0.9"]),
                hostile_floats(64).map(repr),
                st.sampled_from(["1e999", "-0", "", "0x1p3", "½"]),
            ).map(lambda t: ("raw", t))
        if kind == "word":
            return st.one_of(st.sampled_from(WORDS), hostile_text(8)).map(lambda t: ("raw", t))
        return st.one_of(st.sampled_from(["Hello", "def f(x):", "a b c"]), hostile_text(30)).map(lambda t: ("raw", t))

    def for_command(cmd):
        specs = CLI_COMMANDS[cmd]

        def items(with_base):
            usable = [sp for sp in specs if sp[0] or not with_base]  # positionals only without the base
            item = st.sampled_from(usable).flatmap(
                lambda sp: st.tuples(st.just(sp[0]), value(sp[1]) if sp[1] else st.none())
            )
            junk = st.tuples(
                st.just(""),
                st.one_of(hostile_text(10), st.sampled_from(["--nope", "-x", "--json=1"])).map(lambda t: ("raw", t)),
            )
            return st.lists(st.one_of(item, item, item, item, junk), max_size=6)

        return st.booleans().flatmap(
            lambda with_base: st.tuples(st.just(cmd), st.just(CLI_BASE[cmd] if with_base else []), items(with_base))
        )

    return st.sampled_from(sorted(CLI_COMMANDS)).flatmap(for_command)


def _cli_paths(work: Path, target: Path, drafter: Path, hf: Path) -> dict:
    paths = {}
    for name, src in (("target", target), ("drafter", drafter)):
        p = work / f"{name}.gguf"
        os.link(src, p)  # a replace by the CLI swaps the link, never the shared file
        paths[name] = p
    (work / "folder").mkdir()
    (work / "empty").write_bytes(b"")
    (work / "garbage").write_bytes(b"GGUF\x03\x00\x00\x00" + os.urandom(40))
    (work / "truncated").write_bytes(target.read_bytes()[:4096])
    (work / "json").write_text('{"gpus": [{"name": 1}], "x": NaN}')
    (work / "prompt_nul").write_bytes(b"hi\x00\xff\xfe there")
    os.mkfifo(work / "fifo")
    shutil.copytree(hf, work / "hf")
    for name in ("missing", "folder", "empty", "garbage", "truncated", "hf", "json", "fifo", "prompt_nul"):
        paths[name] = work / name
    return paths


def _argv(cmd: str, base: list, items: list, paths: dict, work: Path) -> list[str]:
    argv = [cmd] + [
        (str(paths[b[1:]]) if b[1:] in paths else str(work / b[1:])) if b.startswith("@") else b for b in base
    ]
    for flag, val in items:
        if flag:
            argv.append(flag)
        if val is None:
            continue
        kind, v = val
        if kind == "path":
            argv.append(str(paths.get(v, v)))
        elif kind == "scaled":
            argv.append(f"{paths[v]}:{v and 'nan'}")
        elif kind == "out":
            argv.append(str(paths[v]) if v in paths else str(work / v))
        else:
            argv.append(v)
    return argv


def case_cli(work: Path, target: Path, drafter: Path, hf: Path, cmd: str, base: list, items: list) -> None:
    import contextlib
    import io

    from engine_bridge.cli import main

    s = "cli"
    paths = _cli_paths(work, target, drafter, hf)
    argv = _argv(cmd, base, items, paths, work)
    what = f"argv {argv!r}"[:600]
    out, err = io.StringIO(), io.StringIO()
    t0 = time.monotonic()
    old_stdin = sys.stdin
    sys.stdin = io.StringIO("stdin text <|im_end|>")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:  # argparse: usage + "error: ..." and 2, or --help and 0
                code = exc.code if isinstance(exc.code, int) else 2
    except Exception as exc:  # noqa: BLE001 - the property: an exit code, never a traceback
        fail(s, "tracebacks", f"{what}: {type(exc).__name__}: {exc}")
    finally:
        sys.stdin = old_stdin
    elapsed = time.monotonic() - t0
    text = err.getvalue()
    if elapsed > HANG_S:
        fail(s, "hangs", f"{what}: {elapsed:.0f} s")
    if "Traceback" in text:
        fail(s, "tracebacks", f"{what}: {text[-600:]}")
    if code not in (0, 1, 2):
        fail(s, "tracebacks", f"{what}: exit code {code!r}")
    if code != 0:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        # our own refusals are one line; argparse's are its usage and one "error:" line; check's
        # report and a refused pair's failed checks are lines of their own after a headline
        # check's FAIL is its report on stdout (exit 1: not compatible, 2: unreadable), check by check
        said_fail = cmd == "check" and code in (1, 2) and ("FAIL  " in out.getvalue() or '"FAIL"' in out.getvalue())
        if not lines and not said_fail:
            fail(s, "tracebacks", f"{what}: exit {code} with nothing on stderr (stdout {out.getvalue()[-300:]!r})")
    record(s, refused=code != 0)


# ------------------------------------------------------------------------------------------------
# surface 5: prompts


def chat_messages():
    role = st.sampled_from(["user", "user", "assistant", "system", "tool", "", "<|im_start|>", "user\n"])
    content = hostile_text(60)
    return st.lists(st.fixed_dictionaries({"role": role, "content": content}), min_size=1, max_size=4)


def control_ids(eng) -> set[int]:
    import llama_cpp

    v = eng.target.vocab
    return {
        i
        for i in range(eng.target.n_vocab)
        if llama_cpp.llama_vocab_get_attr(v, i) & llama_cpp.LLAMA_TOKEN_ATTR_CONTROL
    }


def control_texts(eng) -> list[str]:
    return [eng.target.token_text(i) for i in sorted(control_ids(eng))]


def case_prompt(eng, store_path: Path, messages: list, add_generation_prompt: bool, control: set[int]) -> None:
    from app.chat.conversations import ConversationStore, Message, StoreError
    from engine_bridge.common.errors import EngineError
    from engine_bridge.runtime.chat_template import ChatTemplateError
    from engine_bridge.runtime.config import GenerationSettings

    s = "prompts"
    what = f"messages {messages!r}"[:600]
    t0 = time.monotonic()
    # the store keeps each message exactly as typed, or refuses it by name; it never loses one quietly
    store = ConversationStore(store_path)
    try:
        cid = store.create("fuzz")
        taken = []
        for m in messages:
            try:
                store.add(cid, Message(role=m["role"], content=m["content"]))
                taken.append((m["role"], m["content"]))
            except StoreError as exc:  # a named refusal: the window keeps the text and says why
                if not str(exc).strip():
                    fail(s, "lost", f"{what}: StoreError without a reason")
        kept = [(m.role, m.content) for m in store.messages(cid)]
        if kept != taken:
            fail(s, "lost", f"{what}: the store took {taken!r} and gave back {kept!r}")
    except CaseFailure:
        raise
    except Exception as exc:  # noqa: BLE001 - a message neither kept nor refused by name
        fail(s, "lost", f"{what}: the store: {type(exc).__name__}: {exc}")
    finally:
        store.close()
    try:
        tokens = eng.tokenize_chat(messages, add_generation_prompt=add_generation_prompt)
    except (ChatTemplateError, EngineError, ValueError) as exc:
        if type(exc) is UnicodeEncodeError or not str(exc).strip():
            fail(s, "tracebacks", f"{what}: refused without our own message: {type(exc).__name__}: {exc}")
        record(s, refused=True)
        return
    except Exception as exc:  # noqa: BLE001
        fail(s, "tracebacks", f"{what}: {type(exc).__name__}: {exc}")
    # only the template makes control tokens: the same conversation with plain text has as many
    plain = [{**m, "content": "x"} for m in messages]
    want = sum(t in control for t in eng.tokenize_chat(plain, add_generation_prompt=add_generation_prompt))
    got = sum(t in control for t in tokens)
    if got != want:
        fail(s, "tracebacks", f"{what}: {got} control tokens, the template alone makes {want}: a message forged one")
    eng.reset()
    try:
        res = eng.generate(tokens, GenerationSettings(mode="chain", max_tokens=4))
    except (EngineError, ValueError) as exc:
        if not str(exc).strip():
            fail(s, "tracebacks", f"{what}: generate refused without a message: {type(exc).__name__}")
        record(s, refused=True)
        return
    except Exception as exc:  # noqa: BLE001
        fail(s, "tracebacks", f"{what}: generate: {type(exc).__name__}: {exc}")
    if time.monotonic() - t0 > HANG_S:
        fail(s, "hangs", f"{what}: {time.monotonic() - t0:.0f} s")
    if res.summary is None or res.summary.finish_reason not in ("eog", "max_tokens", "context_full"):
        fail(s, "tracebacks", f"{what}: finished {res.summary and res.summary.finish_reason!r}")
    record(s, refused=False)


if __name__ == "__main__":
    if sys.argv[1:] == ["loader"]:
        loader_child()
