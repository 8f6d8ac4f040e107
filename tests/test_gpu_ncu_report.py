"""gpu/gpu_ncu_report.py: the kernel tables read every profiled phase of a results folder. (A second
module-level PHASES, the bench rows' phase columns, once shadowed the profiled phases, and the
report kept only the one name both tuples shared, "inject".)"""

from __future__ import annotations

import csv
import json
from pathlib import Path

GPU = Path(__file__).resolve().parents[1] / "gpu"


def _ncu_csv(path: Path, launches: list[tuple[str, float]]) -> None:
    # the shape of `ncu --import R --csv --page raw`: a header, a units row, one row per launch
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["ID", "Kernel Name", "gpu__time_duration.sum"])
        w.writerow(["", "", "usecond"])
        for i, (name, us) in enumerate(launches):
            w.writerow([i, name, f"{us:.3f}"])


def test_every_profiled_phase_is_in_the_tables(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(GPU))
    import gpu_ncu_report as rep

    mmvq = "void mul_mat_vec_q<(ggml_type)12, 8, false>(const void *, const void *, float *)"
    phases = {
        "ar": [(mmvq.replace(", 8,", ", 1,"), 3.0), ("void rms_norm_f32<256>(const float *)", 1.0)],
        "verify8": [(mmvq, 6.0), (mmvq, 6.5), ("void rms_norm_f32<256>(const float *)", 1.0)],
        "draft8": [(mmvq, 4.0)],
        "inject": [("void k_set_rows<float>(const float *)", 2.0)],
    }
    for p, launches in phases.items():
        _ncu_csv(tmp_path / f"ncu_{p}.csv", launches * 2)  # two profiled iterations
        (tmp_path / f"ncu_{p}.json").write_text(json.dumps({"phase": p, "iters": 2}))
    text, per = rep.ncu_tables(tmp_path)
    assert set(per) == set(phases)
    assert per["verify8"]["n"] == 3 and abs(per["verify8"]["us"] - 13.5) < 1e-9
    assert per["verify8"]["fam"]["MMVQ (quantised mat-vec)"] == (2, 12.5)
    assert "mul_mat_vec_q<q4_K,8,false>" in per["verify8"]["kern"]
    assert "| verify8 | 3 | 13.5 |" in text and "| draft8 | 1 | 4.0 |" in text
