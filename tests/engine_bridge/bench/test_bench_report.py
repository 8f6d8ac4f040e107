"""Bench reports: hand-computed aggregation on fixed measurements, the schema, and a real CLI sweep
whose JSON, CSV, Markdown and HTML agree (and whose HTML images decode)."""

from __future__ import annotations

import base64
import copy
import csv
import io
import json
import math
import re
from html.parser import HTMLParser

import pytest

from engine_bridge.bench import stats as st
from engine_bridge import cli
from engine_bridge.bench.runner import BenchResult, BenchRow, BenchSpec, Measurement
from engine_bridge.bench.report import build_report, summary_table, to_csv, to_json, to_markdown
from engine_bridge.bench.report_html import to_html
from engine_bridge.bench.schema import SCHEMA_ID, ReportSchemaError, check_report, validate
from engine_bridge.bench.suites import Prompt, Suite
from engine_bridge.runtime.config import EngineConfig, KVTypes
from engine_bridge.runtime.records import PHASES, RunSummary

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


# -- fixed inputs -----------------------------------------------------------------------------------
def _m(row, pid, rep, n_gen, t_gen, ttft, *, steps=None, drafted=0, accepted=0, verify=0.001, tokens=None):
    steps = steps or [1] * n_gen
    s = RunSummary(
        mode="ar" if row == "ar" else "chain",
        n_prompt=20,
        n_prompt_reused=0,
        n_generated=n_gen,
        n_steps=len(steps),
        n_drafted=drafted,
        n_accepted=accepted,
        t_prefill=0.01,
        t_first_token=ttft,
        t_generate=t_gen,
        budget_requested=0,
        budget_effective=0,
        budget_note="",
        finish_reason="max_tokens",
    )
    phases = {p: 0.0 for p in PHASES} | {"verify": verify}
    return Measurement(row, pid, rep, rep, s.to_dict(), phases, list(steps), tokens or list(range(n_gen)), "")


@pytest.fixture()
def fixed_result(tmp_path) -> BenchResult:
    suite = Suite("fixed", "fixed.jsonl", "0" * 64, (Prompt("p1", text="one"), Prompt("p2", text="two")))
    spec = BenchSpec(engine=EngineConfig(target=tmp_path / "t.gguf", draft=tmp_path / "d.gguf"), suite=suite, reps=2)
    kv = KVTypes()
    rows = [
        BenchRow("ar", "ar", "autoregressive", "ar", 0, kv, "", "ar", status="ok"),
        BenchRow("c0", "spec", "budget=4", "chain", 4, kv, "base", "ar", status="cancelled"),
    ]
    p1_steps, p2_steps = [3, 3, 2, 2], [2, 2, 2, 2, 1, 1]
    ms = [
        # AR: rep 0 -> 20 tok / 1.25 s = 16 tok/s; rep 1 -> 20 / 1.0 = 20 tok/s
        _m("ar", "p1", 0, 10, 1.0, 0.010),
        _m("ar", "p2", 0, 10, 0.25, 0.010),
        _m("ar", "p1", 1, 10, 0.5, 0.010),
        _m("ar", "p2", 1, 10, 0.5, 0.010),
        # speculative: rep 0 -> 20 / 0.5 = 40 tok/s; rep 1 -> 20 / 0.75 = 26.667 tok/s
        _m("c0", "p1", 0, 10, 0.25, 0.004, steps=p1_steps, drafted=8, accepted=6, verify=0.001),
        _m("c0", "p2", 0, 10, 0.25, 0.006, steps=p2_steps, drafted=8, accepted=2, verify=0.002),
        _m("c0", "p1", 1, 10, 0.5, 0.008, steps=p1_steps, drafted=8, accepted=6, verify=0.001),
        # p2 rep 1 commits different tokens than the baseline: not lossless
        _m("c0", "p2", 1, 10, 0.25, 0.002, steps=p2_steps, drafted=8, accepted=2, verify=0.002, tokens=[99] * 10),
        # an incomplete third repetition (cancelled): only per-prompt figures may use it
        _m("c0", "p1", 2, 10, 0.4, 0.005, steps=p1_steps, drafted=8, accepted=6, verify=0.001),
    ]
    machine = {
        "os": "test-os",
        "python": "3",
        "cpu": "test cpu",
        "n_cpus": 2,
        "memory_bytes": 2**30,
        "gpus": [],
        "gpu_info": "",
        "driver": "",
    }
    build = {
        "build_commit": "0c1e57098",
        "llama_cpp_python": "0.3.36",
        "backend": "cpu",
        "system_info": "",
        "cmake_args": "",
    }
    return BenchResult(
        spec, rows, ms, machine, build, started_at=1_700_000_000.0, finished_at=1_700_000_010.0, cancelled=True
    )


def test_aggregates_match_hand_computed_values(fixed_result):
    rep = build_report(fixed_result)
    ar, sp = rep["rows"]
    assert rep["status"] == "cancelled" and rep["schema"] == SCHEMA_ID
    assert ar["samples_ts"] == pytest.approx([16.0, 20.0])
    assert ar["avg_ts"] == pytest.approx(18.0)
    assert ar["stddev_ts"] == pytest.approx(math.sqrt(8.0))
    assert (ar["ts_ci_lo"], ar["ts_ci_hi"]) == pytest.approx((16.0, 20.0))
    assert ar["ttft_ms"] == pytest.approx(10.0) and ar["prefill_ts"] == pytest.approx(2000.0)
    assert ar["acceptance_rate"] is None and ar["mean_commit_len"] == pytest.approx(1.0)
    # the third, incomplete repetition is left out of the row
    assert sp["n_reps"] == 2
    assert sp["samples_ts"] == pytest.approx([40.0, 80.0 / 3])
    assert sp["avg_ts"] == pytest.approx(100.0 / 3)
    assert sp["stddev_ts"] == pytest.approx((40.0 - 80.0 / 3) / math.sqrt(2))
    assert sp["ttft_ms"] == pytest.approx(5.0) and sp["stats"]["ttft_ms"]["sd"] == pytest.approx(0.0)
    assert sp["acceptance_rate"] == pytest.approx(0.5)  # (6 + 2) / (8 + 8) per repetition
    assert sp["mean_commit_len"] == pytest.approx(2.0)  # 20 tokens / 10 steps
    assert sp["phase_verify_ms"] == pytest.approx(1.6)  # (4 x 1 ms + 6 x 2 ms) / 10 steps
    assert sp["draft_n"] == 16 and sp["draft_n_accepted"] == 8 and sp["n_gen"] == 20 and sp["n_prompt"] == 40
    assert sp["commit_hist"] == {"1": 4, "2": 14, "3": 6}
    # speed-up = mean(40, 26.67) / mean(16, 20); each bootstrap extreme carries 1/16 of the mass,
    # so the 95 % interval is exactly (worst spec / best AR, best spec / worst AR)
    assert sp["speedup"] == pytest.approx((100.0 / 3) / 18.0)
    assert (sp["speedup_ci_lo"], sp["speedup_ci_hi"]) == pytest.approx(((80.0 / 3) / 20.0, 40.0 / 16.0))
    assert sp["lossless"] is False and sp["lossless_mismatches"] == ["p2"]
    # delta vs the AR baseline: 15.33 against sqrt(8 + 88.9) = 9.84 -> real
    assert ar["is_baseline"] and ar["delta_flag"] == "baseline"
    assert sp["delta_ts"] == pytest.approx(100.0 / 3 - 18.0) and sp["delta_flag"] == st.REAL
    prompts = {(p["row_id"], p["prompt_id"]): p for p in rep["prompts"]}
    p1 = prompts[("c0", "p1")]
    assert p1["n_reps"] == 3 and p1["samples_ts"] == pytest.approx([40.0, 20.0, 25.0])
    assert p1["speedup"] == pytest.approx((85.0 / 3) / 15.0)  # vs AR p1 samples 10 and 20
    assert p1["lossless"] is True and prompts[("c0", "p2")]["lossless"] is False
    assert len(rep["runs"]) == 9


def test_baseline_can_be_any_row(fixed_result):
    rep = build_report(fixed_result, baseline="c0")
    ar, sp = rep["rows"]
    assert sp["is_baseline"] and not ar["is_baseline"]
    assert ar["delta_ts"] == pytest.approx(18.0 - 100.0 / 3) and ar["delta_flag"] == st.REAL
    assert build_report(fixed_result, baseline=1)["settings"]["baseline_row"] == "c0"
    with pytest.raises(ValueError):
        build_report(fixed_result, baseline="c9")


def test_schema_accepts_reports_and_names_every_breakage(fixed_result):
    rep = build_report(fixed_result)
    assert validate(rep) == []
    assert validate(json.loads(to_json(rep))) == []
    broken = copy.deepcopy(rep)
    del broken["rows"][0]["avg_ts"]
    broken["rows"][1]["n_gen"] = "twenty"
    broken["rows"][1]["samples_ts"].append(None)
    broken["schema"] = "llama-bench"
    broken["prompts"][0]["lossless"] = "yes"
    errors = validate(broken)
    assert any("$.rows[0]: missing 'avg_ts'" in e for e in errors)
    assert any(e.startswith("$.rows[1].n_gen: expected integer") for e in errors)
    assert any(e.startswith("$.rows[1].samples_ts[2]: expected number") for e in errors)
    assert any(e.startswith("$.schema:") for e in errors)
    assert any(e.startswith("$.prompts[0].lossless:") for e in errors)
    with pytest.raises(ReportSchemaError) as exc:
        check_report(broken)
    assert len(exc.value.errors) == len(errors) == 5
    # booleans are not integers, negative counts are refused
    bad = copy.deepcopy(rep)
    bad["rows"][0]["model_size"] = True
    bad["rows"][0]["draft_n"] = -1
    assert len(validate(bad)) == 2


# -- a real sweep through the CLI ------------------------------------------------------------------
class _Tables(HTMLParser):
    """Collects every <table> as rows of cell texts, and every <img> src."""

    def __init__(self):
        super().__init__()
        self.tables, self.images, self._cell = [], [], None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = ""
        elif tag == "img":
            self.images.append(dict(attrs)["src"])

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.tables[-1][-1].append(self._cell)
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data


def _md_rows(md: str, heading: str) -> list[list[str]]:
    section = md.split(heading, 1)[1].split("\n## ", 1)[0]
    lines = [ln for ln in section.splitlines() if ln.startswith("|")]
    return [[c.strip() for c in re.split(r"(?<!\\)\|", ln)[1:-1]] for ln in lines[2:]]


@pytest.fixture(scope="module")
def cli_sweep(tiny_pair, tmp_path_factory):
    target, draft = tiny_pair
    out = tmp_path_factory.mktemp("bench-out")
    paths = {k: out / f"r.{k}" for k in ("json", "csv", "md", "html")}
    rc = cli.main(
        [
            "bench",
            "--target",
            str(target),
            "--draft",
            str(draft),
            "--threads",
            "1",
            "--n-ctx",
            "512",
            "--suite",
            "code",
            "--limit",
            "2",
            "--reps",
            "2",
            "--max-tokens",
            "12",
            "--sweep",
            "budget=2,6",
            "--quiet",
            "--out",
            str(paths["json"]),
            "--csv",
            str(paths["csv"]),
            "--md",
            str(paths["md"]),
            "--html",
            str(paths["html"]),
        ]
    )
    return rc, {k: p.read_text(encoding="utf-8") for k, p in paths.items()}


def test_cli_sweep_exports_agree(cli_sweep):
    rc, files = cli_sweep
    assert rc == 0
    rep = json.loads(files["json"])
    assert validate(rep) == []
    rows = rep["rows"]
    assert [r["id"] for r in rows] == ["ar", "c0", "c1"] and [r["budget"] for r in rows] == [0, 2, 6]
    assert all(r["status"] == "ok" and len(r["samples_ts"]) == 2 for r in rows)
    assert all(r["lossless"] is True for r in rows[1:])
    assert rep["settings"]["sweep"] == {"budget": ["2", "6"]} and rep["settings"]["seeds"] == [0, 1]
    assert rep["build"]["build_commit"] and rep["machine"]["cpu"] and rep["machine"]["n_cpus"] >= 1
    assert (
        rows[0]["model_filename"] == "tiny-qwen3-target.gguf" and rows[1]["draft_filename"] == "tiny-qwen3-dflash.gguf"
    )

    # CSV: full-precision numbers, identical to the JSON
    csv_rows = list(csv.DictReader(io.StringIO(files["csv"])))
    assert [r["id"] for r in csv_rows] == ["ar", "c0", "c1"]
    for j, c in zip(rows, csv_rows):
        assert float(c["avg_ts"]) == j["avg_ts"] and float(c["stddev_ts"]) == j["stddev_ts"]
        assert [float(x) for x in c["samples_ts"].split(";")] == j["samples_ts"]
        assert int(c["n_gen"]) == j["n_gen"] and int(c["budget"]) == j["budget"]
        assert float(c["ttft_ms_sd"]) == j["stats"]["ttft_ms"]["sd"]
        if j["kind"] == "spec":
            assert float(c["speedup"]) == j["speedup"] and float(c["acceptance_rate"]) == j["acceptance_rate"]

    # Markdown and HTML: the same rounded figures as the JSON
    headers, _ = summary_table(rep)
    col = {h: i for i, h in enumerate(headers)}
    md_rows = _md_rows(files["md"], "## Results")
    page = _Tables()
    page.feed(files["html"])
    html_rows = page.tables[0][1:]
    assert page.tables[0][0] == headers
    for j, m, h in zip(rows, md_rows, html_rows, strict=True):
        for cells in (m, h):
            assert cells[col["row"]] == j["id"]
            assert cells[col["tok/s"]] == f"{j['avg_ts']:.2f}"
            assert cells[col["sd"]] == f"{j['stddev_ts']:.2f}"
            assert cells[col["95% CI"]] == f"[{j['ts_ci_lo']:.2f}, {j['ts_ci_hi']:.2f}]"
            assert cells[col["TTFT ms"]] == f"{j['ttft_ms']:.2f}"
            if j["kind"] == "spec":
                assert cells[col["speed-up"]] == f"{j['speedup']:.3f}"
                assert cells[col["accept"]] == f"{j['acceptance_rate']:.3f}"
                assert cells[col["Δ tok/s vs baseline"]] == f"{j['delta_ts']:+.2f}"
                assert cells[col["verdict"]] == j["delta_flag"]
                assert cells[col["lossless"]] == "yes"
    # per-prompt tables carry one line per (row, prompt)
    assert len(_md_rows(files["md"], "## Per prompt")) == len(rep["prompts"]) == 6 == len(page.tables[2]) - 1


def test_html_is_self_contained_and_its_images_decode(cli_sweep):
    from matplotlib.image import imread

    _, files = cli_sweep
    page = _Tables()
    page.feed(files["html"])
    assert len(page.images) == 3
    for src in page.images:
        assert src.startswith("data:image/png;base64,")
        data = base64.b64decode(src.split(",", 1)[1], validate=True)
        assert data[:8] == PNG_MAGIC
        img = imread(io.BytesIO(data), format="png")
        assert img.ndim == 3 and img.shape[0] > 50 and img.shape[1] > 100
        assert img.std() > 0  # something was drawn
    # nothing fetched from elsewhere
    assert not re.search(r"""(src|href)=["'](https?:|//)""", files["html"])


def test_every_format_renders_the_fixed_report(fixed_result):
    rep = build_report(fixed_result)
    md = to_markdown(rep)
    assert "| c0 | budget=4 | cancelled |" in md and "33.33" in md and "NO" in md
    assert to_csv(rep).count("\n") == 3
    assert "<table>" in to_html(rep)


def test_csv_and_markdown_carry_hostile_names_as_text(fixed_result, tmp_path):
    """issue 32: a path or label starting with = ran as a spreadsheet formula; raw HTML from paths
    went into the Markdown report."""
    import dataclasses

    hostile = '=HYPERLINK("http://evil")<img src=x onerror=alert(1)>.gguf'
    spec = dataclasses.replace(
        fixed_result.spec,
        engine=fixed_result.spec.engine.replace(target=tmp_path / hostile, draft=tmp_path / ("@" + hostile)),
    )
    rows = [
        dataclasses.replace(fixed_result.rows[0], label="+cmd|' /C calc'!A0"),
        dataclasses.replace(fixed_result.rows[1], label="-2+3"),
    ]
    rep = build_report(dataclasses.replace(fixed_result, spec=spec, rows=rows))
    cells = [c for row in csv.reader(io.StringIO(to_csv(rep))) for c in row]
    formula = [c for c in cells if c[:1] in ("=", "+", "-", "@", "\t", "\r") and not _is_number(c)]
    assert formula == [], formula
    assert any(c.startswith("'=HYPERLINK") or c.startswith("'+cmd") for c in cells)
    md = to_markdown(rep)
    assert "<img" not in md and "&lt;img" in md


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False
