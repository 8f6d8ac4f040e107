"""CLI subcommands for models: inspect, check, convert, quantize, pull, search, library.

Exit codes follow one rule: 0 success (``check``: every check passed or warned), 1 a refusal or a
FAIL (incompatible pair, conversion refused, download failed), 2 unreadable input.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

EXIT_OK, EXIT_FAIL, EXIT_UNREADABLE = 0, 1, 2


#: --help's exit-code line for the commands that only read or write model files.
EXITS = "exit codes: 0 done; 1 refused or failed; 2 a file or argument could not be read"


def register(sub) -> None:
    from ..runtime.config import KV_TYPES

    kv_choices = ", ".join(KV_TYPES)
    p = sub.add_parser(
        "inspect",
        help="what a GGUF file or HF folder holds (headers only)",
        description="Reads the headers of a GGUF file (or an HF folder's config) and prints its "
        "role (target, DFlash or DSpark drafter, LoRA adapter), architecture, "
        "dimensions, vocabulary and what a drafter needs from its target.",
        epilog="exit codes: 0 done; 2 the file could not be read",
    )
    p.add_argument("path", help="a GGUF file or a Hugging Face model folder")
    p.add_argument("--json", action="store_true", help="print everything read as JSON")
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser(
        "check",
        help="does this drafter fit this target? (exit 0 pass, 1 FAIL, 2 unreadable)",
        description="Runs the pairing checks on a target (and a drafter, adapters, K/V cache types) "
        "from the GGUF headers alone, without loading either model: every check is "
        "PASS, WARN or FAIL with a reason and a fix. A pair with a FAIL would be "
        "refused by the engine (llama.cpp would abort or misbehave).",
        epilog="exit codes: 0 every check passed or warned; 1 at least one FAIL; 2 a file or "
        "argument could not be read",
    )
    p.add_argument("target", help="target GGUF")
    p.add_argument("draft", nargs="?", help="drafter GGUF (DFlash or DSpark); without it only the target is checked")
    p.add_argument("--adapter", action="append", default=[], metavar="PATH", help="LoRA adapter (repeatable)")
    p.add_argument("--kv-k", default="f16", metavar="TYPE", help=f"target K cache type: {kv_choices} (default f16)")
    p.add_argument("--kv-v", default="f16", metavar="TYPE", help=f"target V cache type: {kv_choices} (default f16)")
    p.add_argument("--draft-kv-k", default=None, metavar="TYPE", help="drafter K cache type (default: --kv-k)")
    p.add_argument("--draft-kv-v", default=None, metavar="TYPE", help="drafter V cache type (default: --kv-v)")
    p.add_argument(
        "--flash-attn",
        choices=("auto", "on", "off"),
        default="auto",
        help="flash attention as it will run (default auto; a quantised V cache needs it)",
    )
    p.add_argument("--budget", type=int, default=None, help="draft tokens per step you intend to use")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser(
        "convert",
        help="HF DFlash drafter folder + target GGUF -> drafter GGUF",
        description="Converts a Hugging Face DFlash drafter (config.json + safetensors) into the "
        "GGUF llama.cpp loads, taking the vocabulary and embeddings from the target.",
        epilog=EXITS,
    )
    p.add_argument("hf_dir", help="the drafter's Hugging Face folder")
    p.add_argument("--target", required=True, help="the target GGUF the drafter will run with")
    p.add_argument("--out", required=True, help="the drafter GGUF to write")
    p.add_argument(
        "--type", default="f16", choices=("f32", "f16", "bf16", "q8_0", "q4_0"), help="weight type (default f16)"
    )
    p.add_argument("--force", action="store_true", help="replace --out if it exists")
    p.set_defaults(func=cmd_convert)

    p = sub.add_parser(
        "quantize",
        help="write a drafter variant (f16, q8_0, q4_0)",
        description="Writes a drafter GGUF again with another weight type: a variant the engine "
        "switches to without reloading the target.",
        epilog=EXITS,
    )
    p.add_argument("drafter", help="the drafter GGUF to quantise")
    p.add_argument(
        "--type",
        default="q8_0",
        choices=("f32", "f16", "bf16", "q8_0", "q4_0"),
        help="weight type of the variant (default q8_0)",
    )
    p.add_argument("--out", default=None, help="default: next to the drafter, the type in its name")
    p.add_argument("--force", action="store_true", help="replace --out if it exists")
    p.set_defaults(func=cmd_quantize)

    p = sub.add_parser(
        "pull",
        help="download a GGUF file or a drafter folder from the Hugging Face Hub",
        description="Downloads with progress, resume (run it again after Ctrl-C) and sha256 "
        "verification into the library's models folder.",
        epilog="exit codes: 0 done; 1 the download failed or the repo holds no model folder; "
        "2 an unsafe file name; 130 cancelled (run it again to resume)",
    )
    p.add_argument("repo", help="Hub repo id, e.g. z-lab/Qwen3-8B-DFlash-b16")
    p.add_argument("file", nargs="?", help="file in the repo (without: the drafter folder, or a list of GGUFs)")
    p.add_argument("--revision", default="main", help="branch, tag or commit (default main)")
    p.add_argument("--dir", default=None, help="models folder (default: the library's)")
    p.add_argument("--offline", action="store_true", help="use only what is already downloaded")
    p.set_defaults(func=cmd_pull)

    p = sub.add_parser(
        "search",
        help="search the Hugging Face Hub",
        description="Lists Hub repos matching a query, most downloaded first.",
        epilog="exit codes: 0 done; 1 the Hub could not be asked",
    )
    p.add_argument("query", help="words to search for")
    p.add_argument("--limit", type=int, default=20, help="most repos to list (default 20)")
    p.add_argument("--gguf", action="store_true", help="only repos with GGUF files")
    p.add_argument("--json", action="store_true", help="print the hits as JSON")
    p.set_defaults(func=cmd_search)

    p = sub.add_parser(
        "library",
        help="the model library: list, scan, pairs, groups, catalog",
        description="The library of model files the app knows (SQLite in the data folder).",
        epilog="exit codes: 0 done",
    )
    p.add_argument(
        "action",
        choices=("list", "scan", "pairs", "groups", "catalog"),
        help="list: known files; scan: add a folder's files; pairs: which target + drafter fit; "
        "groups: drafters with their variants; catalog: known public pairs",
    )
    p.add_argument("folder", nargs="?", help="scan: folder to add (default: the models folder)")
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.set_defaults(func=cmd_library)


def _err(msg: str) -> None:
    print(f"dflash-studio: {msg}", file=sys.stderr)


def cmd_inspect(args) -> int:
    from ..common.errors import UnreadableModelError
    from ..models.modelinfo import inspect_model

    try:
        info = inspect_model(args.path)
    except UnreadableModelError as exc:
        _err(str(exc))
        return EXIT_UNREADABLE
    if args.json:
        print(json.dumps(info.to_dict(), indent=2))
    else:
        print("\n".join(info.summary_lines()))
    return EXIT_OK


def cmd_check(args) -> int:
    from ..models import compat
    from ..runtime.config import KVTypes

    try:
        kv = KVTypes(args.kv_k, args.kv_v)
        dkv = KVTypes(args.draft_kv_k or args.kv_k, args.draft_kv_v or args.kv_v)
    except ValueError as exc:
        _err(str(exc))
        return EXIT_UNREADABLE
    report = compat.check(
        args.target,
        args.draft,
        adapters=args.adapter,
        kv=kv,
        draft_kv=dkv,
        flash_attn=args.flash_attn,
        budget=args.budget,
    )
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        for c in report.checks:
            print(c.line())
        verdict = "compatible" if report.ok else f"NOT compatible ({len(report.failures)} FAIL)"
        print(f"\n{verdict}, {len(report.warnings)} warning(s)")
    if report.unreadable:
        return EXIT_UNREADABLE
    return EXIT_OK if report.ok else EXIT_FAIL


def cmd_convert(args) -> int:
    from ..models.convert import ConversionError, convert_hf_drafter

    if not Path(args.hf_dir).is_dir() or not Path(args.target).is_file():
        _err(f"{args.hf_dir if not Path(args.hf_dir).is_dir() else args.target}: not found")
        return EXIT_UNREADABLE
    try:
        res = convert_hf_drafter(args.hf_dir, args.target, args.out, args.type, overwrite=args.force)
    except ConversionError as exc:
        _err(f"conversion refused: {exc}")
        return EXIT_FAIL
    except OSError as exc:  # an output folder that cannot be written (a read-only install)
        _err(f"could not write {args.out}: {exc.strerror or exc}")
        return EXIT_FAIL
    for note in res.notes:
        print(f"note: {note}")
    print(f"wrote {res.path} ({res.tensors} tensors, {args.type})")
    return EXIT_OK


def cmd_quantize(args) -> int:
    from ..models.convert_quant import ConversionError, quantize_drafter, variant_path

    if not Path(args.drafter).is_file():
        _err(f"{args.drafter}: not found")
        return EXIT_UNREADABLE
    out = Path(args.out) if args.out else variant_path(args.drafter, args.type)
    try:
        path = quantize_drafter(args.drafter, out, args.type, overwrite=args.force)
    except ConversionError as exc:
        _err(f"quantisation refused: {exc}")
        return EXIT_FAIL
    except OSError as exc:  # next to a drafter in a read-only install, say: --out goes elsewhere
        _err(f"could not write {out}: {exc.strerror or exc}" + ("" if args.out else "; give --out PATH"))
        return EXIT_FAIL
    print(f"wrote {path} ({args.type})")
    return EXIT_OK


def cmd_pull(args) -> int:
    from ..models import hub
    from ..models.library import Library

    lib = Library()
    models = Path(args.dir) if args.dir else lib.models_dir
    cancel = threading.Event()
    show = hub.progress_printer()
    try:
        if args.file:
            path = hub.download_file(
                args.repo,
                args.file,
                models,
                revision=args.revision,
                progress=show,
                cancel=cancel,
                offline=args.offline or None,
            )
        else:
            files = [] if args.offline else hub.list_files(args.repo, args.revision)
            if args.offline or any(f.path == "config.json" for f in files):
                path = hub.download_folder(
                    args.repo,
                    models,
                    revision=args.revision,
                    progress=show,
                    cancel=cancel,
                    offline=args.offline or None,
                )
            else:
                ggufs = [f for f in files if f.is_gguf]
                _err(f"{args.repo} holds no model folder; name one of its GGUF files:")
                for f in ggufs:
                    size = f"{f.size / 2**30:.2f} GiB" if f.size else "?"
                    print(f"  {f.path:60} {size:>10}  {f.quant or ''}")
                return EXIT_FAIL
    except KeyboardInterrupt:
        cancel.set()
        print(file=sys.stderr)
        _err("cancelled; run the same command again to resume")
        return 130
    except hub.UnsafeFilenameError as exc:
        _err(str(exc))
        return EXIT_UNREADABLE
    except hub.HubError as exc:
        print(file=sys.stderr)
        _err(str(exc))
        return EXIT_FAIL
    print(file=sys.stderr)
    try:
        info = lib.inspect(path)
        print(f"{path}  ({info.role}, {info.arch})")
    except Exception as exc:  # noqa: BLE001 - the download itself succeeded; say why it is not usable
        print(f"{path}  (not inspectable: {exc})")
    return EXIT_OK


def cmd_search(args) -> int:
    from ..models import hub

    try:
        hits = hub.search(args.query, args.limit, gguf_only=args.gguf)
    except hub.HubError as exc:
        _err(str(exc))
        return EXIT_FAIL
    if args.json:
        print(json.dumps([hub.to_dict(h) for h in hits], indent=2))
    else:
        for h in hits:
            print(f"{h.repo_id:60} downloads {h.downloads or 0:>8}  likes {h.likes or 0:>5}")
    return EXIT_OK


def cmd_library(args) -> int:
    from ..models.library import Library

    lib = Library()
    for note in lib.notices:
        print(note, file=sys.stderr)
    if args.action == "catalog":
        entries = lib.catalog()
        if args.json:
            print(json.dumps([e.__dict__ for e in entries], indent=2))
        for e in [] if args.json else entries:
            gguf = e.target_gguf_repo or f"search: {e.target_gguf_search}"
            print(
                f"{e.id:32} {e.kind:7} drafter {e.drafter_repo}  target {e.target_repo} ({gguf}; "
                f"{', '.join(e.recommended_quants)})"
            )
        return EXIT_OK
    if args.action == "pairs":
        recs = lib.pairs()
        if args.json:
            print(json.dumps([r.__dict__ for r in recs], indent=2))
        for r in [] if args.json else recs:
            print(f"{'OK  ' if r.ok else 'FAIL'} {r.target}  +  {r.drafter}  ({r.failures} FAIL, {r.warnings} WARN)")
        return EXIT_OK
    if args.action == "groups":
        groups = lib.groups()
        if args.json:
            print(json.dumps([{"drafter": g.drafter.path, "variants": g.variants} for g in groups], indent=2))
        for g in [] if args.json else groups:
            print(g.drafter.path)
            for path, kind in g.variants:
                print(f"    {kind:5} {path}")
        return EXIT_OK
    files = lib.scan(args.folder) if args.action == "scan" else lib.files()
    if args.action == "list" and not files:
        files = lib.scan()
    if args.json:
        print(
            json.dumps(
                [{"path": f.path, "role": f.role, "arch": f.arch, "size": f.size, "error": f.error} for f in files],
                indent=2,
            )
        )
    else:
        for f in files:
            what = f"{f.role or 'unreadable':8} {f.arch or '':10}" if not f.error else f"error    {f.error}"
            print(f"{what}  {f.size / 2**20:9.1f} MiB  {f.path}")
        print(f"{len(files)} file(s) in {lib.db_path}")
    return EXIT_OK
