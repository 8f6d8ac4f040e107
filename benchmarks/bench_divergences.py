"""Issue 29's divergence table from greedy bench reports: per suite and row, the runs identical to
AR, the partings, the near-ties by the judge's reason, those that are not, and (with a device's
measured drift bound) every parting whose margin lies above it.

    python benchmarks/bench_divergences.py mt-bench.json gsm8k.json humaneval.json \
        --drift docs/runs/2026-11-28-gpu/s38-h200-outrows-full/drift.json

A report may be a `dflash-studio bench --json` file, or a .tgz / .tar.gz of them (all its .json
members are read, in name order).
"""

from __future__ import annotations

import argparse
import json
import sys
import tarfile
from pathlib import Path

from engine_bridge.bench import divergences, drift


def _reports(path: Path):
    if path.name.endswith((".tgz", ".tar.gz")):
        with tarfile.open(path) as tar:
            for m in sorted(tar.getmembers(), key=lambda m: m.name):
                if m.isfile() and m.name.endswith(".json"):
                    f = tar.extractfile(m)
                    if f is not None:
                        yield json.load(f)
    else:
        yield json.loads(path.read_text())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reports", nargs="+", type=Path)
    ap.add_argument("--bound", type=float, help="the near-tie bound (default: --drift's)")
    ap.add_argument("--drift", help="a bench_drift.py JSON report: its bound")
    a = ap.parse_args(argv)
    bound = a.bound if a.bound is not None else (drift.load(a.drift).bound if a.drift else None)
    rows = []
    for p in a.reports:
        try:
            for rep in _reports(p):
                rows += divergences.rows_of(rep, bound)
        except (OSError, ValueError, KeyError, tarfile.TarError) as e:
            print(f"{p}: {e}", file=sys.stderr)
            return 2
    if bound is not None:
        print(f"near-tie bound: {bound:.3f}\n")
    print(divergences.markdown(rows, bound), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
