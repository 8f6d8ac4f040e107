"""``dflash-studio bench``: autoregressive vs speculative on a prompt suite, with a sweep and reports.

    dflash-studio bench --target T --draft D --suite code [--reps 3] [--sweep budget=4,8,15]
                        [--out r.json] [--md r.md] [--html r.html] [--csv r.csv]

Progress (with ETA) goes to stderr, the results table to stdout. Ctrl-C cancels: whatever finished
is still summarised and exported, and the exit code is 130.
"""

from __future__ import annotations

import sys
import threading

from ..bench.runner import DEFAULT_BLOCK
from .engine import add_engine_args, config_from_args

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_CANCELLED = 0, 1, 2, 130


def register(sub) -> None:
    b = sub.add_parser(
        "bench",
        help="bench speculative decoding against the autoregressive baseline",
        description="Runs the autoregressive baseline and speculative decoding on the same prompts, "
        "N repetitions with fixed seeds (warm-up excluded), and reports tok/s, TTFT, prefill, "
        "acceptance and commit length with mean ± sd and bootstrap 95% intervals, the "
        "speed-up, a losslessness check, and each row's delta vs a baseline row.",
        epilog="exit codes: 0 done; 1 a row failed or the pair was refused; 2 a file or argument could not be "
        "read; 130 cancelled (what finished is still reported)",
    )
    add_engine_args(b)
    b.add_argument(
        "--suite",
        default="code",
        help="built-in suite (code, math, chat; public: mt-bench, gsm8k, humaneval) or a JSONL file",
    )
    b.add_argument("--limit", type=int, default=None, metavar="N", help="only the first N prompts of the suite")
    b.add_argument("--reps", type=int, default=3, help="timed repetitions per prompt (default 3)")
    b.add_argument("--max-tokens", type=int, default=64, help="tokens generated per prompt (default 64)")
    b.add_argument(
        "--budget",
        type=int,
        default=None,
        help="draft tokens per step when not swept (default: what chat runs, 5 for chain on a GPU build, else 7)",
    )
    b.add_argument("--verify", choices=("chain", "tree", "auto"), default="chain", help="verify mode when not swept")
    b.add_argument("--p-min", type=float, default=0.0, help="stop drafting below this drafter probability")
    b.add_argument(
        "--exact-phases",
        action="store_true",
        help="end every phase of a step at a device sync: exact phase times, a little slower on a GPU",
    )
    b.add_argument("--temp", type=float, default=0.0, help="temperature (0: greedy; losslessness is checked only then)")
    b.add_argument("--top-k", type=int, default=40, help="sample among the K most likely tokens (0: all; default 40)")
    b.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling threshold (default 1.0: off)")
    b.add_argument("--seed", type=int, default=0, help="base seed: repetition r uses seed + r")
    b.add_argument(
        "--sweep",
        action="append",
        default=[],
        metavar="AXIS=V1,V2",
        help="sweep an axis (repeatable; product of all): budget, verify_mode, kv (K/V pair), "
        "type_k, type_v, draft_variant (base | drafter.gguf | lora:PATH@SCALE), p_min (a chain's draft cut)",
    )
    b.add_argument(
        "--baseline",
        default=None,
        metavar="ROW",
        help="row every delta is measured against: id, label or index (default: the AR row)",
    )
    b.add_argument("--no-warmup", action="store_true", help="skip the untimed warm-up generation per row")
    b.add_argument(
        "--round-prompts",
        type=int,
        default=DEFAULT_BLOCK,
        metavar="N",
        help="each row runs N prompts before the next row takes the same N, so a machine whose speed "
        "drifts over minutes lies seconds, not a suite, between rows (each block has its own warm-up; "
        f"default {DEFAULT_BLOCK}; 0: every row runs the whole suite in turn)",
    )
    b.add_argument("--out", "--json", dest="json_path", metavar="PATH", help="write the JSON report")
    b.add_argument("--csv", dest="csv_path", metavar="PATH", help="write the rows as CSV")
    b.add_argument("--md", dest="md_path", metavar="PATH", help="write a Markdown report")
    b.add_argument("--html", dest="html_path", metavar="PATH", help="write a self-contained HTML report")
    b.add_argument("--quiet", action="store_true", help="no progress on stderr")
    b.set_defaults(func=run)


def _eta(s: float | None) -> str:
    if s is None:
        return "--:--"
    s = int(s + 0.5)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


class _Progress:
    """One updating line on a terminal; on a pipe, a line per row and per failure."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.tty = sys.stderr.isatty()
        self.last_row = None

    def __call__(self, p) -> None:
        if self.quiet:
            return
        head = f"[{p.done:>4}/{p.total}] {p.fraction:4.0%} ETA {_eta(p.eta_s)}"
        if p.stage in ("failed", "load") and p.message:
            print(("\r" if self.tty else "") + f"{head} {p.row_id}: {p.message}", file=sys.stderr, flush=True)
            return
        what = f"{p.row_id} {p.row_label}" + (f"  {p.prompt_id} rep {p.rep}" if p.prompt_id else f"  {p.stage}")
        if self.tty:
            sys.stderr.write(f"\r\033[K{head} {what}"[:200])
            sys.stderr.flush()
            if p.stage in ("done", "cancelled"):
                sys.stderr.write("\n")
        elif p.row_id != self.last_row or p.stage in ("done", "cancelled"):
            print(f"{head} {what}", file=sys.stderr, flush=True)
        self.last_row = p.row_id


def run(args) -> int:
    from ..bench.runner import BenchSpec, SweepError, parse_sweep, run_bench
    from ..bench.export import write_report
    from ..bench.report import advice_lines, build_report, md_table, summary_table
    from ..bench.suites import SuiteError, load_suite
    from ..runtime.default_mode import default_budget

    try:
        cfg = config_from_args(args)
        suite = load_suite(args.suite).head(args.limit)
        spec = BenchSpec(
            engine=cfg,
            suite=suite,
            reps=args.reps,
            max_tokens=args.max_tokens,
            budget=args.budget if args.budget is not None else default_budget(args.verify),
            verify_mode=args.verify,
            p_min=args.p_min,
            exact_phases=args.exact_phases,
            temperature=args.temp,
            top_k=args.top_k,
            top_p=args.top_p,
            base_seed=args.seed,
            warmup=not args.no_warmup,
            round_prompts=args.round_prompts,
            check_pair=not args.no_check,
            sweep=parse_sweep(args.sweep),
        )
    except (SuiteError, SweepError, ValueError, FileNotFoundError) as exc:
        print(f"dflash-studio bench: {exc}", file=sys.stderr)
        return EXIT_USAGE

    cancel = threading.Event()
    finished = threading.Event()
    box: dict = {}

    def work():
        try:
            box["result"] = run_bench(spec, on_progress=_Progress(args.quiet), cancel=cancel)
        except BaseException as exc:  # handed to the main thread, which reports it
            box["error"] = exc
        finally:
            finished.set()

    worker = threading.Thread(target=work, name="bench", daemon=True)
    worker.start()
    interrupted = False
    # The bench runs on a worker so that Ctrl-C lands here and becomes a clean cancel. Waiting on
    # an Event, not Thread.join: a join interrupted by Ctrl-C can leave is_alive() wrongly False.
    while not finished.is_set():
        try:
            finished.wait(0.2)
        except KeyboardInterrupt:
            if interrupted:
                raise
            interrupted = True
            cancel.set()
            print(
                "\ndflash-studio bench: cancelling (Ctrl-C again to abort without reports)", file=sys.stderr, flush=True
            )
    if "error" in box:
        print(f"dflash-studio bench: {box['error']}", file=sys.stderr)
        return EXIT_FAIL
    result = box["result"]
    try:
        report = build_report(result, baseline=args.baseline)
    except ValueError as exc:  # an unknown --baseline row: report against the default instead
        print(f"dflash-studio bench: {exc}; using the first row as baseline", file=sys.stderr)
        report = build_report(result)
    print(md_table(*summary_table(report)))
    for r in report["rows"]:
        for n in r["notes"]:
            print(f"note {r['id']}: {n}")
    for line in advice_lines(report):  # break-even per row and the advice
        print(line)
    try:
        for path in write_report(
            report, json_path=args.json_path, csv_path=args.csv_path, md_path=args.md_path, html_path=args.html_path
        ):
            print(f"wrote {path}", file=sys.stderr)
    except OSError as exc:  # a full disk, a folder that cannot be written: the tables above stand
        print(
            f"dflash-studio bench: could not write {exc.filename or 'a report'}: {exc.strerror or exc}", file=sys.stderr
        )
        return EXIT_FAIL
    if result.cancelled:
        return EXIT_CANCELLED
    if all(r["status"] == "failed" for r in report["rows"]):
        return EXIT_FAIL
    return EXIT_OK
