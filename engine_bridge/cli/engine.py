"""CLI subcommands that drive the engine: ``generate``, ``doctor`` and ``placement``."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

from ..common.placement import SPLIT_MODES, Placement
from ..runtime.config import (
    DEFAULT_DRAFT_WINDOW,
    KV_TYPES,
    MODES,
    THREADS_PER_CORE,
    EngineConfig,
    GenerationSettings,
    KVTypes,
    thread_cap,
)

EXIT_OK, EXIT_FAIL, EXIT_UNREADABLE = 0, 1, 2

#: What --help says about the exit codes of the commands that load a pair (generate, calibrate).
ENGINE_EXITS = (
    "exit codes: 0 done; 1 the pair was refused (a FAIL in the pairing checks) or the engine "
    "failed; 2 a file or argument could not be read; 130 interrupted (Ctrl-C)"
)
#: The K/V cache types, as the help lists them.
KV_CHOICES = ", ".join(KV_TYPES)
#: Which pair runs when --target is left out (engine_bridge.models.demo.demo_pair decides).
DEMO_PAIR = (
    "the default pair: SmolLM2-135M-Instruct with its shipped drafter once `dflash-studio "
    "fetch-default` has fetched the target, else the 15.7 M Python-code reference pair in "
    "resources/models/"
)


def register(sub) -> None:
    g = sub.add_parser(
        "generate",
        help="generate text with a target (+ drafter)",
        description="Generate a continuation; prints the text, or with --json the "
        "summary and every step record. Without --target it runs "
        f"{DEMO_PAIR}.",
        epilog=ENGINE_EXITS,
    )
    add_engine_args(g)
    src = g.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompt", help="prompt text; - reads it from standard input")
    src.add_argument(
        "--prompt-file",
        metavar="PATH",
        help="read the prompt from this UTF-8 file (for prompts longer than the shell's argument "
        "limit; one trailing newline is dropped, as llama.cpp's -f does)",
    )
    g.add_argument("--chat", action="store_true", help="wrap the prompt as a user turn with the chat template")
    g.add_argument(
        "--mode",
        choices=MODES,
        default=None,
        help="ar | chain | tree | auto (auto: picks per step from measured costs; default with a drafter: "
        "chain on a GPU build, auto on a CPU-only one, where chain is slower than the target alone)",
    )
    g.add_argument(
        "--budget",
        type=int,
        default=None,
        help="draft tokens per step (tree: node budget; default 5 for chain on a GPU build, else 7, as serve's)",
    )
    g.add_argument("--p-min", type=float, default=0.0, help="stop drafting below this drafter probability")
    g.add_argument(
        "--exact-phases",
        action="store_true",
        help="end every phase of a step at a device sync: exact phase times, a little slower on a GPU",
    )
    g.add_argument("--max-tokens", type=int, default=128, help="most tokens to generate (default 128)")
    g.add_argument("--temp", type=float, default=0.0, help="temperature (0: greedy)")
    g.add_argument(
        "--top-k",
        type=int,
        default=40,
        help="sample among the K most likely tokens (0: all; default 40; unused when greedy)",
    )
    g.add_argument(
        "--top-p",
        type=float,
        default=1.0,
        help="nucleus sampling: the smallest set of tokens whose probability reaches P (default 1.0: off)",
    )
    g.add_argument("--seed", type=int, default=0, help="sampling seed (default 0; unused when greedy)")
    g.add_argument("--json", action="store_true", help="print the result as JSON (summary + steps)")
    g.set_defaults(func=cmd_generate)

    d = sub.add_parser(
        "doctor",
        help="what engine was built and which devices it sees",
        description="Prints the llama-cpp-python build (version, llama.cpp commit, backend, CMake "
        "flags, our patches), the CPU features and every device llama.cpp sees.",
        epilog="exit codes: 0 done; 1 the engine is not installed",
    )
    d.add_argument("--json", action="store_true", help="print the report as JSON")
    d.set_defaults(func=cmd_doctor)

    pl = sub.add_parser(
        "placement",
        help="what each GPU would hold for a pair, and whether it fits",
        description="Plans a target (+ drafter) over this machine's GPUs, or over the GPUs a "
        "JSON file describes, from the GGUF headers alone: which layers, how much "
        "weight and KV cache each GPU would hold, and the split_fits check.",
        epilog="exit codes: 0 it fits (or there is no GPU); 1 it does not fit; 2 a file or argument could not be read",
    )
    pl.add_argument("--target", required=True, help="target GGUF")
    pl.add_argument("--draft", default=None, help="drafter GGUF (placed beside the target's output)")
    pl.add_argument("--ngl", type=int, default=-1, help="GPU layers (-1: all)")
    pl.add_argument("--n-ctx", type=int, default=0, help="context (0: the target's own)")
    pl.add_argument("--kv-k", default="f16", metavar="TYPE", help=f"K cache type: {KV_CHOICES} (default f16)")
    pl.add_argument("--kv-v", default="f16", metavar="TYPE", help=f"V cache type: {KV_CHOICES} (default f16)")
    pl.add_argument(
        "--gpus-json",
        default=None,
        metavar="FILE",
        help='plan for other GPUs: [{"description": "RTX 4090", "memory_free": 25000000000}, ...]',
    )
    pl.add_argument("--json", action="store_true", help="print the plan as JSON")
    add_placement_args(pl)
    add_rpc_arg(pl)
    pl.set_defaults(func=cmd_placement)


def add_engine_args(p) -> None:
    """Options shared by every command that loads a pair (generate, bench)."""
    p.add_argument("--target", help=f"target GGUF (default: {DEMO_PAIR})")
    p.add_argument("--draft", help="drafter GGUF (DFlash or DSpark; default with --target: none, autoregressive)")
    p.add_argument(
        "--n-ctx",
        type=int,
        default=0,
        help="context size in tokens (default 0: the target's own context length, capped by memory)",
    )
    p.add_argument("--ngl", type=int, default=-1, help="GPU layers (-1: all)")
    p.add_argument(
        "--flash-attn",
        choices=("auto", "on", "off"),
        default="auto",
        help="flash attention (default auto: llama.cpp decides; a quantised V cache needs it)",
    )
    p.add_argument(
        "--exact",
        action="store_true",
        help="exact verify: batch-invariant kernels, so greedy speculative output is the target's own "
        "token for token (CPU, and CUDA GPUs with patch 0016, where a tree may still part at a "
        "near-tie; docs/benchmarks.md)",
    )
    p.add_argument(
        "--draft-window",
        type=int,
        default=DEFAULT_DRAFT_WINDOW,
        metavar="CELLS",
        help="the drafter sees only the last CELLS of the context (0: all of it; default "
        f"{DEFAULT_DRAFT_WINDOW}): the shipped drafter was trained on short conversations and fades in long ones",
    )
    p.add_argument("--kv-k", default="f16", metavar="TYPE", help=f"target K cache type: {KV_CHOICES} (default f16)")
    p.add_argument("--kv-v", default="f16", metavar="TYPE", help=f"target V cache type: {KV_CHOICES} (default f16)")
    p.add_argument("--draft-kv-k", default=None, metavar="TYPE", help="drafter K cache type (default: the target's)")
    p.add_argument("--draft-kv-v", default=None, metavar="TYPE", help="drafter V cache type (default: the target's)")
    p.add_argument(
        "--adapter",
        action="append",
        default=[],
        metavar="PATH[:SCALE]",
        help="LoRA adapter for the drafter (repeatable)",
    )
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: all cores)")
    g = p.add_argument_group(
        "several GPUs",
        "how the target's layers are spread (llama.cpp's split mode, tensor "
        "split and main GPU) and where the drafter goes (default: all of it on the GPU that "
        "holds the target's output); see `dflash-studio placement`",
    )
    add_placement_args(g)
    add_rpc_arg(p)
    p.add_argument("--no-check", action="store_true", help="skip the pairing checks (unsafe: llama.cpp may abort)")


def add_rpc_arg(p) -> None:
    p.add_argument(
        "--rpc",
        default=None,
        metavar="HOST:PORT,...",
        help="llama.cpp RPC servers (`dflash-studio rpc-server` on each machine): their devices take "
        "layers first, before this machine's GPUs; the engine then runs in a child process, so a "
        "lost server is an error, not a crash",
    )


def add_placement_args(p) -> None:
    p.add_argument(
        "--split-mode",
        choices=tuple(SPLIT_MODES),
        default="layer",
        help="target: none (all on --main-gpu), layer (whole layers per GPU), row (rows of each matrix)",
    )
    p.add_argument(
        "--tensor-split",
        default=None,
        metavar="A,B,...",
        help="target: share of the layers (or rows) per GPU, e.g. 3,1 (default: by free memory)",
    )
    p.add_argument("--main-gpu", type=int, default=0, help="target: the GPU for split none / row")
    p.add_argument(
        "--draft-split-mode",
        choices=tuple(SPLIT_MODES),
        default=None,
        help="drafter: split mode (default: none, on the GPU of the target's output)",
    )
    p.add_argument("--draft-tensor-split", default=None, metavar="A,B,...", help="drafter: tensor split")
    p.add_argument("--draft-main-gpu", type=int, default=None, help="drafter: its GPU")


def placements_from_args(args) -> tuple[Placement, Placement | None]:
    """(target, drafter) placements; the drafter's is None (beside the target's output) unless a
    --draft-* flag names one. A bad value is a ValueError with a sentence for the user."""
    target = Placement.parse(args.split_mode, args.tensor_split, args.main_gpu)
    if args.draft_split_mode is None and args.draft_tensor_split is None and args.draft_main_gpu is None:
        return target, None
    return target, Placement.parse(args.draft_split_mode or "none", args.draft_tensor_split, args.draft_main_gpu)


def config_from_args(args) -> EngineConfig:
    target, draft = args.target, args.draft
    if target is None:
        from ..models.demo import demo_pair

        target, demo_draft = demo_pair()
        draft = draft or demo_draft
    adapters = []
    for spec in args.adapter:
        path, _, scale = spec.partition(":")
        adapters.append((path, float(scale) if scale else 1.0))
    threads = args.threads
    if threads is not None and threads > thread_cap():
        print(
            f"dflash-studio: --threads {threads}: capped at {thread_cap()} ({THREADS_PER_CORE} per core)",
            file=sys.stderr,
        )
        threads = thread_cap()
    tkv = KVTypes(args.kv_k, args.kv_v)
    dkv = KVTypes(args.draft_kv_k or args.kv_k, args.draft_kv_v or args.kv_v)
    tpl, dpl = placements_from_args(args)
    from ..runtime.rpc import parse_endpoints

    return EngineConfig(
        target=target,
        draft=draft,
        n_ctx=args.n_ctx,
        n_gpu_layers=args.ngl,
        draft_n_gpu_layers=args.ngl,
        flash_attn=args.flash_attn,
        target_kv=tkv,
        draft_kv=dkv,
        adapters=tuple(adapters),
        n_threads=threads,
        target_placement=tpl,
        draft_placement=dpl,
        rpc_servers=parse_endpoints(getattr(args, "rpc", None)),
        exact=bool(getattr(args, "exact", False)),
        draft_window=getattr(args, "draft_window", DEFAULT_DRAFT_WINDOW),
    )


def read_prompt(args, stdin=None) -> str:
    """The prompt from --prompt, --prompt - (standard input) or --prompt-file; a ValueError says why
    it could not be read. One trailing newline of a file or of stdin is dropped (llama.cpp's -f does
    the same): an editor or ``echo`` adds it, and the model would see it as part of the prompt."""
    if args.prompt_file is not None:
        try:
            text = Path(args.prompt_file).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"--prompt-file {args.prompt_file}: not UTF-8 text") from None
        except OSError as exc:
            raise ValueError(f"--prompt-file {args.prompt_file}: {exc.strerror or exc}") from None
    elif args.prompt == "-":
        stream = stdin or sys.stdin
        if stream.isatty():
            print(
                "dflash-studio generate: reading the prompt from standard input (end it with Ctrl-D)", file=sys.stderr
            )
        try:  # bytes, decoded as UTF-8 whatever the locale says (as the file is)
            data = stream.buffer.read() if hasattr(stream, "buffer") else stream.read()
            text = data.decode("utf-8") if isinstance(data, bytes) else data
        except UnicodeDecodeError:
            raise ValueError("--prompt -: standard input is not UTF-8 text") from None
    else:
        text = args.prompt
        try:  # bytes that are not UTF-8 reach Python as lone surrogates
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(
                f"--prompt is not valid UTF-8 text (a byte at character {exc.start} is not); "
                "use --prompt-file for text in another encoding after converting it"
            ) from None
        if not text.strip():
            raise ValueError("the prompt is empty" + (" (only whitespace)" if text else ""))
        return text
    text = text[:-1] if text.endswith("\n") else text
    if not text.strip():
        raise ValueError(
            "the prompt is empty" + (f" ({args.prompt_file})" if args.prompt_file else " (standard input)")
        )
    return text


def cmd_generate(args) -> int:
    from ..common.errors import EngineError

    try:
        prompt_text = read_prompt(args)
        cfg = config_from_args(args)
        from ..runtime.default_mode import default_budget, default_mode

        mode = args.mode or default_mode(bool(cfg.draft))
        settings = GenerationSettings(
            mode=mode,
            budget=args.budget if args.budget is not None else default_budget(mode),
            p_min=args.p_min,
            exact_phases=args.exact_phases,
            max_tokens=args.max_tokens,
            temperature=args.temp,
            top_k=args.top_k,
            top_p=args.top_p,
            seed=args.seed,
        )
    except (ValueError, FileNotFoundError) as exc:
        print(f"dflash-studio generate: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    eng, rc = load_engine(cfg, args, "generate")
    if eng is None:
        return rc
    _say_llama(eng)
    cancel = threading.Event()
    try:
        try:  # the chat template is the model's code: it may refuse, loop or blow up (ChatTemplateError)
            # only the template makes control tokens: <|im_end|> in the prompt stays text
            prompt = eng.tokenize_chat([{"role": "user", "content": prompt_text}]) if args.chat else prompt_text
            if isinstance(prompt, str):
                prompt.encode("utf-8")
        except UnicodeEncodeError:  # before ValueError, of which it is one
            print(
                "dflash-studio generate: the chat template made text that is not valid UTF-8 (a lone surrogate)",
                file=sys.stderr,
            )
            return EXIT_FAIL
        except (EngineError, ValueError) as exc:
            print(f"dflash-studio generate: {exc}", file=sys.stderr)
            return EXIT_FAIL
        stream = None if args.json else (lambda ev: (sys.stdout.write(ev.piece), sys.stdout.flush()))
        try:
            # auto's first request on a pair and machine calibrates first (seconds on a CPU): said on stderr
            said = (
                (lambda text: print(f"dflash-studio generate: {text}", file=sys.stderr, flush=True))
                if not args.json
                else None
            )
            res = eng.generate(prompt, settings, on_token=stream, cancel=cancel, on_progress=said)
        except KeyboardInterrupt:
            cancel.set()
            raise
        except EngineError as exc:
            print(f"\ndflash-studio generate: {exc}", file=sys.stderr)
            return EXIT_FAIL
        _say_llama(eng)
        if args.json:
            out = res.to_dict()
            out["engine"] = eng.describe()
            out["host_overhead"] = res.host_overhead()
            json.dump(out, sys.stdout, indent=1)
            sys.stdout.write("\n")
        else:
            sys.stdout.write("\n")
            s = res.summary
            note = f"; {s.budget_note}" if s.budget_note else ""
            print(
                f"[{s.mode}] {s.n_generated} tokens in {s.n_steps} steps, {s.tok_per_s:.1f} tok/s, "
                f"mean commit {s.mean_commit_len:.2f}, acceptance {s.acceptance_rate:.1%}, "
                f"finish {s.finish_reason}{note}",
                file=sys.stderr,
            )
            if s.auto_note:
                print(s.auto_note, file=sys.stderr)
            if s.break_even:
                verdict = "pays" if s.break_even_commit > s.break_even else "does not pay"
                print(
                    f"break-even commit {s.break_even:.2f} for {s.break_even_label}, measured "
                    f"{s.break_even_commit:.2f}: speculation {verdict} here",
                    file=sys.stderr,
                )
    finally:
        eng.close()
    return EXIT_OK


def _say_llama(eng) -> None:
    """llama.cpp's warnings, as our lines on stderr (its own log is quiet: engine_bridge.runtime.llama_log)."""
    for line in eng.llama_messages():
        print(f"dflash-studio: {line}", file=sys.stderr)


def doctor_report() -> dict:
    from ..runtime import llama_ffi
    from ..runtime.cpu_build import cpu_build_advice, cpu_flags

    info = llama_ffi.build_info()
    version = info.get("llama_cpp_python", "unknown")
    cmake = info.get("cmake_args", "")
    cpu_build, cpu_advice = cpu_build_advice(cmake, cpu_flags())
    return {
        "llama_cpp_python": version,
        "llama_cpp_commit": info.get("llama_cpp_commit", "unknown"),
        "backend": info.get("backend", "unknown"),
        "cuda_architectures": info.get("cuda_architectures", ""),
        "fa_all_quants": "GGML_CUDA_FA_ALL_QUANTS=ON" in cmake,
        "cmake_args": cmake,
        "build_seconds": info.get("seconds"),
        # packaging/patches applied to the vendored llama.cpp by build_engine.sh (name, sha256)
        "patches": list(info.get("patches", [])),
        "system_info": info.get("system_info", ""),
        "cpu_build": cpu_build,
        "cpu_advice": cpu_advice,
        # a build with RPC says "GPU offload" even with no GPU (a server's device counts): RPC on its own line
        "gpu_offload": bool(llama_ffi.C.llama_supports_gpu_offload()) and bool(llama_ffi.gpus()),
        "rpc": bool(getattr(llama_ffi.C, "llama_supports_rpc", lambda: False)()),
        "devices": llama_ffi.devices(),
    }


def cmd_doctor(args) -> int:
    try:
        rep = doctor_report()
    except ImportError as exc:
        print(f"dflash-studio doctor: the engine is not installed: {exc}", file=sys.stderr)
        return EXIT_FAIL
    if args.json:
        json.dump(rep, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return EXIT_OK
    print(f"llama-cpp-python  {rep['llama_cpp_python']} (llama.cpp {rep['llama_cpp_commit']})")
    arch = f" (architectures {rep['cuda_architectures']})" if rep["cuda_architectures"] else ""
    print(f"backend           {rep['backend'].upper()}{arch}")
    print(f"FA all quants     {'on' if rep['fa_all_quants'] else 'off'}")
    print(f"GPU offload       {'yes' if rep['gpu_offload'] else 'no'}")
    print(
        f"RPC devices       {'yes (--rpc host:port; dflash-studio rpc-server)' if rep['rpc'] else 'no (make engine builds them)'}"
    )
    print(f"CMake flags       {rep['cmake_args']}")
    if not rep["patches"]:
        print("llama.cpp patches none")
    for p in rep["patches"]:
        print(f"llama.cpp patch   {p.get('name', '?')} (sha256 {str(p.get('sha256', '?'))[:16]})")
    print(f"CPU features      {rep['system_info'].strip()}")
    print(f"CPU code for      {rep['cpu_build']}")
    if rep["cpu_advice"]:
        print(f"advice            {rep['cpu_advice']}")
    for dev in rep["devices"]:
        gib = dev["memory_total"] / 2**30
        free = dev["memory_free"] / 2**30
        print(
            f"device            {dev['type'].upper()} {dev['name']}: {dev['description']} "
            f"({free:.1f} of {gib:.1f} GiB free)"
        )
    return EXIT_OK


def load_engine(cfg, args, command: str):
    """``(engine, None)`` for a CLI command, or ``(None, exit code)`` after saying on stderr why the
    pair could not be loaded (an incompatible pair: EXIT_FAIL; an unreadable file: EXIT_UNREADABLE)."""
    from ..common.errors import EngineError, IncompatiblePairError, ModelLoadError
    from ..models.pair_preflight import PAIR_PREFLIGHT
    from ..runtime.engine_process import open_engine

    try:
        return open_engine(cfg, preflight=PAIR_PREFLIGHT, check=not args.no_check), None
    except IncompatiblePairError as exc:
        print(f"dflash-studio {command}: the pair cannot run together:\n{exc}", file=sys.stderr)
        return None, EXIT_FAIL
    except ModelLoadError as exc:
        print(f"dflash-studio {command}: {exc}", file=sys.stderr)
        return None, EXIT_UNREADABLE
    except EngineError as exc:  # an RPC server unreachable, busy or lost while loading
        print(f"dflash-studio {command}: {exc}", file=sys.stderr)
        return None, EXIT_FAIL


def _read_gpus(path: str) -> list[dict]:
    data = json.loads(open(path).read())
    if not isinstance(data, list) or not all(isinstance(g, dict) and "memory_free" in g for g in data):
        raise ValueError(f"{path}: a JSON list of GPUs, each with memory_free (bytes), was expected")
    return [
        {
            "name": g.get("name", f"GPU{i}"),
            "description": g.get("description", g.get("name", f"GPU{i}")),
            "memory_free": int(g["memory_free"]),
            "memory_total": int(g.get("memory_total", g["memory_free"])),
        }
        for i, g in enumerate(data)
    ]


def cmd_placement(args) -> int:
    from ..common.errors import EngineError
    from ..models import compat

    try:
        tpl, dpl = placements_from_args(args)
        kv = KVTypes(args.kv_k, args.kv_v)
        if args.gpus_json:
            gpus = _read_gpus(args.gpus_json)
        else:
            from ..runtime.engine import offload_gpus

            from ..runtime.rpc import parse_endpoints

            gpus = offload_gpus(
                EngineConfig(target=args.target, n_gpu_layers=args.ngl, rpc_servers=parse_endpoints(args.rpc))
            )
    except (ValueError, OSError, EngineError) as exc:
        print(f"dflash-studio placement: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    if not gpus:
        print("no GPU to offload to (a CPU build, or none found): every layer runs on the CPU")
        return EXIT_OK
    from ..common.errors import UnreadableModelError

    try:
        plans, fits = compat.split_plan(
            args.target,
            args.draft,
            gpus,
            tpl,
            dpl,
            n_gpu_layers=args.ngl,
            draft_n_gpu_layers=args.ngl,
            n_ctx=args.n_ctx or None,
            kv=kv,
        )
    except UnreadableModelError as exc:
        print(f"dflash-studio placement: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    if args.json:
        json.dump(
            {
                "gpus": gpus,
                "fits": fits.status == compat.PASS,
                "reason": fits.reason,
                "fix": fits.fix,
                "plans": [
                    {
                        "model": p.name,
                        "placement": str(p.placement),
                        "output_device": p.output_device,
                        "devices": {
                            str(d): {"layers": h.layers, "weights": h.weights, "kv": h.kv, "output": h.output}
                            for d, h in p.holdings.items()
                        },
                    }
                    for p in plans
                ],
            },
            sys.stdout,
            indent=1,
        )
        sys.stdout.write("\n")
    else:
        for i, g in enumerate(gpus):
            print(
                f"GPU{i}  {g['description']}: {g['memory_free'] / 2**30:.2f} GiB free of {g['memory_total'] / 2**30:.2f}"
            )
        for p in plans:
            print(f"{p.name} ({p.placement}):")
            for line in p.describe(gpus):
                print("  " + line.split(": ", 1)[1])
        print(f"{fits.status}  split_fits: {fits.reason}" + (f"  -> {fits.fix}" if fits.fix else ""))
    return EXIT_OK if fits.status != compat.FAIL else EXIT_FAIL
