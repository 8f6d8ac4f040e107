"""Tables of gpu/gpu_verify_cost.sh's results (issue 13), as markdown on stdout.

Per pair: the verify cost of n rows in AR tokens, before and after; AR, chain and tree steps in AR
tokens with their phases; ours / upstream chain; our AR / llama-bench tg128. Then the MMVQ
crossover per quant type (llama-bench ms per n-row batch at row ceilings 1 = MMQ from 2 rows,
8 = upstream, 16 = MMVQ up to 16 rows) and the ceiling it suggests. Missing files are skipped.

Usage: python gpu/gpu_verify_report.py RESULTS_DIR [--json summary.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

SIDES = ("before", "after")


def _load(p: Path):
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None


def _f(x, fmt="{:.2f}"):
    return "–" if x is None else fmt.format(x)


def verify_table(r: Path, pair: str, out: list[str], summary: dict) -> None:
    data = {s: _load(r / f"vrows_{pair}_{s}.json") for s in SIDES}
    if not any(data.values()):
        return
    rows = sorted({int(n) for d in data.values() if d for n in d["rows"]})
    out += [
        "",
        "Verify of n rows (target decode, KV length held; median ms and AR tokens = t(n)/t(1)):",
        "",
        "| rows | before ms | before AR tok | after ms | after AR tok |",
        "|---|---|---|---|---|",
    ]
    for n in rows:
        cells = []
        for s in SIDES:
            v = data[s]["rows"].get(str(n)) if data[s] else None
            cells += [_f(v and v["ms_median"], "{:.3f}"), _f(v and v["ar_tokens"])]
            if v:
                summary.setdefault("verify_ar_tokens", {}).setdefault(s, {})[n] = round(v["ar_tokens"], 3)
        out.append(f"| {n} | " + " | ".join(cells) + " |")


def modes_table(r: Path, pair: str, out: list[str], summary: dict) -> None:
    ours = {s: _load(r / f"ours_{pair}_{s}.json") for s in SIDES}
    up = _load(r / f"upstream_{pair}.json")
    if not any(ours.values()):
        return
    out += [
        "",
        "Steps (AR tokens = step ms / AR ms of the same side; phases in ms per step):",
        "",
        "| mode | budget | side | tok/s | step ms | AR tokens | commit | draft | inject | verify | accept | other |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    ar_ms = {}
    for s in SIDES:
        if not ours[s]:
            continue
        ar = next((x for x in ours[s]["rows"] if x["mode"] == "ar"), None)
        ar_ms[s] = 1e3 / ar["tok_per_s"] if ar else None
    keys = []
    for s in SIDES:
        for x in (ours[s] or {}).get("rows", []):
            k = (x["mode"], x["budget"])
            if k not in keys:
                keys.append(k)
    for mode, b in keys:
        for s in SIDES:
            x = next((x for x in (ours[s] or {}).get("rows", []) if x["mode"] == mode and x["budget"] == b), None)
            if not x:
                continue
            step = 1e3 / x["tok_per_s"] if mode == "ar" else x["step_ms"]
            cost = step / ar_ms[s] if ar_ms.get(s) else None
            ph = x.get("phase_ms", {})
            out.append(
                f"| {mode} | {b or ''} | {s} | {x['tok_per_s']:.1f} | {step:.3f} | {_f(cost)} | "
                f"{x['mean_commit_len']:.2f} | "
                + " | ".join(_f(ph.get(k), "{:.3f}") for k in ("draft", "inject", "verify", "accept", "other"))
                + " |"
            )
            summary.setdefault("steps", {}).setdefault(s, {})[f"{mode}{b or ''}"] = {
                "tok_per_s": round(x["tok_per_s"], 1),
                "step_ms": round(step, 3),
                "ar_tokens": cost and round(cost, 3),
            }
    # ours / upstream, AR / tg128
    lines = []
    for s in SIDES:
        if ar_ms.get(s):
            lines.append(f"- AR {s}: {ar_ms[s]:.3f} ms/token ({1e3 / ar_ms[s]:.1f} tok/s)")
    if up:
        tg = (up.get("llama_bench") or {}).get("avg_ts")
        if tg:
            for s in SIDES:
                if ar_ms.get(s):
                    lines.append(
                        f"- our AR ({s}) / upstream llama-bench tg128 ({tg:.1f} tok/s) = {1e3 / ar_ms[s] / tg:.3f}"
                    )
                    summary.setdefault("ar_over_tg128", {})[s] = round(1e3 / ar_ms[s] / tg, 3)
        for nm, row in sorted((up.get("speculative") or {}).items(), key=lambda kv: int(kv[0])):
            for s in SIDES:
                x = next(
                    (x for x in (ours[s] or {}).get("rows", []) if x["mode"] == "chain" and x["budget"] == int(nm)),
                    None,
                )
                if x and row.get("tok_per_s"):
                    ratio = x["tok_per_s"] / row["tok_per_s"]
                    lines.append(
                        f"- chain {nm}: ours ({s}) {x['tok_per_s']:.1f} / upstream {row['tok_per_s']:.1f} tok/s "
                        f"(step {_f(row.get('step_ms'), '{:.3f}')} ms, {_f(row.get('step_cost'))} AR) = {ratio:.2f}"
                    )
                    summary.setdefault("ours_over_upstream_chain", {}).setdefault(s, {})[nm] = round(ratio, 3)
    out += [""] + lines


def q8_drafter(r: Path, pair: str, out: list[str]) -> None:
    q8, f16 = _load(r / f"q8drafter_{pair}.json"), _load(r / f"ours_{pair}_after.json")
    if not q8:
        return
    out += [
        "",
        "Drafter f16 against q8_0 (after):",
        "",
        "| mode | budget | drafter | tok/s | step ms | draft ms | inject ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for x in q8["rows"]:
        if x["mode"] == "ar":
            continue
        ref = next(
            (y for y in (f16 or {}).get("rows", []) if y["mode"] == x["mode"] and y["budget"] == x["budget"]), None
        )
        for name, y in (("f16", ref), ("q8_0", x)):
            if y:
                out.append(
                    f"| {y['mode']} | {y['budget']} | {name} | {y['tok_per_s']:.1f} | {y['step_ms']:.3f} | "
                    f"{y['phase_ms']['draft']:.3f} | {y['phase_ms']['inject']:.3f} |"
                )


def graph_stats(r: Path, pair: str, out: list[str]) -> None:
    for s in SIDES:
        p = r / f"gstats_{pair}_{s}.txt"
        if not p.exists():
            continue
        lines = [x.strip() for x in p.read_text(errors="replace").splitlines() if x.startswith("dflash_graph_stats")]
        lines.sort(key=lambda x: -int(x.split()[1]) if x.split()[1].isdigit() else 0)
        if lines:
            out += ["", f"CUDA graph use, chain 7, 64 tokens ({s}):", "", "```"] + lines[:14] + ["```"]


def mmvq_times(r: Path, ty: str) -> dict[int, dict[int, float]]:
    """{rows: {ceiling: ms per batch}} of one type's llama-bench runs."""
    ms: dict = {}
    for c in (1, 8, 16):
        for row in _load(r / f"mmvq_{ty}_c{c}.json") or []:
            if row.get("n_gen", 0) == 0 and row.get("n_prompt"):
                samples = sorted(row.get("samples_ns") or [row["avg_ns"]])
                ms.setdefault(row["n_prompt"], {})[c] = samples[len(samples) // 2] / 1e6  # median
    return ms


def best_ceiling(ms: dict[int, dict[int, float]]) -> int | None:
    """The ceiling c (MMVQ for n <= c rows, MMQ above) with the least total time over n = 2..16,
    from the MMVQ-everywhere (16) and MMQ-everywhere (1) runs."""
    ns = [n for n in range(2, 17) if n in ms and 16 in ms[n] and 1 in ms[n]]
    if not ns:
        return None
    totals = {c: sum(ms[n][16] if n <= c else ms[n][1] for n in ns) for c in range(1, 17)}
    return min(totals, key=lambda c: (totals[c], c))


def mmvq_types(r: Path) -> list[str]:
    return sorted({p.stem.rsplit("_c", 1)[0][len("mmvq_") :] for p in r.glob("mmvq_*_c*.json")})


def mmvq_env(r: Path) -> str:
    """DFLASH_MMVQ_MAX_ROWS for the measured best ceilings, e.g. "Q4_K=6,Q6_K=4" ("" when none)."""
    best = {ty: best_ceiling(mmvq_times(r, ty)) for ty in mmvq_types(r)}
    return ",".join(f"{ty}={c}" for ty, c in best.items() if c is not None)


def mmvq_table(r: Path, out: list[str], summary: dict) -> None:
    types = mmvq_types(r)
    if not types:
        return
    out += [
        "",
        "## MMVQ crossover (llama-bench median ms per n-row batch, CUDA graphs off; 8B-shape matrices, "
        "8 layers, one type each)",
        "",
    ]
    for ty in types:
        ms = mmvq_times(r, ty)
        if not ms:
            continue
        out += [
            "",
            f"{ty}:",
            "",
            "| rows | MMQ (ceiling 1) | upstream (8, if run) | MMVQ (16) | best | best / pp1 |",
            "|---|---|---|---|---|---|",
        ]
        pp1 = min(ms.get(1, {}).values()) if ms.get(1) else None
        for n in sorted(ms):
            m = ms[n]
            best = min(m, key=m.get)
            name = {1: "MMQ", 8: "upstream", 16: "MMVQ"}[best]
            out.append(
                f"| {n} | "
                + " | ".join(_f(m.get(c), "{:.3f}") for c in (1, 8, 16))
                + f" | {name} | {_f(pp1 and m[best] / pp1)} |"
            )
        ceiling = best_ceiling(ms)
        out.append(
            f"\nBest ceiling for {ty}: {ceiling} (MMVQ up to that many rows, MMQ above: the least "
            f"total time over 2..16 rows)"
        )
        summary.setdefault("mmvq_ceiling", {})[ty] = ceiling


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results")
    ap.add_argument("--json")
    ap.add_argument(
        "--mmvq-env",
        action="store_true",
        help="print only DFLASH_MMVQ_MAX_ROWS for the measured best ceilings per type",
    )
    a = ap.parse_args(argv)
    r = Path(a.results)
    if a.mmvq_env:
        print(mmvq_env(r))
        return 0
    pairs = sorted(
        {p.stem.split("_")[1] for p in r.glob("vrows_*_*.json")}
        | {p.stem.split("_")[1] for p in r.glob("ours_*_*.json")}
    )
    out = [
        "# Verify cost before/after packaging/patches (issue 13)",
        "",
        "before = DFLASH_MULTIROW_GRAPHS=0 DFLASH_MMVQ_MAX_ROWS=8 (upstream's behaviour); after = "
        + ((r / "after_env.txt").read_text().strip() if (r / "after_env.txt").exists() else "?")
        + ".",
    ]
    env = r / "env.txt"
    if env.exists():
        gpu = [x for x in env.read_text(errors="replace").splitlines() if "NVIDIA" in x and "MiB" in x]
        out += [f"GPU: {gpu[0].strip()}" if gpu else ""]
    summary: dict = {}
    for pair in pairs:
        out += ["", f"## {pair}"]
        s = summary.setdefault(pair, {})
        verify_table(r, pair, out, s)
        modes_table(r, pair, out, s)
        q8_drafter(r, pair, out)
        graph_stats(r, pair, out)
    mmvq_table(r, out, summary)
    print("\n".join(out))
    print("\n```json\n" + json.dumps(summary, indent=1) + "\n```")
    if a.json:
        Path(a.json).write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
