"""Sitting s83's tables, computed from its own files (so no figure in the docs is worked out by hand).

Reads r83-json.txz (the bench JSONs: 0031 on, and DFLASH_MMVQ_MMA=0), bench1-humaneval.md (0031 + 0032's
split on) and the two split A/B reports. Prints, per suite and row: tok/s, x AR (each run against its own
AR row), commit length, step cost in AR tokens (commit / x AR), verify ms, and the lossless judge's verdict.
Run: python3 summary.py > summary.txt
"""

import io
import json
import re
import tarfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def bench_files():
    """(file name, bench JSON) of each bench in r83-json.txz (bench-*: 0031 on, bench0-*: off), by name."""
    with tarfile.open(HERE / "r83-json.txz") as tar:
        for member in sorted(tar.getmembers(), key=lambda m: m.name):
            if re.fullmatch(r"bench0?-[a-z0-9-]+\.json", member.name):
                yield member.name, json.load(io.TextIOWrapper(tar.extractfile(member)))


def bench_rows():
    for name, data in bench_files():
        side = "0031 off" if name.startswith("bench0-") else "0031 on"
        yield data["settings"]["suite"]["name"], side, data["rows"]


def partings():
    """Per bench and row: the runs whose text parted from AR's, and how many of those partings the
    judge called a near-tie (AR's top-2 margin under its tolerance at the parting)."""
    for name, data in bench_files():
        for row in data["rows"]:
            if row["label"] == "autoregressive":
                continue
            runs = [r for r in data["runs"] if r["row_id"] == row["id"]]
            parted = [r["divergence"] for r in runs if r.get("divergence")]
            yield name, row["label"], len(runs), len(parted), sum(1 for d in parted if d.get("near_tie"))


def md_rows(path):
    """The summary rows (ar, c0..c3) of a bench's markdown: label, tok/s, x AR, commit, lossless."""
    out = []
    for line in (HERE / path).read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 15 and re.fullmatch(r"ar|c[0-9]", cells[0]) and cells[2] == "ok":
            speed = 1.0 if cells[6] == "–" else float(cells[6])
            out.append((cells[1], float(cells[3]), speed, float(cells[11]), cells[14]))
    return out


def ab_rows(name):
    """The phase rows of a gpu_fuse_ab.py report: (phase, cells), cells[0] the phase, then the runs
    (0 #1, 1 #1, ...), the two medians, their ratio and the AR tokens."""
    for line in (HERE / name).read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) > 4 and re.fullmatch(r"[a-z]+[0-9]*", cells[0]) and cells[0] != "phase":
            yield cells[0], cells


def main():
    print("| suite | 0031 | row | tok/s | x AR | commit | step (AR tokens) | verify ms | lossless |")
    print("|---|---|---|---|---|---|---|---|---|")
    for suite, side, rows in bench_rows():
        for r in rows:
            speed = r["speedup"] or 1.0
            lossless = "–" if r["lossless"] is None else ("yes" if r["lossless"] else "NO")
            print(
                f"| {suite} | {side} | {r['label']} | {r['avg_ts']:.1f} | {speed:.3f} | {r['mean_commit_len']:.3f} "
                f"| {r['mean_commit_len'] / speed:.2f} | {r['phase_verify_ms']:.3f} | {lossless} |"
            )
    print("\nRuns that parted from AR's text, and how many of those partings were near-ties:\n")
    print("| bench | row | runs | parted | near-ties |")
    print("|---|---|---|---|---|")
    for name, label, n, parted, near in partings():
        print(f"| {name} | {label} | {n} | {parted} | {near} |")
    print("\nHumanEval, 0031 + 0032's split (DFLASH_MMVQ_MMA_SPLIT=1, its own AR row), bench1-humaneval.md:\n")
    print("| row | tok/s | x AR | commit | step (AR tokens) | lossless |")
    print("|---|---|---|---|---|---|")
    for label, ts, speed, commit, lossless in md_rows("bench1-humaneval.md"):
        print(f"| {label} | {ts:.1f} | {speed:.3f} | {commit:.3f} | {commit / speed:.2f} | {lossless} |")
    print("\n0032's split in the engine, 1/0 of the medians (gpu_fuse_ab.py), two runs of the A/B:\n")
    print("| phase | 2 rounds (ab_split.txt) | 4 rounds (ab_split4.txt) |")
    print("|---|---|---|")
    ratios, faster = {}, {}
    for name in ("ab_split.txt", "ab_split4.txt"):
        for phase, cells in ab_rows(name):
            ratios.setdefault(phase, {})[name] = cells[-2]
            runs = [float(c) for c in cells[1:-4]]  # 0 #1, 1 #1, 0 #2, 1 #2, ...
            wins = sum(b < a for a, b in zip(runs[0::2], runs[1::2]))
            n = faster.get(phase, (0, 0))
            faster[phase] = (n[0] + wins, n[1] + len(runs) // 2)
    for phase, by in ratios.items():
        print(f"| {phase} | {by.get('ab_split.txt', '–')} | {by.get('ab_split4.txt', '–')} |")
    print("\nRound pairs (0 #k against 1 #k) in which the split side was faster, both A/Bs together:\n")
    for phase, (wins, n) in faster.items():
        print(f"- {phase}: {wins} of {n}")


if __name__ == "__main__":
    main()
