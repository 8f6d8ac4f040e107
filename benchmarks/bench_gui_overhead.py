"""GUI overhead: tok/s of the desktop app against the headless CLI on the same pair and prompt.

Headless: ``dflash-studio generate --chat --json``, a fresh process per run, as a user runs it;
and, as a control for first-run effects in a fresh process, a warm headless process that drives
the engine API the same way (``format_chat`` then ``generate``, KV reset before each run).
GUI: the real main window (offscreen but shown and painted: streaming into the transcript, live
plots, profiler and status bar) in one child process that loads the pair once and answers the
same prompt in a new chat whenever the parent says so; twice: with the engine in its own child
process (the app's default: tokens and steps cross a socket) and, with the ``engine_in_process``
setting, in the window's process. Each round runs one of each, in a random order (seeded), so
all four see the same machine load and none always goes first; GUI runs are paired with the
other runs of their round.

Both sides report ``RunSummary.tok_per_s``: generated tokens over the time from the end of prefill
to the last commit, greedy, same budget and context size, llama.cpp's default thread count.

Two figures come out, for each GUI:
* ratio = median(GUI tok/s) / median(CLI tok/s), and the median of the paired ratios (also
  against the warm headless process); and child-process GUI / in-process GUI, paired;
* UI CPU share = CPU time of the GUI's UI thread during generation / CPU time of the whole GUI
  process in that time. It does not depend on other load on the machine, and it bounds what the
  GUI can take from generation when the engine keeps every core busy (with the engine in a
  child, its CPU time is the child's and not counted: the share is of the window's process).
* CPU seconds per answer, which other load on the machine changes far less than tok/s: the
  window's own work (in process: its UI thread; with a child: the whole window process, its UI
  thread plus the thread that receives the stream) and, with a child, the child's CPU time. The
  difference between the two modes' window work is what the streaming across processes costs.

    .venv/bin/python benchmarks/bench_gui_overhead.py --runs 10 --max-tokens 256
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROMPT = "Write a short story about a lighthouse keeper who finds a message in a bottle."


def cli_run(args) -> dict:
    exe = Path(sys.executable).parent / "dflash-studio"
    cmd = [
        str(exe),
        "generate",
        "--target",
        args.target,
        "--draft",
        args.draft,
        "--prompt",
        args.prompt,
        "--chat",
        "--max-tokens",
        str(args.max_tokens),
        "--n-ctx",
        str(args.n_ctx),
        "--budget",
        str(args.budget),
        "--json",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)["summary"]


class Child:
    """A warm child process; one line on its stdin = one more answer, one JSON line back."""

    def __init__(self, args, role: str, in_process: bool = False):
        cmd = [
            sys.executable,
            __file__,
            f"--{role}-child",
            "--target",
            args.target,
            "--draft",
            args.draft,
            "--prompt",
            args.prompt,
            "--max-tokens",
            str(args.max_tokens),
            "--n-ctx",
            str(args.n_ctx),
            "--budget",
            str(args.budget),
        ] + (["--in-process"] if in_process else [])
        env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        ready = self._line()
        if ready.get("ready") is not True:
            raise RuntimeError(f"the {role} child did not load the pair: {ready}")

    def _line(self) -> dict:
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("the GUI child exited")
            if line.startswith("{"):
                return json.loads(line)

    def run(self) -> dict:
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        return self._line()

    def close(self) -> None:
        self.proc.stdin.write("quit\n")
        self.proc.stdin.flush()
        self.proc.wait(timeout=60)


def headless_child(args) -> int:
    """A warm headless process: the engine API exactly as the CLI's ``generate --chat`` drives it."""
    from engine_bridge.runtime.config import EngineConfig, GenerationSettings
    from engine_bridge.runtime.engine import Engine
    from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT

    eng = Engine.load(EngineConfig(target=args.target, draft=args.draft, n_ctx=args.n_ctx), preflight=PAIR_PREFLIGHT)
    settings = GenerationSettings(mode="chain", budget=args.budget, max_tokens=args.max_tokens)
    prompt = eng.format_chat([{"role": "user", "content": args.prompt}])
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if line.strip() != "go":
            break
        eng.reset()  # like a fresh CLI process: no KV reuse between runs
        s = eng.generate(prompt, settings).summary
        print(json.dumps({"tok_per_s": s.tok_per_s, "n_generated": s.n_generated}), flush=True)
    eng.close()
    return 0


def gui_child(args) -> int:
    """Inside the GUI process: the real app, offscreen; answers on request from stdin."""
    from PySide6.QtCore import QSocketNotifier

    from app.shell.app_settings import StudioSettings, open_settings
    from app.chat.conversations import ConversationStore
    from app.shell.main import make_application
    from app.shell.main_window import MainWindow

    app = make_application()
    tmp = tempfile.TemporaryDirectory(prefix="gui-bench-")
    qs = open_settings(Path(tmp.name) / "settings.ini")
    StudioSettings(
        target=args.target,
        drafter=args.draft,
        max_tokens=args.max_tokens,
        n_ctx=args.n_ctx,
        budget=args.budget,
        engine_in_process=args.in_process,
    ).save(qs)
    w = MainWindow(qsettings=qs, store=ConversationStore(Path(tmp.name) / "chat.sqlite3"))
    w.resize(1480, 900)
    w.show()
    clock = {}

    def engine_cpu() -> float:
        """CPU seconds of the engine's child process so far (0 when the engine runs in this one)."""
        pid = w.engine.engine_pid
        if pid is None:
            return 0.0
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def command() -> None:
        line = sys.stdin.readline().strip()
        if line == "go":
            w.new_chat()
            clock.update(ui=time.thread_time(), proc=time.process_time(), engine=engine_cpu())
            w.chat.input.setPlainText(args.prompt)
            w.chat.send_button.click()
        else:
            w.close()
            app.quit()

    notifier = QSocketNotifier(sys.stdin.fileno(), QSocketNotifier.Type.Read)
    notifier.activated.connect(command)

    def answered(res) -> None:
        s = res.summary
        ui, proc = time.thread_time() - clock["ui"], time.process_time() - clock["proc"]
        print(
            json.dumps(
                {
                    "tok_per_s": s.tok_per_s,
                    "n_generated": s.n_generated,
                    "ui_cpu_s": ui,
                    "proc_cpu_s": proc,
                    "engine_child_cpu_s": engine_cpu() - clock["engine"],
                    "plots": w.plots.step_count(),
                    "rows": w.profiler.row_count(),
                    "chat_interval_ms": w.session._stream.interval_ms,
                    "plot_interval_ms": w.plots.redraws.interval_ms,
                    "chat_redraws": w.session._stream.calls,
                }
            ),
            flush=True,
        )

    def failed(exc) -> None:
        print(json.dumps({"error": str(exc)}), flush=True)
        w.close()
        app.quit()

    def ready(info) -> None:
        worker = w.engine._worker.engine
        if type(worker).__name__ != ("Engine" if args.in_process else "EngineProcess"):
            failed(RuntimeError(f"the engine is a {type(worker).__name__}, in_process={args.in_process}"))
            return
        print(json.dumps({"ready": True}), flush=True)

    w.pairLoaded.connect(ready)
    w.pairLoadFailed.connect(failed)
    w.answerFinished.connect(answered)
    w.answerFailed.connect(failed)
    app.exec()
    tmp.cleanup()
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target")
    p.add_argument("--draft")
    p.add_argument("--prompt", default=PROMPT)
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--n-ctx", type=int, default=4096)
    p.add_argument("--budget", type=int, default=15)
    p.add_argument(
        "--runs",
        type=int,
        default=10,
        help="rounds of one CLI, one warm headless and two GUI runs (engine in a child, in process)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the per-round random order")
    p.add_argument("--gui-child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--headless-child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--in-process", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.gui_child:
        return gui_child(args)
    if args.headless_child:
        return headless_child(args)
    if not args.target:
        from engine_bridge.models.demo import demo_pair

        t, d = demo_pair()
        args.target, args.draft = str(t), str(d)
    guis = {"gui_child": Child(args, "gui"), "gui_in_process": Child(args, "gui", in_process=True)}
    warm = Child(args, "headless")
    cli_runs, warm_runs = [], []
    gui_runs: dict[str, list] = {name: [] for name in guis}
    try:
        for gui in guis.values():  # warm-up (first-run allocations, caches)
            gui.run()
        warm.run()
        order = random.Random(args.seed)
        for i in range(args.runs):
            # a fresh random order each round, so no side always runs first (or right after another)
            round_ = [("cli", lambda: cli_runs.append(cli_run(args))), ("warm", lambda: warm_runs.append(warm.run()))]
            round_ += [(name, lambda name=name: gui_runs[name].append(guis[name].run())) for name in guis]
            order.shuffle(round_)
            for _, run in round_:
                run()
            for runs in gui_runs.values():
                if "error" in runs[-1]:
                    raise RuntimeError(runs[-1]["error"])
            print(
                f"run {i + 1}: cli {cli_runs[-1]['tok_per_s']:.1f} tok/s, warm headless "
                f"{warm_runs[-1]['tok_per_s']:.1f}, "
                + ", ".join(
                    f"{name} {runs[-1]['tok_per_s']:.1f} tok/s (UI thread "
                    f"{100 * runs[-1]['ui_cpu_s'] / runs[-1]['proc_cpu_s']:.1f}% of its process's CPU)"
                    for name, runs in gui_runs.items()
                ),
                file=sys.stderr,
            )
    finally:
        for gui in guis.values():
            gui.close()
        warm.close()
    cli_tps = [r["tok_per_s"] for r in cli_runs]
    warm_tps = [r["tok_per_s"] for r in warm_runs]
    result = {
        "pair": [args.target, args.draft],
        "prompt": args.prompt,
        "max_tokens": args.max_tokens,
        "budget": args.budget,
        "n_ctx": args.n_ctx,
        "tokens_generated": sorted({r["n_generated"] for runs in [cli_runs, *gui_runs.values()] for r in runs}),
        "cli_tok_per_s": cli_tps,
        "warm_headless_tok_per_s": warm_tps,
        "cli_median": statistics.median(cli_tps),
        "warm_headless_median": statistics.median(warm_tps),
    }
    for name, runs in gui_runs.items():
        result[name] = _gui_figures(runs, cli_tps, warm_tps)
    child = [r["tok_per_s"] for r in gui_runs["gui_child"]]
    inproc = [r["tok_per_s"] for r in gui_runs["gui_in_process"]]
    paired_modes = [c / p for c, p in zip(child, inproc)]
    result.update(
        {
            "child_over_in_process_ratio_of_medians": statistics.median(child) / statistics.median(inproc),
            "child_over_in_process_median_paired": statistics.median(paired_modes),
            "child_over_in_process_quartiles": _quartiles(paired_modes),
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
            f"load average {os.getloadavg()[0]:.1f}",
            "when": time.strftime("%Y-%m-%d %H:%M"),
        }
    )
    print(json.dumps(result, indent=1))
    return 0


def _quartiles(xs: list[float]) -> list[float]:
    return statistics.quantiles(xs, n=4) if len(xs) >= 2 else xs


def _gui_figures(runs: list[dict], cli_tps: list[float], warm_tps: list[float]) -> dict:
    """One GUI's tok/s against the CLI's and the warm headless process's, paired by round."""
    tps = [r["tok_per_s"] for r in runs]
    paired = [g / c for g, c in zip(tps, cli_tps)]
    paired_warm = [g / c for g, c in zip(tps, warm_tps)]
    return {
        "tok_per_s": tps,
        "median": statistics.median(tps),
        "ratio_of_medians": statistics.median(tps) / statistics.median(cli_tps),
        "median_paired_ratio": statistics.median(paired),
        "paired_ratio_quartiles": _quartiles(paired),
        "ratio_to_warm_headless": statistics.median(tps) / statistics.median(warm_tps),
        "median_paired_ratio_to_warm": statistics.median(paired_warm),
        "paired_ratio_to_warm_quartiles": _quartiles(paired_warm),
        "ui_thread_cpu_share": sum(r["ui_cpu_s"] for r in runs) / sum(r["proc_cpu_s"] for r in runs),
        "ui_thread_cpu_s_median": statistics.median(r["ui_cpu_s"] for r in runs),
        "window_process_cpu_s_median": statistics.median(r["proc_cpu_s"] for r in runs),
        "engine_child_cpu_s_median": statistics.median(r["engine_child_cpu_s"] for r in runs),
        "gui_checks": {"plots_steps": runs[-1]["plots"], "profiler_rows": runs[-1]["rows"]},
        "ui_intervals_ms_at_end": sorted({(r["chat_interval_ms"], r["plot_interval_ms"]) for r in runs}),
    }


if __name__ == "__main__":
    sys.exit(main())
