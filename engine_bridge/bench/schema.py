"""The bench report's schema (``dflash-studio-bench/1``) and a small validator.

The schema is written in a subset of JSON Schema (type, required, properties, items, enum,
minimum, additionalProperties) so it can be published as is, but validated here without the
``jsonschema`` package: reports are checked before they are written, on every machine.

Field names follow llama-bench where one exists (build_commit, gpu_info, model_filename,
model_size, n_params, type_k, type_v, n_gpu_layers, flash_attn, n_prompt, n_gen, avg_ts,
stddev_ts, samples_ts), so tools that read llama-bench JSON read these rows too. In a row,
n_prompt is the suite's prompt tokens and n_gen its generated tokens, per repetition.
"""

from __future__ import annotations

from ..runtime.records import PHASES

SCHEMA_ID = "dflash-studio-bench/1"

NUM = {"type": "number"}
OPT_NUM = {"type": ["number", "null"]}
INT = {"type": "integer", "minimum": 0}
STR = {"type": "string"}
NUMS = {"type": "array", "items": NUM}

STAT = {
    "type": ["object", "null"],
    "required": ["n", "mean", "sd", "ci_lo", "ci_hi", "samples"],
    "properties": {
        "n": {"type": "integer", "minimum": 1},
        "mean": NUM,
        "sd": {"type": "number", "minimum": 0},
        "ci_lo": NUM,
        "ci_hi": NUM,
        "samples": NUMS,
    },
}
METRIC_KEYS = ["ts", "ttft_ms", "prefill_ts", "acceptance_rate", "mean_commit_len"] + [f"phase_{p}_ms" for p in PHASES]
STATS = {"type": "object", "required": METRIC_KEYS, "properties": {k: STAT for k in METRIC_KEYS}}

LLAMA_BENCH_FIELDS = {
    "build_commit": STR,
    "gpu_info": STR,
    "model_filename": STR,
    "model_size": INT,
    "n_params": INT,
    "type_k": STR,
    "type_v": STR,
    "n_gpu_layers": {"type": "integer"},
    "flash_attn": STR,
    "n_prompt": INT,
    "n_gen": INT,
    "avg_ts": OPT_NUM,
    "stddev_ts": OPT_NUM,
    "samples_ts": NUMS,
}
DFLASH_FIELDS = {
    "draft_filename": STR,
    "budget": INT,
    "verify_mode": {"enum": ["ar", "chain", "tree", "auto"]},
    "draft_variant": STR,
    "draft_n": INT,
    "draft_n_accepted": INT,
    "acceptance_rate": OPT_NUM,
    "mean_commit_len": OPT_NUM,
    **{f"phase_{p}_ms": OPT_NUM for p in PHASES},
}

ROW = {
    "type": "object",
    "required": [
        "id",
        "label",
        "kind",
        "status",
        "error",
        "notes",
        "ar_row",
        "n_reps",
        "ts_ci_lo",
        "ts_ci_hi",
        "ttft_ms",
        "prefill_ts",
        "speedup",
        "speedup_ci_lo",
        "speedup_ci_hi",
        "lossless",
        "lossless_mismatches",
        "commit_hist",
        "delta_ts",
        "delta_flag",
        "is_baseline",
        "stats",
        *LLAMA_BENCH_FIELDS,
        *DFLASH_FIELDS,
    ],
    "properties": {
        "id": STR,
        "label": STR,
        "kind": {"enum": ["ar", "spec"]},
        "status": {"enum": ["ok", "failed", "cancelled", "pending"]},
        "error": STR,
        "notes": {"type": "array", "items": STR},
        "ar_row": STR,
        "n_reps": INT,
        "ts_ci_lo": OPT_NUM,
        "ts_ci_hi": OPT_NUM,
        "ttft_ms": OPT_NUM,
        "prefill_ts": OPT_NUM,
        "speedup": OPT_NUM,
        "speedup_ci_lo": OPT_NUM,
        "speedup_ci_hi": OPT_NUM,
        "lossless": {"type": ["boolean", "null"]},
        "lossless_mismatches": {"type": "array", "items": STR},
        "commit_hist": {"type": "object", "additionalProperties": INT},
        "delta_ts": OPT_NUM,
        "delta_flag": {"type": ["string", "null"]},
        "is_baseline": {"type": "boolean"},
        "stats": STATS,
        **LLAMA_BENCH_FIELDS,
        **DFLASH_FIELDS,
        # auto rows: tok/s over the best fixed row of the same load (AR or a chain/tree budget), and its id
        "auto_vs_best": OPT_NUM,
        "best_fixed": {"type": ["string", "null"]},
    },
}

PROMPT_ROW = {
    "type": "object",
    "required": [
        "row_id",
        "row_label",
        "prompt_id",
        "n_reps",
        "n_prompt",
        "n_gen",
        "avg_ts",
        "stddev_ts",
        "samples_ts",
        "ts_ci_lo",
        "ts_ci_hi",
        "ttft_ms",
        "prefill_ts",
        "acceptance_rate",
        "mean_commit_len",
        "speedup",
        "speedup_ci_lo",
        "speedup_ci_hi",
        "lossless",
        "stats",
    ],
    "properties": {
        "row_id": STR,
        "row_label": STR,
        "prompt_id": STR,
        "n_reps": {"type": "integer", "minimum": 1},
        "n_prompt": INT,
        "n_gen": INT,
        "avg_ts": NUM,
        "stddev_ts": NUM,
        "samples_ts": NUMS,
        "ts_ci_lo": NUM,
        "ts_ci_hi": NUM,
        "ttft_ms": NUM,
        "prefill_ts": NUM,
        "acceptance_rate": OPT_NUM,
        "mean_commit_len": NUM,
        "speedup": OPT_NUM,
        "speedup_ci_lo": OPT_NUM,
        "speedup_ci_hi": OPT_NUM,
        "lossless": {"type": ["boolean", "null"]},
        "stats": STATS,
        # the smallest top-2 margin of the target where a greedy run parted from AR (None: never)
        "divergence_margin": OPT_NUM,
    },
}

RUN = {
    "type": "object",
    "required": [
        "row_id",
        "prompt_id",
        "rep",
        "seed",
        "n_prompt",
        "n_gen",
        "n_steps",
        "draft_n",
        "draft_n_accepted",
        "t_prefill",
        "t_first_token",
        "t_generate",
        "ts",
        "finish_reason",
    ],
    "properties": {
        "row_id": STR,
        "prompt_id": STR,
        "rep": INT,
        "seed": {"type": "integer"},
        "n_prompt": INT,
        "n_gen": INT,
        "n_steps": INT,
        "draft_n": INT,
        "draft_n_accepted": INT,
        "t_prefill": NUM,
        "t_first_token": NUM,
        "t_generate": NUM,
        "ts": NUM,
        "finish_reason": STR,
        # the target's decodes after prefill that kept llama.cpp's graph (RunSummary.graphs_reused)
        "graphs_reused": {"type": ["integer", "null"], "minimum": 0},
        # where a greedy run parted from AR (engine_bridge.runtime.near_tie.Parting), None if it did not
        "divergence": {
            "type": ["object", "null"],
            "properties": {
                "index": INT,
                "margin": OPT_NUM,
                "tolerance": NUM,
                "near_tie": {"type": "boolean"},
                # the target's AR-minus-speculative logit gap per
                # replayed batch shape (near_tie.replay_gaps)
                "shape_gaps": {"type": ["object", "null"], "additionalProperties": NUM},
                "picked_by_target": {"type": "boolean"},
                "within_shape_spread": {"type": "boolean"},
            },
        },
    },
}

REPORT_SCHEMA = {
    "$id": SCHEMA_ID,
    "type": "object",
    "required": [
        "schema",
        "created",
        "duration_s",
        "status",
        "tool",
        "machine",
        "build",
        "settings",
        "rows",
        "prompts",
        "runs",
    ],
    "properties": {
        "schema": {"enum": [SCHEMA_ID]},
        "created": STR,
        "duration_s": NUM,
        "status": {"enum": ["complete", "cancelled"]},
        "tool": {"type": "object", "required": ["name", "version"]},
        "machine": {
            "type": "object",
            "required": ["os", "cpu", "n_cpus", "memory_bytes", "gpus", "gpu_info", "driver"],
            "properties": {
                "gpus": {"type": "array", "items": {"type": "object"}},
                "gpu_info": STR,
                "driver": STR,
                "n_cpus": INT,
            },
        },
        "build": {
            "type": "object",
            "required": ["build_commit", "llama_cpp_python", "backend", "system_info"],
            "properties": {"build_commit": STR},
        },
        "settings": {
            "type": "object",
            "required": [
                "suite",
                "reps",
                "max_tokens",
                "budget",
                "verify_mode",
                "temperature",
                "seeds",
                "sweep",
                "engine",
                "baseline_row",
                "statistics",
            ],
            "properties": {
                "reps": {"type": "integer", "minimum": 1},
                "seeds": {"type": "array"},
                "engine": {
                    "type": "object",
                    "required": ["target", "draft", "n_ctx", "n_gpu_layers", "flash_attn", "target_kv", "draft_kv"],
                },
                "suite": {"type": "object", "required": ["name", "source", "sha256", "n_prompts"]},
            },
        },
        "rows": {"type": "array", "items": ROW},
        "prompts": {"type": "array", "items": PROMPT_ROW},
        "runs": {"type": "array", "items": RUN},
    },
}


class ReportSchemaError(ValueError):
    """A report that does not match the schema; ``errors`` lists every problem with its path."""

    def __init__(self, errors: list[str]):
        super().__init__(
            "bench report does not match its schema: "
            + "; ".join(errors[:10])
            + (f" (and {len(errors) - 10} more)" if len(errors) > 10 else "")
        )
        self.errors = errors


_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    # bool is an int in Python but not a number in JSON
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
}


def validate(value, schema: dict = REPORT_SCHEMA, path: str = "$") -> list[str]:
    """Every way ``value`` breaks ``schema`` (empty when it conforms)."""
    errors: list[str] = []
    types = schema.get("type")
    if types is not None:
        types = [types] if isinstance(types, str) else types
        if not any(_TYPES[t](value) for t in types):
            return [f"{path}: expected {' or '.join(types)}, got {type(value).__name__}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: {value!r} is not one of {schema['enum']}")
    if "minimum" in schema and _TYPES["number"](value) and value < schema["minimum"]:
        errors.append(f"{path}: {value} is below {schema['minimum']}")
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                errors.append(f"{path}: missing {key!r}")
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key, v in value.items():
            if key in props:
                errors += validate(v, props[key], f"{path}.{key}")
            elif isinstance(extra, dict):
                errors += validate(v, extra, f"{path}.{key}")
            elif extra is False:
                errors.append(f"{path}: unexpected {key!r}")
    if isinstance(value, list) and "items" in schema:
        for i, v in enumerate(value):
            errors += validate(v, schema["items"], f"{path}[{i}]")
    return errors


def check_report(report: dict) -> dict:
    """Returns ``report`` unchanged, or raises ReportSchemaError."""
    errors = validate(report)
    if errors:
        raise ReportSchemaError(errors)
    return report
