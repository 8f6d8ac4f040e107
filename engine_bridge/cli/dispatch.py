"""``dflash-studio``: the headless CLI, and the app's launcher.

With no subcommand (or with ``--screenshot``) it starts the desktop app. Every other action is a
subcommand; each lives in a module of its own that exposes ``register(subparsers)`` and sets
``func`` on its parser. ``func(args)`` returns the process exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from .. import __version__

#: Modules that contribute subcommands, in help order.
COMMAND_MODULES = (
    "engine_bridge.cli.engine",  # generate, doctor
    "engine_bridge.cli.calibrate",  # calibrate (cli.calibrate uses cli.engine's options, not the reverse)
    "engine_bridge.cli.models",  # inspect, check, convert, quantize, pull, search, library
    "engine_bridge.cli.bench",  # bench
    "engine_bridge.models.registry_models",  # fetch-default
    "engine_bridge.cli.train",  # train-drafter
    "engine_bridge.cli.rpc",  # rpc-server, rpc-devices
    "engine_bridge.cli.serve",  # serve
)


#: The top-level help's closing lines: what no subcommand does, and the exit codes every command shares.
EPILOG = """Without a COMMAND, dflash-studio starts the desktop app (it needs a display: DISPLAY or
WAYLAND_DISPLAY); no subcommand starts the app. `dflash-studio COMMAND --help` describes a command
and its exit codes. Exit codes everywhere: 0 done; 1 refused or failed (an incompatible pair, a
FAIL); 2 a file or argument could not be read, or no display for the app; 130 interrupted."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dflash-studio",
        # COMMAND is optional (none starts the app); argparse's own usage line would make it look required
        usage="%(prog)s [-h] [--version] [--screenshot PATH] [COMMAND [ARGS ...]]",
        description="DFlash speculative decoding on llama.cpp: pair, chat, profile, bench.\n"
        "With no COMMAND it starts the desktop app; every COMMAND runs headless.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version", action="version", version=f"dflash-studio {__version__}", help="print the version and exit"
    )
    parser.add_argument(
        "--screenshot",
        metavar="PATH",
        help="start the app offscreen on the default pair, run one prompt, save a PNG, exit",
    )
    # prog: a command's own usage line reads "dflash-studio check ...", not the top-level usage
    sub = parser.add_subparsers(
        dest="command",
        metavar="COMMAND",
        prog="dflash-studio",
        title="commands (optional: without one the desktop app starts)",
    )
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:  # a real import error inside the module must surface
                raise
            continue  # a partial checkout still gets the other commands
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        return _start_app(args)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except OSError as exc:
        # a full disk, a folder that cannot be written, a file that vanished: one line, not a traceback
        where = f" {exc.filename}" if exc.filename else ""
        print(f"dflash-studio {args.command}: could not read or write{where}: {exc.strerror or exc}", file=sys.stderr)
        return 1


def _start_app(args) -> int:
    """The GUI lives in ``app``; the CLI only hands over to it."""
    try:
        app_main = importlib.import_module("app.shell.main")
    except ImportError as exc:
        print(f"dflash-studio: the desktop app is not available ({exc}); see --help", file=sys.stderr)
        return 2
    return int(app_main.main(screenshot=args.screenshot) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
