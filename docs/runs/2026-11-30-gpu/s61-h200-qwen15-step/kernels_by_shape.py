"""MMVQ / MMQ / activation-quantise launches of the 1.5B's ar, verify8 and verify16 by kernel and grid
(one grid = one matrix shape), per decode, from the sitting's ncu CSVs: the "by shape" table of
docs/benchmarks.md "The 1.5B's step and kernels with patches 0001-0022".

    python docs/runs/2026-11-30-gpu/s61-h200-qwen15-step/kernels_by_shape.py   # reads r61.tgz beside it
"""

from __future__ import annotations

import collections
import csv
import io
import tarfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    with tarfile.open(HERE / "r61.tgz") as tar:
        for ph in ("ar", "verify8", "verify16"):
            text = tar.extractfile(f"r/ncu_{ph}.csv").read().decode()
            rows = [r for r in csv.reader(io.StringIO(text)) if r]
            h = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
            c = rows[h]
            k, t, g = c.index("Kernel Name"), c.index("gpu__time_duration.sum"), c.index("Grid Size")
            assert rows[h + 1][t] in ("us", "usecond"), rows[h + 1][t]
            agg: dict = collections.defaultdict(lambda: [0, 0.0])
            for r in rows[h + 2 :]:
                if "mul_mat" in r[k] or "quantize" in r[k]:
                    key = (r[k].split("(")[0].replace("void ", ""), r[g])
                    agg[key][0] += 1
                    agg[key][1] += float(r[t].replace(",", ""))
            print(f"{ph} (2 profiled decodes; per decode):")
            for (name, grid), (n, us) in sorted(agg.items(), key=lambda x: -x[1][1]):
                print(f"  {name:45s} grid {grid:16s} n {n // 2:3d}  {us / 2:7.1f} us  {us / n:6.2f} us each")


if __name__ == "__main__":
    main()
