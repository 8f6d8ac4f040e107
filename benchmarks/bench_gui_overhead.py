"""GUI overhead: tok/s of the desktop app against the headless CLI on the same pair and prompt.

Headless: ``dflash-studio generate --chat --json`` (a fresh process per repetition, as a user runs
it). GUI: the real main window (offscreen, shown, streaming into the transcript, live plots,
profiler and status bar) in a child process that loads the pair once and answers the same prompt
in a new chat per repetition. Both report ``RunSummary.tok_per_s`` (generated tokens over the
time from the end of prefill to the last commit), greedy, same budget and context. Blocks of
CLI and GUI repetitions alternate, so drift in machine load hits both sides alike; the ratio is
median(GUI) / median(CLI).

    .venv/bin/python benchmarks/bench_gui_overhead.py --blocks 3 --reps 3 --max-tokens 256
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROMPT = "Write a short story about a lighthouse keeper who finds a message in a bottle."


def cli_run(target: str, draft: str, prompt: str, max_tokens: int, n_ctx: int, budget: int) -> float:
    exe = Path(sys.executable).parent / "dflash-studio"
    cmd = [str(exe), "generate", "--target", target, "--draft", draft, "--prompt", prompt, "--chat",
           "--max-tokens", str(max_tokens), "--n-ctx", str(n_ctx), "--budget", str(budget), "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    summary = json.loads(out.stdout)["summary"]
    assert summary["n_generated"] > 0, summary
    return summary["tok_per_s"], summary["n_generated"]


def gui_runs(target: str, draft: str, prompt: str, max_tokens: int, n_ctx: int, budget: int,
             reps: int) -> list[tuple[float, int]]:
    cmd = [sys.executable, __file__, "--gui-child", "--target", target, "--draft", draft, "--prompt", prompt,
           "--max-tokens", str(max_tokens), "--n-ctx", str(n_ctx), "--budget", str(budget), "--reps", str(reps)]
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    return [(r["tok_per_s"], r["n_generated"]) for r in rows]


def gui_child(args) -> int:
    """Runs inside the GUI process: the real app, offscreen, one prompt per repetition."""
    from PySide6.QtCore import QTimer

    from app.app_settings import StudioSettings, open_settings
    from app.conversations import ConversationStore
    from app.main import make_application
    from app.main_window import MainWindow

    app = make_application()
    tmp = tempfile.TemporaryDirectory(prefix="gui-bench-")
    qs = open_settings(Path(tmp.name) / "settings.ini")
    StudioSettings(target=args.target, drafter=args.draft, max_tokens=args.max_tokens, n_ctx=args.n_ctx,
                   budget=args.budget).save(qs)
    w = MainWindow(qsettings=qs, store=ConversationStore(Path(tmp.name) / "chat.sqlite3"))
    w.resize(1480, 900)
    w.show()
    done = {"n": 0, "code": 0}

    def ask():
        w.new_chat()
        w.chat.input.setPlainText(args.prompt)
        w.chat.send_button.click()

    def answered(res):
        s = res.summary
        print(json.dumps({"tok_per_s": s.tok_per_s, "n_generated": s.n_generated,
                          "plots": w.plots.step_count(), "rows": w.profiler.row_count()}), flush=True)
        done["n"] += 1
        if done["n"] >= args.reps:
            w.close()
            app.quit()
        else:
            QTimer.singleShot(200, ask)

    def failed(exc):
        print(f"failed: {exc}", file=sys.stderr)
        done["code"] = 1
        w.close()
        app.quit()

    w.pairLoaded.connect(lambda info: QTimer.singleShot(200, ask))
    w.pairLoadFailed.connect(failed)
    w.answerFinished.connect(answered)
    w.answerFailed.connect(failed)
    app.exec()
    tmp.cleanup()
    return done["code"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target")
    p.add_argument("--draft")
    p.add_argument("--prompt", default=PROMPT)
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--n-ctx", type=int, default=4096)
    p.add_argument("--budget", type=int, default=15)
    p.add_argument("--blocks", type=int, default=3, help="alternating CLI / GUI blocks")
    p.add_argument("--reps", type=int, default=3, help="repetitions per block")
    p.add_argument("--gui-child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.gui_child:
        return gui_child(args)
    if not args.target:
        from engine_bridge.demo import demo_pair

        t, d = demo_pair()
        args.target, args.draft = str(t), str(d)
    cli, gui = [], []
    for b in range(args.blocks):
        for _ in range(args.reps):
            cli.append(cli_run(args.target, args.draft, args.prompt, args.max_tokens, args.n_ctx, args.budget))
        gui += gui_runs(args.target, args.draft, args.prompt, args.max_tokens, args.n_ctx, args.budget, args.reps)
        print(f"block {b + 1}: cli {[round(x[0], 1) for x in cli[-args.reps:]]} "
              f"gui {[round(x[0], 1) for x in gui[-args.reps:]]}", file=sys.stderr)
    cli_tps = [x[0] for x in cli]
    gui_tps = [x[0] for x in gui]
    ratio = statistics.median(gui_tps) / statistics.median(cli_tps)
    result = {
        "pair": [args.target, args.draft], "prompt": args.prompt, "max_tokens": args.max_tokens,
        "budget": args.budget, "n_ctx": args.n_ctx, "tokens_generated": sorted({x[1] for x in cli + gui}),
        "cli_tok_per_s": cli_tps, "gui_tok_per_s": gui_tps,
        "cli_median": statistics.median(cli_tps), "gui_median": statistics.median(gui_tps),
        "cli_mean_sd": [statistics.fmean(cli_tps), statistics.stdev(cli_tps) if len(cli_tps) > 1 else 0.0],
        "gui_mean_sd": [statistics.fmean(gui_tps), statistics.stdev(gui_tps) if len(gui_tps) > 1 else 0.0],
        "ratio_gui_over_cli": ratio, "overhead_pct": 100 * (1 - ratio),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
                   f"Python {platform.python_version()}", "when": time.strftime("%Y-%m-%d %H:%M"),
    }
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
