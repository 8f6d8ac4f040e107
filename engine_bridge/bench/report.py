"""Turns a BenchResult into the report (a JSON-ready dict) and renders it as JSON, CSV, Markdown.

Every export renders from the one report dict, and the Markdown / HTML tables come from the
same table functions, so the formats cannot disagree. The HTML page lives in report_html, which
uses the tables here (never the other way round); export writes the files.

Aggregation (per row, per repetition, over the whole suite; a repetition counts only when every
prompt of it finished, so a cancelled run never mixes half a repetition into the statistics):

* tok/s            = generated tokens / generation time (token-weighted, like a throughput meter)
* TTFT             = mean over prompts of the time from request to first token
* prefill tok/s    = prompt tokens / prefill time
* acceptance rate  = accepted / drafted;  mean commit length = generated / steps
* phase times      = mean over every step of the repetition, in milliseconds

Each quantity then gets mean, sample sd and a bootstrap 95 % interval over the repetitions
(``stats``). Per-prompt figures do the same over that prompt's repetitions.
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import json
import math
from collections import Counter

from . import stats as st
from .runner import BenchResult, BenchRow, Measurement, variant_label
from .schema import SCHEMA_ID, check_report
from ..runtime.records import PHASES

#: Per-repetition quantities: (report key, unit shown in tables).
METRICS = {"ts": "tok/s", "ttft_ms": "ms", "prefill_ts": "tok/s", "acceptance_rate": "", "mean_commit_len": "tok"} | {
    f"phase_{p}_ms": "ms" for p in PHASES
}
SPEC_ONLY = ("acceptance_rate",)


# -- aggregation ----------------------------------------------------------------------------------
def _phase_ms(ms: list[Measurement], phase: str) -> float:
    steps = sum(m.summary["n_steps"] for m in ms)
    if not steps:
        return 0.0
    return 1000.0 * sum(m.phase_means[phase] * m.summary["n_steps"] for m in ms) / steps


def aggregate(ms: list[Measurement], spec_row: bool) -> dict[str, float | None]:
    """One value per metric for a set of measurements (one repetition, or one prompt run)."""
    s = [m.summary for m in ms]
    gen_t = sum(x["t_generate"] for x in s)
    pre_t = sum(x["t_prefill"] for x in s)
    steps = sum(x["n_steps"] for x in s)
    drafted = sum(x["n_drafted"] for x in s)
    out = {
        "ts": sum(x["n_generated"] for x in s) / gen_t if gen_t > 0 else 0.0,
        "ttft_ms": 1000.0 * st.mean([x["t_first_token"] for x in s]),
        "prefill_ts": sum(x["n_prompt"] - x["n_prompt_reused"] for x in s) / pre_t if pre_t > 0 else 0.0,
        "acceptance_rate": (sum(x["n_accepted"] for x in s) / drafted if drafted else 0.0) if spec_row else None,
        "mean_commit_len": sum(x["n_generated"] for x in s) / steps if steps else 0.0,
    }
    for p in PHASES:
        out[f"phase_{p}_ms"] = _phase_ms(ms, p)
    return out


def _complete_reps(result: BenchResult, row_id: str) -> dict[int, list[Measurement]]:
    n = len(result.spec.suite.prompts)
    by_rep: dict[int, list[Measurement]] = {}
    for m in result.of_row(row_id):
        by_rep.setdefault(m.rep, []).append(m)
    return {r: ms for r, ms in sorted(by_rep.items()) if len(ms) == n}


def _stats_block(values: dict[str, list[float | None]]) -> dict[str, dict | None]:
    out = {}
    for k, xs in values.items():
        s = st.summarize([x for x in xs if x is not None])
        out[k] = s.to_dict() if s else None
    return out


def _mean_of(stats: dict, key: str):
    s = stats.get(key)
    return s["mean"] if s else None


def _lossless(result: BenchResult, row: BenchRow, prompt_id: str | None = None) -> tuple[bool | None, list[str]]:
    """Speculative tokens identical to the AR tokens for the same prompt and seed (greedy only),
    or parting from them only at a near-tie of the target's logits (``Measurement.divergence``).

    Returns (verdict, mismatching prompt ids); None when it cannot be judged (sampling, or no
    pair of finished runs to compare).
    """
    if row.kind != "spec" or result.spec.temperature > 0:
        return None, []
    ar = {(m.prompt_id, m.rep): m.tokens for m in result.of_row(row.ar_row)}
    bad, compared = [], 0
    for m in result.of_row(row.id):
        if prompt_id is not None and m.prompt_id != prompt_id:
            continue
        ref = ar.get((m.prompt_id, m.rep))
        if ref is None:
            continue
        compared += 1
        # a parting at a near-tie of the target's logits is not a loss (engine_bridge.runtime.near_tie)
        if ref != m.tokens and not (m.divergence or {}).get("near_tie") and m.prompt_id not in bad:
            bad.append(m.prompt_id)
    return (None if compared == 0 else not bad), bad


def _ts_samples(ms: list[Measurement]) -> list[float]:
    return [m.summary["n_generated"] / m.summary["t_generate"] if m.summary["t_generate"] > 0 else 0.0 for m in ms]


# -- the report -----------------------------------------------------------------------------------
def build_report(result: BenchResult, baseline: str | int | None = None) -> dict:
    """The report dict (schema ``dflash-studio-bench/1``), validated before it is returned.

    ``baseline`` picks the row every delta is measured against: a row id, a row label or an index
    into the rows; by default the first row (the autoregressive baseline).
    """
    spec = result.spec
    rows_out, prompts_out = [], []
    rep_values: dict[str, dict[str, list]] = {}
    for row in result.rows:
        reps = _complete_reps(result, row.id)
        per_rep = [aggregate(ms, row.kind == "spec") for ms in reps.values()]
        values = {k: [a[k] for a in per_rep] for k in METRICS}
        rep_values[row.id] = values
        rows_out.append(_row_dict(result, row, reps, values))
    for row, rd in zip(result.rows, rows_out):
        if row.kind == "spec":
            # speed-up against the AR row of the same load (same K/V types, same engine)
            sp = st.ratio_ci(rep_values[row.id]["ts"], rep_values.get(row.ar_row, {}).get("ts", []))
            rd.update(
                speedup=sp.ratio if sp else None,
                speedup_ci_lo=sp.ci_lo if sp else None,
                speedup_ci_hi=sp.ci_hi if sp else None,
            )
        prompts_out.extend(_prompt_dicts(result, row))
    _auto_against_best(rows_out)
    base = _pick_baseline(rows_out, baseline)
    for rd in rows_out:
        rd["is_baseline"] = base is not None and rd["id"] == base["id"]
        bs, rs = (base or {}).get("stats", {}).get("ts"), rd["stats"].get("ts")
        if rd["is_baseline"]:
            rd["delta_ts"], rd["delta_flag"] = (0.0, "baseline") if rs else (None, None)
        elif bs and rs:
            delta, flag = st.flag_delta(st.Summary(**_summary_args(rs)), st.Summary(**_summary_args(bs)))
            rd["delta_ts"], rd["delta_flag"] = delta, flag
        else:
            rd["delta_ts"], rd["delta_flag"] = None, None
    report = {
        "schema": SCHEMA_ID,
        "created": _dt.datetime.fromtimestamp(result.started_at, _dt.timezone.utc).isoformat(timespec="seconds"),
        "duration_s": max(0.0, (result.finished_at or result.started_at) - result.started_at),
        "status": "cancelled" if result.cancelled else "complete",
        "tool": {"name": "dflash-studio", "version": _tool_version()},
        "machine": result.machine,
        "build": result.build,
        "settings": spec.to_dict()
        | {
            "baseline_row": base["id"] if base else None,
            "statistics": {
                "interval": "percentile bootstrap of the mean",
                "level": st.LEVEL,
                "n_boot": st.N_BOOT,
                "seed": st.BOOT_SEED,
                "sd": "sample (n - 1)",
                "delta_rule": f"'{st.REAL}' when |delta| > sqrt(sd_row^2 + sd_baseline^2)",
            },
        },
        "rows": rows_out,
        "prompts": prompts_out,
        "runs": [_run_dict(m) for m in result.measurements],
    }
    return check_report(_finite(report))


def _auto_against_best(rows: list[dict]) -> None:
    """Each auto row's tok/s over the best fixed configuration measured beside it (the same AR row:
    the same load), AR included: auto should match whichever pays, or lose little to it."""
    for r in rows:
        r["auto_vs_best"], r["best_fixed"] = None, None
    for r in rows:
        if r["verify_mode"] != "auto" or not r["avg_ts"]:
            continue
        fixed = [
            f
            for f in rows
            if f["verify_mode"] != "auto" and f["avg_ts"] and (f["ar_row"] == r["ar_row"] or f["id"] == r["ar_row"])
        ]
        if fixed:
            best = max(fixed, key=lambda f: f["avg_ts"])
            r["auto_vs_best"], r["best_fixed"] = r["avg_ts"] / best["avg_ts"], best["id"]


def auto_table(report: dict) -> tuple[list[str], list[list[str]]]:
    """auto's rows against the best fixed row of their load (empty without an auto row)."""
    by_id = {r["id"]: r for r in report["rows"]}
    rows = [
        [
            r["id"],
            r["label"],
            fmt(r["avg_ts"]),
            by_id[r["best_fixed"]]["label"],
            fmt(by_id[r["best_fixed"]]["avg_ts"]),
            fmt(r["auto_vs_best"], 3),
            fmt(r["speedup"], 3),
        ]
        for r in report["rows"]
        if r.get("auto_vs_best") is not None
    ]
    return ["row", "configuration", "tok/s", "best fixed", "its tok/s", "auto ÷ best fixed", "auto ÷ AR"], rows


def _tool_version() -> str:
    # read from the installed distribution, not engine_bridge.__init__: under some test runners
    # ``engine_bridge`` resolves as a namespace package whose __init__ never ran
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dflash-studio")
    except PackageNotFoundError:
        return "unknown"


def _summary_args(d: dict) -> dict:
    return dict(n=d["n"], mean=d["mean"], sd=d["sd"], ci_lo=d["ci_lo"], ci_hi=d["ci_hi"], samples=tuple(d["samples"]))


def _pick_baseline(rows: list[dict], baseline) -> dict | None:
    if not rows:
        return None
    if baseline is None:
        return rows[0]
    if isinstance(baseline, int) or (isinstance(baseline, str) and baseline.isdigit()):
        i = int(baseline)
        if not 0 <= i < len(rows):
            raise ValueError(f"baseline row {i} out of range (0..{len(rows) - 1})")
        return rows[i]
    for r in rows:
        if baseline in (r["id"], r["label"]):
            return r
    raise ValueError(f"no row {baseline!r}; rows: {', '.join(r['id'] for r in rows)}")


def _row_dict(result: BenchResult, row: BenchRow, reps: dict[int, list[Measurement]], values: dict[str, list]) -> dict:
    spec = result.spec
    e = spec.engine
    stats = _stats_block(values)
    first = next(iter(reps.values()), [])
    per_rep_sum = lambda key: round(st.mean([sum(m.summary[key] for m in ms) for ms in reps.values()])) if reps else 0
    all_ms = result.of_row(row.id)
    hist = Counter(c for m in all_ms for c in m.commit_lens)
    lossless, bad = _lossless(result, row)
    ts = stats["ts"]
    model = row.model or {}
    return {
        "id": row.id,
        "label": row.label,
        "kind": row.kind,
        "status": row.status,
        "error": row.error,
        "notes": list(row.notes),
        "ar_row": row.ar_row,
        "n_reps": len(reps),
        # llama-bench names
        "build_commit": result.build.get("build_commit", "unknown"),
        "gpu_info": result.machine.get("gpu_info", ""),
        "model_filename": model.get("model_filename", e.target.name),
        "model_size": model.get("model_size", 0),
        "n_params": model.get("n_params", 0),
        "type_k": row.target_kv.k,
        "type_v": row.target_kv.v,
        "n_gpu_layers": e.n_gpu_layers,
        "flash_attn": e.flash_attn,
        "n_prompt": sum(m.summary["n_prompt"] for m in first),
        "n_gen": per_rep_sum("n_generated"),
        "avg_ts": ts["mean"] if ts else None,
        "stddev_ts": ts["sd"] if ts else None,
        "samples_ts": list(ts["samples"]) if ts else [],
        # DFlash
        "ts_ci_lo": ts["ci_lo"] if ts else None,
        "ts_ci_hi": ts["ci_hi"] if ts else None,
        "draft_filename": model.get("draft_filename", e.draft.name if e.draft else "") if row.kind == "spec" else "",
        "budget": row.budget,
        "p_min": row.p_min if row.p_min is not None else (result.spec.p_min if row.kind == "spec" else 0.0),
        "verify_mode": row.verify_mode,
        "draft_variant": variant_label(row.draft_variant) if row.kind == "spec" else "",
        "draft_n": per_rep_sum("n_drafted"),
        "draft_n_accepted": per_rep_sum("n_accepted"),
        "acceptance_rate": _mean_of(stats, "acceptance_rate"),
        "mean_commit_len": _mean_of(stats, "mean_commit_len"),
        "ttft_ms": _mean_of(stats, "ttft_ms"),
        "prefill_ts": _mean_of(stats, "prefill_ts"),
        **{f"phase_{p}_ms": _mean_of(stats, f"phase_{p}_ms") for p in PHASES},
        "speedup": None,
        "speedup_ci_lo": None,
        "speedup_ci_hi": None,
        "lossless": lossless,
        "lossless_mismatches": bad,
        "commit_hist": {str(k): hist[k] for k in sorted(hist)},
        "stats": stats,
    }


def _prompt_dicts(result: BenchResult, row: BenchRow) -> list[dict]:
    out = []
    ar_ms = result.of_row(row.ar_row)
    for p in result.spec.suite.prompts:
        ms = [m for m in result.of_row(row.id) if m.prompt_id == p.id]
        if not ms:
            continue
        vals = [aggregate([m], row.kind == "spec") for m in ms]
        stats = _stats_block({k: [v[k] for v in vals] for k in METRICS})
        assert stats["ts"] is not None  # every measurement has a tok/s
        d = {
            "row_id": row.id,
            "row_label": row.label,
            "prompt_id": p.id,
            "n_reps": len(ms),
            "n_prompt": ms[0].summary["n_prompt"],
            "n_gen": round(st.mean([m.summary["n_generated"] for m in ms])),
            "avg_ts": stats["ts"]["mean"],
            "stddev_ts": stats["ts"]["sd"],
            "samples_ts": list(stats["ts"]["samples"]),
            "ts_ci_lo": stats["ts"]["ci_lo"],
            "ts_ci_hi": stats["ts"]["ci_hi"],
            "ttft_ms": _mean_of(stats, "ttft_ms"),
            "prefill_ts": _mean_of(stats, "prefill_ts"),
            "acceptance_rate": _mean_of(stats, "acceptance_rate"),
            "mean_commit_len": _mean_of(stats, "mean_commit_len"),
            "speedup": None,
            "speedup_ci_lo": None,
            "speedup_ci_hi": None,
            "lossless": None,
            "stats": stats,
        }
        if row.kind == "spec":
            sp = st.ratio_ci(_ts_samples(ms), _ts_samples([m for m in ar_ms if m.prompt_id == p.id]))
            if sp:
                d.update(speedup=sp.ratio, speedup_ci_lo=sp.ci_lo, speedup_ci_hi=sp.ci_hi)
            d["lossless"] = _lossless(result, row, p.id)[0]
            margins = [m.divergence["margin"] for m in ms if m.divergence and m.divergence["margin"] is not None]
            d["divergence_margin"] = min(margins) if margins else None
        out.append(d)
    return out


def _run_dict(m: Measurement) -> dict:
    s = m.summary
    return {
        "row_id": m.row_id,
        "prompt_id": m.prompt_id,
        "rep": m.rep,
        "seed": m.seed,
        "n_prompt": s["n_prompt"],
        "n_gen": s["n_generated"],
        "n_steps": s["n_steps"],
        "draft_n": s["n_drafted"],
        "draft_n_accepted": s["n_accepted"],
        "t_prefill": s["t_prefill"],
        "t_first_token": s["t_first_token"],
        "t_generate": s["t_generate"],
        "ts": s["tok_per_s"],
        "budget_effective": s["budget_effective"],
        "graphs_reused": s.get("graphs_reused"),
        "finish_reason": s["finish_reason"],
        "divergence": m.divergence,
    }


def _finite(obj):
    """JSON has no NaN / Infinity: any that slipped through become null."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


# -- tables shared by Markdown, HTML and the GUI --------------------------------------------------
def fmt(x, digits: int = 2) -> str:
    if x is None:
        return "–"
    if isinstance(x, bool):
        return "yes" if x else "NO"
    return f"{x:.{digits}f}"


def _interval(lo, hi, digits: int = 2) -> str:
    return "–" if lo is None or hi is None else f"[{lo:.{digits}f}, {hi:.{digits}f}]"


SUMMARY_HEADERS = [
    "row",
    "configuration",
    "status",
    "tok/s",
    "sd",
    "95% CI",
    "speed-up",
    "speed-up 95% CI",
    "TTFT ms",
    "prefill tok/s",
    "accept",
    "commit len",
    "Δ tok/s vs baseline",
    "verdict",
    "lossless",
]


def summary_table(report: dict) -> tuple[list[str], list[list[str]]]:
    rows = []
    for r in report["rows"]:
        verdict = r["delta_flag"] or ("baseline" if r["is_baseline"] else "–")
        status = r["status"] if not r["error"] else f"{r['status']}: {r['error']}"
        rows.append(
            [
                r["id"],
                r["label"],
                status,
                fmt(r["avg_ts"]),
                fmt(r["stddev_ts"]),
                _interval(r["ts_ci_lo"], r["ts_ci_hi"]),
                fmt(r["speedup"], 3),
                _interval(r["speedup_ci_lo"], r["speedup_ci_hi"], 3),
                fmt(r["ttft_ms"]),
                fmt(r["prefill_ts"], 1),
                fmt(r["acceptance_rate"], 3),
                fmt(r["mean_commit_len"], 3),
                "–" if r["delta_ts"] is None or r["is_baseline"] else f"{r['delta_ts']:+.2f}",
                verdict,
                fmt(r["lossless"]),
            ]
        )
    return SUMMARY_HEADERS, rows


PHASE_HEADERS = ["row", "configuration"] + [f"{p} ms/step" for p in PHASES]


def phase_table(report: dict) -> tuple[list[str], list[list[str]]]:
    rows = [
        [r["id"], r["label"]] + [fmt(r[f"phase_{p}_ms"], 3) for p in PHASES]
        for r in report["rows"]
        if r["avg_ts"] is not None
    ]
    return PHASE_HEADERS, rows


PROMPT_HEADERS = [
    "row",
    "prompt",
    "tok/s",
    "sd",
    "95% CI",
    "speed-up",
    "speed-up 95% CI",
    "TTFT ms",
    "accept",
    "commit len",
    "lossless",
]


def prompt_table(report: dict) -> tuple[list[str], list[list[str]]]:
    rows = [
        [
            p["row_id"],
            p["prompt_id"],
            fmt(p["avg_ts"]),
            fmt(p["stddev_ts"]),
            _interval(p["ts_ci_lo"], p["ts_ci_hi"]),
            fmt(p["speedup"], 3),
            _interval(p["speedup_ci_lo"], p["speedup_ci_hi"], 3),
            fmt(p["ttft_ms"]),
            fmt(p["acceptance_rate"], 3),
            fmt(p["mean_commit_len"], 3),
            _lossless_cell(p),
        ]
        for p in report["prompts"]
    ]
    return PROMPT_HEADERS, rows


def _lossless_cell(p: dict) -> str:
    """'yes' / 'NO', with the target's top-2 margin where a greedy run parted from AR: a 'yes' with a
    margin is a near-tie parting (engine_bridge.runtime.near_tie), a 'NO' with one a real divergence."""
    cell = fmt(p["lossless"])
    margin = p.get("divergence_margin")
    return cell if margin is None else f"{cell} (parted, margin {margin:.3g})"


def context_lines(report: dict) -> list[tuple[str, str]]:
    """(label, value) pairs: enough of machine, build and settings to reproduce the run."""
    m, b, s = report["machine"], report["build"], report["settings"]
    e = s["engine"]
    gpus = "; ".join(f"{g['name']} ({g['memory_mib']} MiB, driver {g['driver']})" for g in m.get("gpus", [])) or "none"
    return [
        ("status", f"{report['status']} ({report['created']}, {report['duration_s']:.1f} s)"),
        (
            "machine",
            f"{m.get('cpu', '?')}, {m.get('n_cpus', '?')} CPUs, "
            f"{m.get('memory_bytes', 0) / 2**30:.1f} GiB RAM, {m.get('os', '?')}, Python {m.get('python', '?')}",
        ),
        ("GPU", gpus),
        (
            "build",
            f"llama.cpp {b.get('build_commit', '?')}, llama-cpp-python {b.get('llama_cpp_python', '?')}, "
            f"backend {b.get('backend', '?')}, cmake {b.get('cmake_args', '') or '–'}",
        ),
        ("target", e["target"]),
        ("drafter", e["draft"]),
        (
            "engine",
            f"n_ctx {e['n_ctx']}, n_batch {e['n_batch']}, n_ubatch {e['n_ubatch']}, threads "
            f"{e['n_threads'] or 'all'}, n_gpu_layers {e['n_gpu_layers']}, flash_attn {e['flash_attn']}, "
            f"target K/V {e['target_kv']}, draft K/V {e['draft_kv']}",
        ),
        ("suite", f"{s['suite']['name']} ({s['suite']['n_prompts']} prompts, sha256 {s['suite']['sha256'][:16]}…)"),
        (
            "generation",
            f"{s['reps']} reps (seeds {s['seeds']}), max_tokens {s['max_tokens']}, temperature "
            f"{s['temperature']}, budget {s['budget']}, verify {s['verify_mode']}, p_min {s['p_min']}, "
            f"warm-up {'on' if s['warmup'] else 'off'}, "
            + (
                f"rows in turn on blocks of {s['round_prompts']} prompts"
                if s.get("round_prompts")
                else "each row on the whole suite in turn"
            ),
        ),
        ("sweep", ", ".join(f"{k}={','.join(v)}" for k, v in s["sweep"].items()) or "none"),
        (
            "statistics",
            f"mean ± sample sd over repetitions; {int(s['statistics']['level'] * 100)}% percentile "
            f"bootstrap ({s['statistics']['n_boot']} resamples, seed {s['statistics']['seed']}); "
            f"{s['statistics']['delta_rule']}; baseline row {s['baseline_row']}",
        ),
    ]


def advice_lines(report: dict) -> list[str]:
    """Does speculation pay in this run? A speculative row's step took ``commit / speed-up`` AR
    steps of time (its break-even commit length, engine_bridge.runtime.breakeven); it pays when its measured
    commit length is above that. The last line is the advice: the fastest row, or AR."""
    from ..runtime.breakeven import advice

    ts = {r["id"]: r["avg_ts"] for r in report["rows"]}
    costs, commits, lines = {}, {}, []
    for r in report["rows"]:
        ar_ts, row_ts, commit = ts.get(r["ar_row"]), r["avg_ts"], r["mean_commit_len"]
        if r["kind"] != "spec" or not ar_ts or not row_ts or not commit:
            continue
        key = (f"{r['id']} {r['label']}", 0)  # a row: its id and label name it
        costs[key], commits[key] = commit * ar_ts / row_ts, commit
        lines.append(
            f"{r['id']} {r['label']}: break-even commit {costs[key]:.2f}, measured {commit:.2f} -> "
            + ("pays" if commit > costs[key] else "does not pay")
        )
    if costs:
        lines.append("advice: " + advice(costs, commits, margin=0.0))
    return lines


# -- writers --------------------------------------------------------------------------------------
def to_json(report: dict) -> str:
    return json.dumps(report, indent=2, allow_nan=False) + "\n"


#: CSV columns: the row's flat fields, then every metric's sd and interval.
CSV_COLUMNS = (
    [
        "id",
        "label",
        "kind",
        "status",
        "error",
        "build_commit",
        "gpu_info",
        "model_filename",
        "model_size",
        "n_params",
        "type_k",
        "type_v",
        "n_gpu_layers",
        "flash_attn",
        "n_prompt",
        "n_gen",
        "avg_ts",
        "stddev_ts",
        "samples_ts",
        "ts_ci_lo",
        "ts_ci_hi",
        "draft_filename",
        "budget",
        "verify_mode",
        "draft_variant",
        "draft_n",
        "draft_n_accepted",
        "acceptance_rate",
        "mean_commit_len",
        "ttft_ms",
        "prefill_ts",
    ]
    + [f"phase_{p}_ms" for p in PHASES]
    + [
        "speedup",
        "speedup_ci_lo",
        "speedup_ci_hi",
        "lossless",
        "delta_ts",
        "delta_flag",
        "is_baseline",
        "n_reps",
    ]
    + [f"{k}_{q}" for k in METRICS if k != "ts" for q in ("sd", "ci_lo", "ci_hi")]
)


def to_csv(report: dict) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for r in report["rows"]:
        line = []
        for col in CSV_COLUMNS:
            if col in r:
                v = r[col]
            else:
                k, _, q = col.rpartition("_ci_") if "_ci_" in col else (col[:-3], "", "sd")
                s = r["stats"].get(k)
                v = None if s is None else (s["sd"] if q == "sd" else s[f"ci_{q}"])
            line.append(_csv_cell(v))
        w.writerow(line)
    return buf.getvalue()


def _csv_cell(v) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, list):
        return ";".join(repr(x) for x in v)
    text = str(v)
    if isinstance(v, str) and text[:1] in CSV_FORMULA_STARTS:
        # a spreadsheet would run it as a formula (a label, a path from the Hub): a leading quote
        # makes it text, as OWASP's CSV-injection advice says
        return "'" + text
    return text


#: First characters that make a spreadsheet treat a cell as a formula.
CSV_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def md_text(value) -> str:
    """``value`` with no HTML tag left in it ("<" written as "&lt;"): Markdown renderers pass raw
    HTML through, and a path or label may hold some."""
    return str(value).replace("<", "&lt;")


def md_table(headers: list[str], rows: list[list[str]], escape_html: bool = False) -> str:
    """A Markdown table; ``escape_html`` for a Markdown file (a renderer would run raw HTML from a
    path), off for the terminal."""
    esc = lambda s: (md_text(s) if escape_html else str(s)).replace("|", "\\|").replace("\n", " ")
    out = ["| " + " | ".join(esc(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def to_markdown(report: dict) -> str:
    # every text from outside (paths, labels, notes) is HTML-escaped: Markdown renderers pass raw HTML
    esc = md_text
    parts = ["# DFlash Studio bench", ""]
    parts += [f"- **{k}**: {esc(v)}" for k, v in context_lines(report)]
    parts += ["", "## Results", "", md_table(*summary_table(report), escape_html=True), ""]
    notes = [f"- {esc(r['id'])}: {esc(n)}" for r in report["rows"] for n in r["notes"]]
    if notes:
        parts += ["Notes:", ""] + notes + [""]
    auto_rows = auto_table(report)
    if auto_rows[1]:
        parts += ["## auto against the best fixed configuration", "", md_table(*auto_rows, escape_html=True), ""]
    advice = advice_lines(report)
    if advice:
        parts += ["## Does speculation pay?", ""] + [f"- {esc(a)}" for a in advice] + [""]
    parts += ["## Step phases (mean per step)", "", md_table(*phase_table(report), escape_html=True), ""]
    parts += ["## Per prompt", "", md_table(*prompt_table(report), escape_html=True), ""]
    return "\n".join(parts)
