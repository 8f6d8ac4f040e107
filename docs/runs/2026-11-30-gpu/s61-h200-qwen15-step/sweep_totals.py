"""The MMVQ ceiling sweep of the 1.5B (gpu_verify_rows.py, one process a setting): each setting's verify
of n rows in units of its own one-row decode, and its total over 2..16 rows, the figures quoted in
docs/benchmarks.md "The 1.5B's step and kernels with patches 0001-0022".

    python docs/runs/2026-11-30-gpu/s61-h200-qwen15-step/sweep_totals.py   # reads r61.tgz beside it
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SETTINGS = ("default", "q4_K-c1", "q4_K-c16", "q6_K-c1", "q6_K-c16")


def main() -> None:
    with tarfile.open(HERE / "r61.tgz") as tar:
        for s in SETTINGS:
            rows = json.load(tar.extractfile(f"r/sweep_{s}.json"))["rows"]
            one = rows["1"]["ms_median"]
            ratios = " ".join(f"{n}:{rows[str(n)]['ms_median'] / one:.2f}" for n in (2, 4, 8, 9, 10, 12, 16))
            total = sum(rows[str(n)]["ms_median"] for n in range(2, 17))
            print(f"{s:9s} total 2..16 rows {total:6.2f} ms; x one row: {ratios}")


if __name__ == "__main__":
    main()
