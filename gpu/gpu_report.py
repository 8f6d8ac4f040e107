"""Turns a GPU run's results folder (gpu/gpu_bench.sh) into the markdown tables of
docs/benchmarks.md: per pair, our AR / chain / tree against upstream's llama-speculative-simple,
llama-completion and llama-bench, with ratios, acceptance, commit length, step phases, step cost,
host overhead and memory.

Usage: python gpu/gpu_report.py RESULTS_DIR [--pairs q15,tiny] > report.md
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path


def _load(p: Path):
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None


def _f(x, fmt="{:.1f}", none="–"):
    return none if x is None else fmt.format(x)


def machine(r: Path) -> list[str]:
    out = []
    gpu = (r / "gpu.txt").read_text().strip() if (r / "gpu.txt").exists() else "?"
    env = (r / "env.txt").read_text() if (r / "env.txt").exists() else ""
    nvcc = re.search(r"release ([\d.]+), (V[\d.]+)", env)
    cpu = re.search(r"^(\d+)$", env, re.M)
    doc = _load(r / "doctor.json") or {}
    build = doc.get("build", doc) if isinstance(doc, dict) else {}
    cmake = build.get("cmake_args") or ""
    fa = "on" if "GGML_CUDA_FA_ALL_QUANTS=ON" in cmake else "off"
    out.append(f"- GPU: {gpu} (name, driver, memory)")
    out.append(
        f"- CUDA: nvcc {nvcc.group(1) + ' ' + nvcc.group(2) if nvcc else '?'}; {cpu.group(1) if cpu else '?'} CPU cores"
    )
    out.append(
        f"- llama-cpp-python {build.get('llama_cpp_python', '?')} (llama.cpp {build.get('llama_cpp_commit', '?')}), "
        f"backend {build.get('backend', '?')}, CMake `{cmake}`; GGML_CUDA_FA_ALL_QUANTS {fa} "
        f"(upstream's tools built from the same tree with the same GGML flags)"
    )
    tests = r / "cuda_tests.log"
    if tests.exists():
        lines = [x for x in tests.read_text().splitlines() if re.search(r"\d+ (passed|failed)", x)]
        out.append(f"- engine tests on CUDA: {lines[-1].strip('= ') if lines else '?'}")
    return out


def mem_line(r: Path, pair: str) -> str | None:
    p = r / "gpumem.txt"
    if not p.exists():
        return None
    vals = {}
    for line in p.read_text().splitlines():
        m = re.match(r"(\S+) peak_gpu_mem_mib=(\d+) idle_mib=(\d+)", line)
        if m:
            vals[m.group(1)] = int(m.group(2)) - int(m.group(3))
    o, u = vals.get(f"ours_{pair}"), vals.get(f"upstream_{pair}")
    if o is None and u is None:
        return None
    return (
        f"- GPU memory, peak above idle while the step ran (nvidia-smi, 200 ms samples): ours {_f(o, '{}')} MiB "
        f"(one process: target + drafter, n_ctx 4096, up to 64 tree sequences), upstream {_f(u, '{}')} MiB "
        f"(largest of its processes)"
    )


def pair_table(r: Path, pair: str) -> list[str]:
    ours = _load(r / f"ours_{pair}.json")
    up = _load(r / f"upstream_{pair}.json")
    if not ours and not up:
        return [f"(no results for {pair})"]
    out = []
    if ours:
        p = ours.get("pair", {})
        out.append(
            f"Target {Path(p.get('target', '?')).name} ({p.get('target_params', 0) / 1e9:.2f} B params, "
            f"vocab {p.get('n_vocab', '?')}), drafter {Path(p.get('draft', '?')).name} "
            f"({p.get('draft_params', 0) / 1e6:.0f} M params, block {p.get('block_size', '?')}, "
            f"target layers {p.get('target_layers', '?')}); KV {p.get('target_kv', '?')}, flash attention "
            f"{p.get('flash_attn', '?')}, n_ctx {p.get('n_ctx', '?')}, greedy."
        )
        out.append("")
    rows = {(x["mode"], x["budget"]): x for x in (ours or {}).get("rows", [])}
    ar = rows.get(("ar", 0))
    ar_ms = ar["step_ms"] if ar else None
    spec = {int(k): v for k, v in (up or {}).get("speculative", {}).items()}
    comp = (up or {}).get("completion_tok_per_s")
    comp_ms = (up or {}).get("completion_ms_per_token")
    out.append(
        "| run | tok/s | vs upstream | acceptance | commit len | step ms | step cost (x AR token) | "
        "draft / inject / verify / accept / other ms | host overhead |"
    )
    out.append("|---|---|---|---|---|---|---|---|---|")

    def ours_row(label, x, ref):
        ph = x["phase_ms"]
        phs = " / ".join(f"{ph[k]:.3f}" for k in ("draft", "inject", "verify", "accept", "other"))
        vs = f"{x['tok_per_s'] / ref:.2f}x" if ref else "–"
        cost = x["step_ms"] / ar_ms if ar_ms else None
        out.append(
            f"| {label} | {x['tok_per_s']:.1f} ± {x.get('tok_per_s_sd', 0):.1f} | {vs} | "
            f"{x['acceptance_rate']:.1%} | {x['mean_commit_len']:.2f} | {x['step_ms']:.3f} | "
            f"{_f(cost, '{:.2f}')} | {phs} | {x['host_overhead']:.1%} |"
        )

    if ar:
        ours_row("ours, autoregressive", ar, comp)
    for (mode, b), x in sorted(rows.items()):
        if mode == "chain":
            ours_row(f"ours, chain n_max {b}", x, spec.get(b, {}).get("tok_per_s"))
    for (mode, b), x in sorted(rows.items()):
        if mode == "tree":
            ours_row(f"ours, tree {b} nodes", x, None)
    if comp:
        out.append(f"| llama-completion (upstream AR) | {comp:.1f} | – | – | 1.00 | {comp_ms:.3f} | 1.00 | – | – |")
    lb = (up or {}).get("llama_bench")
    if lb:
        out.append(
            f"| llama-bench tg128 | {lb['avg_ts']:.1f} ± {lb['stddev_ts']:.1f} | – | – | – | "
            f"{1e3 / lb['avg_ts']:.3f} | – | – | – |"
        )
    for b, x in sorted(spec.items()):
        samp = x.get("target_sampling_ms_per_step")
        out.append(
            f"| llama-speculative-simple n_max {b} | {x['tok_per_s']:.1f} ± {x.get('tok_per_s_sd', 0):.1f} | 1.00x | "
            f"{x['acceptance_rate']:.1%} | {_f(x.get('mean_commit_len'), '{:.2f}')} | "
            f"{_f(x.get('step_ms'), '{:.3f}')} | {_f(x.get('step_cost'), '{:.2f}')} | "
            f"target sampling on the host {_f(samp, '{:.3f}')} ms/step | – |"
        )
    bs = (up or {}).get("backend_sampling")
    if bs:
        out.append(
            f"| llama-completion -bs | {bs['completion_tok_per_s']:.1f} | – | – | 1.00 | "
            f"{bs['completion_ms_per_token']:.3f} | 1.00 | – | – |"
        )
        for b, x in sorted({int(k): v for k, v in bs.get("speculative", {}).items()}.items()):
            out.append(
                f"| llama-speculative-simple -bs n_max {b} | {x['tok_per_s']:.1f} | – | "
                f"{x['acceptance_rate']:.1%} | {_f(x.get('mean_commit_len'), '{:.2f}')} | "
                f"{_f(x.get('step_ms'), '{:.3f}')} | {_f(x.get('step_cost'), '{:.2f}')} | – | – |"
            )
    elif (up or {}).get("backend_sampling_error"):
        out.append("| upstream with -bs | failed (see upstream_*.json) | | | | | | | |")
    out.append("")
    ratios = []
    for b, x in sorted(spec.items()):
        o = rows.get(("chain", b))
        if o:
            ratios.append(f"chain n_max {b}: ours / upstream = {o['tok_per_s'] / x['tok_per_s']:.2f}")
            if x.get("step_cost") and ar_ms:
                ratios.append(
                    f"step cost n_max {b}: ours {o['step_ms'] / ar_ms:.2f}x vs upstream {x['step_cost']:.2f}x"
                )
    if ar and comp:
        ratios.append(f"our AR / llama-completion = {ar['tok_per_s'] / comp:.2f}")
    if ar and lb:
        ratios.append(f"our AR / llama-bench tg128 = {ar['tok_per_s'] / lb['avg_ts']:.2f}")
    if ratios:
        out.append("Ratios (same run): " + "; ".join(ratios) + ".")
    m = mem_line(r, pair)
    if m:
        out.append("")
        out.append(m)
    if ours and ours.get("memory"):
        mem = ours["memory"]
        out.append(
            f"- our process: weights {mem['target_weights'] / 2**20:.0f} + {mem.get('draft_weights', 0) / 2**20:.0f} MiB, "
            f"host RSS {mem['process_rss'] / 2**20:.0f} MiB"
        )
    return out


def diag(r: Path, pair: str) -> list[str]:
    d = _load(r / f"diag_{pair}.json")
    if not d:
        return []
    out = [f"Diagnostics ({pair}, gpu/gpu_diag.py):", ""]
    s = d.get("sampling", {})
    if "backend" in s:
        for mode in ("ar", "chain7"):
            b, h = s["backend"][mode], s["host"][mode]
            out.append(
                f"- greedy argmax on the backend vs on the host, {mode}: {b['tok_per_s']:.1f} vs "
                f"{h['tok_per_s']:.1f} tok/s ({b['step_ms']:.3f} vs {h['step_ms']:.3f} ms/step)"
            )
    inj = d.get("inject_sync", {})
    if "sync" in inj:
        f = lambda k: sum(x["tok_per_s"] for x in inj[k]) / len(inj[k])  # noqa: E731
        out.append(
            f"- inject phase closed by a sync vs left asynchronous (chain 7): {f('sync'):.1f} vs {f('nosync'):.1f} tok/s"
        )
    calls = d.get("calls", {})
    for label, c in calls.items():
        if not isinstance(c, dict) or "calls" not in c:
            continue
        top = sorted(c["calls"].items(), key=lambda kv: -kv[1]["us_per_step"])
        parts = ", ".join(f"{k.split('.')[-1]} {v['us_per_step']:.0f} µs ({v['calls_per_step']:.1f}x)" for k, v in top)
        out.append(
            f"- {label}: step {c['step_ms']:.3f} ms (instrumented; {c['plain_step_ms']:.3f} plain): inside llama.cpp "
            f"{c['in_llama_calls_ms']:.3f} ms, Python {c['python_ms']:.3f} ms ({c['python_fraction']:.1%}); {parts}"
        )
    kv = d.get("kv", {})
    if kv:
        out.append("- KV cache types (flash attention on; tok/s AR / chain 7, 128 tokens):")
        for k, v in kv.items():
            if "error" in v:
                out.append(f"  - {k}: {v['error'][:200]}")
            else:
                chk = "; ".join(v.get("checks", []))
                out.append(
                    f"  - {k}: {v['ar']['tok_per_s']:.1f} / {v['chain7']['tok_per_s']:.1f}"
                    + (f" — {chk}" if chk else "")
                )
    ns = d.get("nseq", {})
    if "n_seq_1" in ns:
        parts = []
        for label in ("n_seq_64", "n_seq_1", "n_seq_64b", "n_seq_1b"):
            if label in ns:
                r = ns[label]
                parts.append(
                    f"{label.rstrip('b')}: AR {r['ar']['tok_per_s']:.1f}, chain 7 {r['chain7']['tok_per_s']:.1f} tok/s, "
                    f"GPU {r.get('gpu_mem_mib')} MiB"
                )
        out.append("- target context for 64 sequences (tree-capable) vs 1: " + "; ".join(parts))
    mem = d.get("memory", {})
    if "engine" in mem:
        out.append(
            f"- GPU memory held by our process (nvidia-smi): {mem.get('gpu_mib_loaded')} MiB loaded, "
            f"{mem.get('gpu_mib_after_tree32')} MiB after a tree-32 run"
        )
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--pairs", default="q15,tiny")
    a = ap.parse_args(argv)
    r = Path(a.results)
    lines = machine(r) + [""]
    for pair in a.pairs.split(","):
        lines += [f"### Pair {pair}", ""] + pair_table(r, pair) + [""] + diag(r, pair) + [""]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
