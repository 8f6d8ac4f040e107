"""Fault-injection figures: runs the cases of tests/faults many times and prints how each family
ended -- cases tried, refused cleanly, recovered, lost (committed data missing), failed (a wrong
message, an exception, a dead process).

    .venv/bin/python benchmarks/faults.py                      # the full run (docs/benchmarks.md)
    .venv/bin/python benchmarks/faults.py --storm-runs 20 --kills 5   # a quick one

Families: a cancel storm on the default pair (engine_bridge.models.demo.demo_pair()), kill -9 of the
conversation store's and the library's writers, two processes on one store, a hostile Hub on
127.0.0.1, hostile chat templates, model files changed between check and load, a full disk.
The same case functions back the tests (tests/faults), which assert what these count.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "tests" / "faults", ROOT / "tests" / "engine_bridge"):
    sys.path.insert(0, str(p))

import pytest  # noqa: E402 - MonkeyPatch isolates the Hub settings as the tests do

from fault_outcomes import Tally  # noqa: E402


def storm(args, work: Path) -> Tally:
    from engine_bridge.models.demo import demo_pair

    from fault_storm import run_storm

    tally = Tally("cancel storm (chain + tree, swaps, settings)")
    target, drafter = demo_pair()
    res = run_storm(target, drafter, work, runs=args.storm_runs, seed=args.seed, n_threads=args.threads)
    # each run is a case, and each lossless check after the storm: recovered unless it failed
    tally.tried = args.storm_runs + res.lossless_checked
    tally.failed = len(res.failed_runs) + res.failed_after  # a run that raised is in failed_runs too
    tally.recovered = tally.tried - tally.failed
    tally.failures += res.failures
    tally.figures = {
        "pair": f"{target.name} + {drafter.name}",
        "threads": args.threads or "all",
        "runs": res.runs,
        "cancelled": res.cancelled,
        "completed": res.completed,
        "swaps": res.swaps,
        "settings_changes": res.settings_changes,
        "greedy_prefix_checks": res.prefix_checked,
        "lossless_checks_after": res.lossless_checked,
        "rss_growth_mb": round(res.rss_growth_mb, 1),
        "rss_growth_after_malloc_trim_mb": round(res.rss_trimmed_growth_mb, 1),
        # RSS (MB above the baseline) after every tenth run: a leak climbs, a high-water mark steps once
        "rss_mb_every_10_runs": [round((x - res.rss_before) / 2**20, 1) for x in res.rss_trace[9::10]],
        "max_cancel_delay_s": round(res.max_delay, 3),
        "seconds": round(res.seconds, 1),
    }
    return tally


def kills(args, work: Path) -> list[Tally]:
    from fault_store import kill_conversations_case, kill_library_case, library_models, two_writers_case

    conv = Tally("kill -9: conversation store")
    for seed in range(args.kills):
        conv.run(f"kill {seed}", kill_conversations_case, work / "conversations.sqlite3", seed)
    lib = Tally("kill -9: model library")
    models = library_models(work / "lib-models")
    for seed in range(args.kills):
        lib.run(f"kill {seed}", kill_library_case, work / "lib-data", models, seed)
    two = Tally("two processes on one store")
    two.run("conversations", two_writers_case, "conversations", work / "two.sqlite3", None, 150)
    two.run("library", two_writers_case, "library", work / "two-lib", models, 15)
    return [conv, lib, two]


def hostile_hub(args, work: Path) -> Tally:
    from fault_hub import all_cases, start_hostile, stop_hostile

    tally = Tally("hostile Hub (127.0.0.1)")
    cancel_ms = []
    with pytest.MonkeyPatch.context() as mp:
        hostile, other = start_hostile(mp, work / "hub")
        try:
            for r in range(args.hub_rounds):
                models, data = work / f"hub-round{r}" / "models", work / f"hub-round{r}"
                for name, case in all_cases(hostile, other, models, data):
                    out = tally.run(name, case)
                    if out is not None and "cancel_ms" in out.figures:
                        cancel_ms.append(out.figures["cancel_ms"])
        finally:
            stop_hostile(hostile, other)
    tally.figures = {
        "stalled_stream_cancel_ms_max": round(max(cancel_ms), 2) if cancel_ms else None,
        "stalled_stream_cancel_ms": [round(x, 2) for x in cancel_ms],
    }
    return tally


def templates(args, work: Path, base: Path) -> Tally:
    from fault_templates import HOSTILE, case_honest_after, case_template

    tally = Tally("hostile chat templates")
    growth = []
    for name in HOSTILE:
        out = tally.run(name, case_template, base, work / "templates", name)
        if out is not None:
            growth.append(out.figures["peak_growth_mb"])
    tally.run("honest after", case_honest_after, base, work / "templates")
    tally.figures = {"app_peak_rss_growth_mb_max": round(max(growth), 1) if growth else None}
    return tally


def model_files(args, work: Path, pair: tuple[Path, Path]) -> Tally:
    from engine_bridge.models import hub

    from fault_files import (
        ACTIONS,
        case_changed_before_load,
        case_file_size_limit,
        case_full_tmpfs,
        mount_tmpfs,
        unmount,
    )
    from fault_hub import quiet
    from hubserver import start_isolated

    tally = Tally("model files: changed before load, full disk")
    for action in ACTIONS:
        tally.run(action, case_changed_before_load, pair[0], pair[1], work, action)
    payload = bytes(range(256)) * 12_000
    with pytest.MonkeyPatch.context() as mp:
        server = quiet(start_isolated(mp, work / "disk-hub"))
        server.add("acme/models", "big-Q8_0.gguf", payload)
        server.add("acme/models", "README.md", b"# small\n", lfs=False)
        try:
            models = work / "disk-models"
            keep = hub.download_file("acme/models", "README.md", models)
            tally.run(
                "file-size limit",
                case_file_size_limit,
                server.url,
                models,
                "acme/models",
                "big-Q8_0.gguf",
                len(payload),
                keep,
            )
            small = work / "small"
            if mount_tmpfs(small):
                try:
                    tally.run(
                        "full tmpfs", case_full_tmpfs, small, "acme/models", "big-Q8_0.gguf", len(payload), "README.md"
                    )
                finally:
                    unmount(small)
                tally.figures["tmpfs"] = "mounted"
            else:
                tally.figures["tmpfs"] = "not allowed here (needs root): case skipped"
        finally:
            server.stop()
    return tally


def table(tallies: list[Tally]) -> str:
    rows = ["| family | cases tried | refused cleanly | recovered | lost | failed |", "|---|---:|---:|---:|---:|---:|"]
    tot = Tally("total")
    for t in tallies:
        rows.append(f"| {t.family} | {t.tried} | {t.refused} | {t.recovered} | {t.lost} | {t.failed} |")
        for k in ("tried", "refused", "recovered", "lost", "failed"):
            setattr(tot, k, getattr(tot, k) + getattr(t, k))
    rows.append(
        f"| **total** | **{tot.tried}** | **{tot.refused}** | **{tot.recovered}** | **{tot.lost}** | **{tot.failed}** |"
    )
    return "\n".join(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--storm-runs", type=int, default=200)
    ap.add_argument("--kills", type=int, default=50, help="kill -9 rounds per store")
    ap.add_argument("--hub-rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads in the storm (default: all cores)")
    ap.add_argument("--only", nargs="*", choices=["storm", "kills", "hub", "templates", "files"])
    ap.add_argument("--json", help="write the tallies here")
    args = ap.parse_args(argv)
    only = set(args.only or ["storm", "kills", "hub", "templates", "files"])

    from engine_bridge.models import synth

    t0 = time.monotonic()
    tallies: list[Tally] = []
    with tempfile.TemporaryDirectory(prefix="dflash-faults-") as tmp:
        work = Path(tmp)
        pair = None
        if only & {"templates", "files"}:
            pair = synth.write_pair(work / "tiny", synth.TargetSpec(), synth.DrafterSpec(), stem="tiny")
        families = [
            ("storm", lambda: [storm(args, work)]),
            ("kills", lambda: kills(args, work)),
            ("hub", lambda: [hostile_hub(args, work)]),
            ("templates", lambda: [templates(args, work, pair[0])]),
            ("files", lambda: [model_files(args, work, pair)]),
        ]
        for name, run in families:
            if name in only:
                t = time.monotonic()
                done = run()
                tallies += done
                print(
                    f"{name}: {sum(x.tried for x in done)} cases in {time.monotonic() - t:.0f} s",
                    file=sys.stderr,
                    flush=True,
                )
    print(
        f"# fault injection -- {platform.platform()}, Python {platform.python_version()}, "
        f"{time.monotonic() - t0:.0f} s\n"
    )
    print(table(tallies))
    print()
    for t in tallies:
        if t.figures:
            print(f"{t.family}: " + ", ".join(f"{k} {v}" for k, v in t.figures.items() if not isinstance(v, list)))
        for f in t.failures:
            print(f"  FAILED {f}")
    if args.json:
        Path(args.json).write_text(json.dumps([t.__dict__ for t in tallies], indent=1, default=str))
    return 1 if any(t.failed or t.lost for t in tallies) else 0


if __name__ == "__main__":
    sys.exit(main())
