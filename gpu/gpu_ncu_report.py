"""Tables of gpu/gpu_ncu.sh's results (issue 28): Nsight Compute kernels per phase, GPU time
against wall time, the MMVQ/MMQ sweep and the before/after benches.

    python gpu/gpu_ncu_report.py DIR               the whole report (markdown) of a results folder
    python gpu/gpu_ncu_report.py DIR --after-env   the MMVQ ceilings the sweep measured best ("q4_1=N")

DIR holds ncu_PHASE.csv (`ncu --import R --csv --page raw`), ncu_PHASE.json (the profiled
iteration count), time.json (gpu_step_profile.py --time), kineto.json (optional), sweep_*.json
(gpu_verify_rows.py), vrows_*.json and bench_*.json (benchmarks/bench_engine.py).
"""

from __future__ import annotations

import csv
import json
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

PHASES = ("ar", "verify8", "verify16", "draft8", "draft16", "inject", "chain7", "tree15")
TYPES = {
    "0": "f32",
    "1": "f16",
    "2": "q4_0",
    "3": "q4_1",
    "6": "q5_0",
    "7": "q5_1",
    "8": "q8_0",
    "10": "q2_K",
    "11": "q3_K",
    "12": "q4_K",
    "13": "q5_K",
    "14": "q6_K",
    "30": "bf16",
}
UNIT = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "second": 1e6}


def short(name: str) -> str:
    """A kernel's name without the return type, the parameter list and namespaces; ggml types named."""
    n = name.strip()
    n = re.sub(r"^void\s+", "", n)
    depth, cut = 0, len(n)
    for i, ch in enumerate(n):  # the parameter list: the first '(' at template depth 0
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0 and i > 0:
            cut = i
            break
    n = n[:cut]
    n = re.sub(r"\(ggml_type\)(\d+)", lambda m: TYPES.get(m.group(1), "type" + m.group(1)), n)
    n = re.sub(r"\b\w+::", "", n)
    n = n.replace("(bool)1", "true").replace("(bool)0", "false").replace(" ", "")
    return n[:90]


def family(name: str) -> str:
    for key, fam in (
        ("mul_mat_vec_q", "MMVQ (quantised mat-vec)"),
        ("mul_mat_q", "MMQ (quantised tiles)"),
        ("quantize_mmq", "activation quantise (MMQ)"),
        ("quantize_q8_1", "activation quantise (MMVQ)"),
        ("mul_mat_vec_f", "MMVF (f16/f32 mat-vec)"),
        ("mul_mat_f", "MMF (f16 tiles)"),
        ("gemm", "cuBLAS GEMM"),
        ("gemv", "cuBLAS GEMV"),
        ("flash_attn", "flash attention"),
        ("rms_norm", "rms_norm"),
        ("rope", "rope"),
        ("norm", "norm"),
        ("set_rows", "KV write (set_rows)"),
        ("cpy", "copy / convert"),
        ("get_rows", "get_rows"),
        ("argmax", "argmax / sampling"),
        ("argsort", "argmax / sampling"),
        ("top_k", "argmax / sampling"),
        ("soft_max", "softmax"),
        ("glu", "swiglu"),
        ("silu", "swiglu"),
        ("k_bin_bcast", "add / mul (binary)"),
        ("scale", "scale"),
        ("concat", "concat"),
    ):
        if key in name:
            return fam
    return "other"


def read_ncu(path: Path) -> list[tuple[str, float]]:
    """(kernel name, µs) per profiled launch, in launch order."""
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(f) if r]
    head = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
    cols = rows[head]
    k, t = cols.index("Kernel Name"), cols.index("gpu__time_duration.sum")
    unit = rows[head + 1][t] if len(rows) > head + 1 else "nsecond"
    scale = UNIT.get(unit, None)
    body = rows[head + 2 :] if scale is not None else rows[head + 1 :]
    scale = scale or 1e-3
    out = []
    for r in body:
        if len(r) <= max(k, t):
            continue
        try:
            out.append((r[k], float(r[t].replace(",", "")) * scale))
        except ValueError:
            continue
    return out


def ncu_tables(d: Path) -> tuple[str, dict]:
    per: dict[str, dict] = {}
    for p in PHASES:
        f = d / f"ncu_{p}.csv"
        if not f.exists():
            continue
        info = json.loads((d / f"ncu_{p}.json").read_text()) if (d / f"ncu_{p}.json").exists() else {"iters": 2}
        it = max(1, int(info.get("iters", 2)))
        kern = defaultdict(lambda: [0, 0.0])
        fam = defaultdict(lambda: [0, 0.0])
        launches = read_ncu(f)
        for name, us in launches:
            kern[short(name)][0] += 1
            kern[short(name)][1] += us
            fam[family(name)][0] += 1
            fam[family(name)][1] += us
        per[p] = {
            "iters": it,
            "n": len(launches) / it,
            "us": sum(us for _, us in launches) / it,
            "kern": {k: (v[0] / it, v[1] / it) for k, v in kern.items()},
            "fam": {k: (v[0] / it, v[1] / it) for k, v in fam.items()},
        }
    if not per:
        return "(no ncu results)\n", per
    wall = {}
    tj = d / "time.json"
    if tj.exists():
        wall = {p: r["ms_median"] * 1e3 for p, r in json.loads(tj.read_text())["phases"].items()}
    kin = {}
    kj = d / "kineto.json"
    if kj.exists():
        kin = json.loads(kj.read_text()).get("phases", {})
    out = [
        "GPU time per iteration (sum of kernel durations under ncu) against wall time (same phase, no profiler):",
        "",
        "| phase | kernels | GPU µs (ncu) | wall µs | wall - GPU (host, launch gaps, syncs) | GPU busy |"
        + (" CUPTI GPU µs / wall µs |" if kin else ""),
        "|---|---|---|---|---|---|" + ("---|" if kin else ""),
    ]
    for p, r in per.items():
        w = wall.get(p)
        row = f"| {p} | {r['n']:.0f} | {r['us']:.1f} | " + (
            f"{w:.1f} | {w - r['us']:.1f} | {r['us'] / w:.0%} |" if w else "– | – | – |"
        )
        if kin:
            k = kin.get(p)
            row += f" {k['gpu_us']:.1f} / {k['wall_us']:.1f} |" if k else " – |"
        out.append(row)
    out.append("")
    tgt = [p for p in ("ar", "verify8", "verify16") if p in per]
    if tgt:
        out += [
            "Target decode by kernel family (count and µs per decode) at 1 / 8 / 16 rows:",
            "",
            "| family | " + " | ".join(f"{p} n | {p} µs" for p in tgt) + " |",
            "|---|" + "---|---|" * len(tgt),
        ]
        fams = sorted({f for p in tgt for f in per[p]["fam"]}, key=lambda f: -per[tgt[-1]]["fam"].get(f, (0, 0))[1])
        for f in fams:
            out.append(
                f"| {f} | "
                + " | ".join(
                    f"{per[p]['fam'].get(f, (0, 0))[0]:.0f} | {per[p]['fam'].get(f, (0, 0))[1]:.1f}" for p in tgt
                )
                + " |"
            )
        out.append("| **total** | " + " | ".join(f"{per[p]['n']:.0f} | {per[p]['us']:.1f}" for p in tgt) + " |")
        out.append("")
        out += [
            "Target decode by kernel (count and µs per decode):",
            "",
            "| kernel | " + " | ".join(f"{p} n | {p} µs" for p in tgt) + " |",
            "|---|" + "---|---|" * len(tgt),
        ]
        names = sorted(
            {k for p in tgt for k in per[p]["kern"]}, key=lambda k: -max(per[p]["kern"].get(k, (0, 0))[1] for p in tgt)
        )
        for k in names:
            out.append(
                f"| `{k}` | "
                + " | ".join(
                    f"{per[p]['kern'].get(k, (0, 0))[0]:.0f} | {per[p]['kern'].get(k, (0, 0))[1]:.1f}" for p in tgt
                )
                + " |"
            )
        out.append("")
    dr = [p for p in ("draft8", "draft16", "inject", "chain7", "tree15") if p in per]
    if dr:
        out += [
            "Drafter block, inject and whole steps by kernel family (count and µs per iteration / step):",
            "",
            "| family | " + " | ".join(f"{p} n | {p} µs" for p in dr) + " |",
            "|---|" + "---|---|" * len(dr),
        ]
        fams = sorted(
            {f for p in dr for f in per[p]["fam"]}, key=lambda f: -sum(per[p]["fam"].get(f, (0, 0))[1] for p in dr)
        )
        for f in fams:
            out.append(
                f"| {f} | "
                + " | ".join(
                    f"{per[p]['fam'].get(f, (0, 0))[0]:.0f} | {per[p]['fam'].get(f, (0, 0))[1]:.1f}" for p in dr
                )
                + " |"
            )
        out.append("| **total** | " + " | ".join(f"{per[p]['n']:.0f} | {per[p]['us']:.1f}" for p in dr) + " |")
        out.append("")
    return "\n".join(out) + "\n", per


def after_ncu(d: Path) -> str:
    """verify16 by kernel family with the build's defaults against the after setting (ncuafter_verify16)."""
    a, b = d / "ncu_verify16.csv", d / "ncuafter_verify16.csv"
    env = "DFLASH_MMVQ_MAX_ROWS=" + (
        (d / "after_env.txt").read_text().strip() if (d / "after_env.txt").exists() else "?"
    )
    if (d / "ncushortk0_verify16.csv").exists():  # the short-row rule off, against the default
        a, b, env = d / "ncushortk0_verify16.csv", d / "ncu_verify16.csv", "the default (DFLASH_MMVQ_SHORT_K=0 before)"
    if not (a.exists() and b.exists()):
        return ""
    fams = []
    for f in (a, b):
        it = json.loads(f.with_suffix(".json").read_text()).get("iters", 2) if f.with_suffix(".json").exists() else 2
        fam = defaultdict(lambda: [0, 0.0])
        for name, us in read_ncu(f):
            fam[short(name)][0] += 1
            fam[short(name)][1] += us
        fams.append({k: (v[0] / it, v[1] / it) for k, v in fam.items()})
    out = [
        f"verify16 kernels, before against {env} (count, µs per decode):",
        "",
        "| kernel | before n | before µs | after n | after µs |",
        "|---|---|---|---|---|",
    ]
    for k in sorted(
        set(fams[0]) | set(fams[1]), key=lambda k: -max(fams[0].get(k, (0, 0))[1], fams[1].get(k, (0, 0))[1])
    ):
        x, y = fams[0].get(k, (0, 0)), fams[1].get(k, (0, 0))
        if x[1] + y[1] < 1.0:
            continue
        out.append(f"| `{k}` | {x[0]:.0f} | {x[1]:.1f} | {y[0]:.0f} | {y[1]:.1f} |")
    out.append(
        f"| **total** | | {sum(v[1] for v in fams[0].values()):.1f} | | {sum(v[1] for v in fams[1].values()):.1f} |"
    )
    return "\n".join(out) + "\n"


def sweep(d: Path) -> tuple[str, dict]:
    """Verify of n rows (gpu_verify_rows.py) at MMVQ ceilings: per type, the best ceiling."""
    runs = {}
    for f in sorted(d.glob("sweep_*.json")):
        r = json.loads(f.read_text())
        runs[f.stem[len("sweep_") :]] = {int(n): v["ms_median"] for n, v in r["rows"].items()}
    if not runs:
        return "(no sweep)\n", {}
    ns = sorted(next(iter(runs.values())))
    out = [
        "Verify of n rows, median ms (gpu_verify_rows.py), per MMVQ ceiling setting:",
        "",
        "| setting | " + " | ".join(str(n) for n in ns) + " |",
        "|---|" + "---|" * len(ns),
    ]
    for tag, t in runs.items():
        out.append(f"| {tag} | " + " | ".join(f"{t.get(n, float('nan')):.3f}" for n in ns) + " |")
    out.append("")
    best = {}
    # pairs of settings that differ in one type's ceiling only: 1 (MMQ above one row) against 16
    pairs = [
        (k[: -len("-c1")], k, k[: -len("-c1")] + "-c16") for k in runs if k.endswith("-c1") and k[:-3] + "-c16" in runs
    ]
    for what, lo, hi in pairs:
        a, b = runs[lo], runs[hi]
        cands = []
        for c in range(1, 17):
            cands.append((sum(b[n] if n <= c else a[n] for n in ns if n >= 2), c))
        tot, c = min(cands)
        best[what] = c
        faster = [n for n in ns if n >= 2 and b[n] < a[n]]
        out.append(
            f"- {what}: MMVQ faster than MMQ at rows {faster}; best ceiling {c} "
            f"(total over 2..16 rows {tot:.2f} ms against {cands[7][0]:.2f} at 8 and {cands[15][0]:.2f} at 16)"
        )
    out.append("")
    return "\n".join(out) + "\n", best


def after_env(best: dict) -> str:
    """DFLASH_MMVQ_MAX_ROWS for the after side: the smol-mix model's measured q4_1 ceiling."""
    parts = []
    if "q4_1" in best:
        parts.append(f"q4_1={best['q4_1']}")
    return ",".join(parts)


def benches(d: Path) -> str:
    out = []
    vr = {}
    for f in sorted(d.glob("vrows_*.json")):
        side = f.stem[len("vrows_") :].rsplit("_", 1)[0]
        r = json.loads(f.read_text())
        vr.setdefault(side, []).append({int(n): v for n, v in r["rows"].items()})
    if vr:
        out += [
            "Verify of n rows in AR tokens (median of the runs' medians, t(n) / t(1)):",
            "",
            "| side | runs | 1 row ms | 8 rows | 16 rows |",
            "|---|---|---|---|---|",
        ]
        for side, rs in vr.items():
            one = statistics.median(r[1]["ms_median"] for r in rs)
            out.append(
                f"| {side} | {len(rs)} | {one:.3f} | "
                + " | ".join(
                    f"{statistics.median(r[n]['ms_median'] / r[1]['ms_median'] for r in rs):.2f}"
                    f" ({statistics.median(r[n]['ms_median'] for r in rs):.3f} ms)"
                    for n in (8, 16)
                )
                + " |"
            )
        out.append("")
    bs = {}
    for f in sorted(d.glob("bench_*.json")):
        side = f.stem[len("bench_") :].rsplit("_", 1)[0]
        r = json.loads(f.read_text())
        bs.setdefault(side, []).append({(x["mode"], x["budget"]): x for x in r["rows"]})
    if bs:
        out += [
            "Steps (benchmarks/bench_engine.py), step ms and AR tokens (step ms / AR ms of the same run), "
            "mean over runs:",
            "",
            "| side | runs | AR ms | chain 7 | chain 15 | tree 15 | verify ms chain 7 / 15 / tree 15 |",
            "|---|---|---|---|---|---|---|",
        ]
        for side, rs in bs.items():
            ar = statistics.fmean(r[("ar", 0)]["step_ms"] for r in rs)
            cells, ver = [], []
            for key in (("chain", 7), ("chain", 15), ("tree", 15)):
                if all(key in r for r in rs):
                    ms = statistics.fmean(r[key]["step_ms"] for r in rs)
                    tok = statistics.fmean(r[key]["step_ms"] / r[("ar", 0)]["step_ms"] for r in rs)
                    cells.append(f"{ms:.3f} ({tok:.2f})")
                    ver.append(f"{statistics.fmean(r[key]['phase_ms']['verify'] for r in rs):.3f}")
                else:
                    cells.append("–")
            out.append(f"| {side} | {len(rs)} | {ar:.3f} | " + " | ".join(cells) + f" | {' / '.join(ver)} |")
        out.append("")
    return "\n".join(out) + "\n"


BENCH_PHASES = ("draft", "inject", "verify", "accept", "other")  # a bench row's phase columns


def real_benches(d: Path) -> str:
    """The real pair's bench runs (step real: real/SUITE_SIDE.json): per suite, side and mode, the
    commit length, x AR of the same run, the step in ms and in AR tokens, and its phases."""
    rows = []
    for f in sorted((d / "real").glob("*_*.json")):
        suite, side = f.stem.rsplit("_", 1)
        try:
            r = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        ar = next((x for x in r["rows"] if x["kind"] == "ar" and x["status"] == "ok"), None)
        for x in r["rows"]:
            if x["kind"] != "spec" or x["status"] != "ok" or ar is None:
                continue
            ph = [x.get(f"phase_{p}_ms") or 0.0 for p in BENCH_PHASES]
            ar_ms = sum(ar.get(f"phase_{p}_ms") or 0.0 for p in BENCH_PHASES)
            rows.append(
                f"| {suite} | {side} | {x['verify_mode']} {x['budget']} | {x['mean_commit_len']:.2f} | "
                f"{x['speedup']:.3f} | {sum(ph):.3f} ({sum(ph) / ar_ms:.2f}) | "
                + " / ".join(f"{v:.3f}" for v in ph)
                + " |"
            )
    if not rows:
        return ""
    head = [
        "The real pair (dflash-studio bench, step real), per run: commit, x AR (same run), step ms (AR tokens), "
        "phases ms (" + " / ".join(BENCH_PHASES) + "):",
        "",
        "| suite | side | mode | commit | x AR | step | phases |",
        "|---|---|---|---|---|---|---|",
    ]
    return "\n".join(head + rows) + "\n"


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    d = Path(argv[0])
    sw, best = sweep(d)
    if "--after-env" in argv:
        print(after_env(best))
        return 0
    txt, _ = ncu_tables(d)
    print("# Step cost (issue 28): results\n")
    for name in ("env.txt",):
        if (d / name).exists():
            print("```\n" + (d / name).read_text()[:1500] + "\n```\n")
    print(txt)
    print(after_ncu(d))
    print(sw)
    ps = d / "sweep_pure.txt"
    if ps.exists():
        print(ps.read_text())
    print(benches(d))
    print(real_benches(d))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
