"""CLI subcommand ``train-drafter``: a DFlash drafter for a llama/qwen2/qwen3 GGUF target.

Exit codes: 0 done, 1 a refusal (bad target, no CUDA device, a lossy evaluation), 2 unreadable input.
"""

from __future__ import annotations

import sys
from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser(
        "train-drafter",
        help="train a DFlash drafter for a GGUF target (prepare, train on a GPU, export, evaluate)",
        description="Trains a DFlash drafter for a llama, qwen2 or qwen3 GGUF target: prepares the "
        "target's own answers to a broad prompt set, trains the drafter on a GPU, "
        "exports it to GGUF (q8_0) and evaluates it on held-out prompts. Needs the "
        "train extra (pip install -e '.[train]').",
        epilog="exit codes: 0 done; 1 refused (a bad target, no CUDA device, a lossy "
        "evaluation); 2 a file could not be read",
    )
    p.add_argument(
        "--target", required=True, help="target GGUF (llama, qwen2 or qwen3 architecture, with a chat template)"
    )
    p.add_argument("--out", required=True, help="drafter GGUF to write (q8_0; an -f16.gguf goes next to it)")
    p.add_argument(
        "--stage",
        choices=["all", "prepare", "train", "export", "evaluate"],
        default="all",
        help="run one stage only (default all, in order)",
    )
    p.add_argument("--work", default=None, help="working folder (default: OUT's name + .train)")
    p.add_argument("--data-dir", default=None, help="the prepared data folder (default: WORK/data)")
    p.add_argument("--run-dir", default=None, help="a training run folder (e.g. brought back from the GPU machine)")
    p.add_argument("--card", default=None, help="card path (default: card.md next to OUT)")
    p.add_argument("--heldout-copy", default=None, help="also write the held-out prompts (JSONL suite) here")
    p.add_argument("--per-category", type=int, default=3000, help="training prompts per category")
    p.add_argument(
        "--prompt-source",
        choices=["real", "templates"],
        default="real",
        help="real: the shipped prompt set from public permissively licensed sources (default); "
        "templates: our own prompt templates",
    )
    p.add_argument(
        "--prompts",
        default=None,
        metavar="FILE.jsonl",
        help='extra training prompts of your own: one JSON object per line with "text" (or "prompt", '
        'or "messages") and an optional "category"; checked against public benchmarks',
    )
    p.add_argument(
        "--mask-token-id",
        type=int,
        default=None,
        help="the drafter's mask token id (default: the target's mask token, else a control token "
        "that never occurs in a conversation)",
    )
    p.add_argument("--eval-max-tokens", type=int, default=128, help="tokens per held-out evaluation prompt")
    p.add_argument("--eval-prompts", type=int, default=None, help="held-out prompts per category (default all)")
    from ..training.train_chat import add_arguments

    add_arguments(p)
    p.set_defaults(func=cmd_train_drafter)


def cmd_train_drafter(args) -> int:
    target = Path(args.target)
    if not target.is_file():
        print(f"train-drafter: {target}: no such file", file=sys.stderr)
        return 2
    if args.prompts and not Path(args.prompts).is_file():
        print(f"train-drafter: --prompts {args.prompts}: no such file", file=sys.stderr)
        return 2
    from ..training import unavailable

    why = unavailable()
    if why:
        print(f"train-drafter: {why}", file=sys.stderr)
        return 1
    stages = ("prepare", "train", "export", "evaluate") if args.stage == "all" else (args.stage,)
    try:
        from ..training import train_for_target
        from ..training.train_chat import NoCudaError, kwargs_from
    except ImportError as e:  # torch missing: the `train` extra
        print(f"train-drafter: {e}; install the train extra (pip install -e '.[train]')", file=sys.stderr)
        return 1
    kw = kwargs_from(args)
    try:
        res = train_for_target.run(
            target,
            Path(args.out),
            stages=stages,
            work=args.work,
            run_dir=args.run_dir,
            data_dir=args.data_dir,
            card=args.card,
            heldout_copy=args.heldout_copy,
            n_per_category=args.per_category,
            mask_token_id=args.mask_token_id,
            eval_max_tokens=args.eval_max_tokens,
            eval_n_per_category=args.eval_prompts,
            prompt_source=args.prompt_source,
            extra_prompts=args.prompts,
            command=train_for_target.command_line(sys.argv[1:]) if sys.argv[1:2] == ["train-drafter"] else None,
            **kw,
        )
    except NoCudaError as e:
        print(f"train-drafter: {e}", file=sys.stderr)
        return 1
    except (ValueError, FileNotFoundError) as e:
        print(f"train-drafter: {e}", file=sys.stderr)
        return 1
    ev = res.get("evaluate")
    if ev is not None and not ev["lossless_all"]:
        print("train-drafter: the evaluation was NOT lossless (see the table)", file=sys.stderr)
        return 1
    return 0
