"""``dflash-studio``: the headless CLI, and the app's launcher.

With no subcommand (or with ``--screenshot``) it starts the desktop app. Every other action is a
subcommand; each lives in a module of its own that exposes ``register(subparsers)`` and sets
``func`` on its parser. ``func(args)`` returns the process exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys

#: Modules that contribute subcommands, in help order.
COMMAND_MODULES = (
    "engine_bridge.cli.engine",     # generate, doctor
    "engine_bridge.cli.calibrate",  # calibrate (cli.calibrate uses cli.engine's options, not the reverse)
    "engine_bridge.cli.models",     # inspect, check, convert, quantize, pull, search, library
    "engine_bridge.cli.bench",      # bench
    "engine_bridge.models.registry_models",  # fetch-default
    "engine_bridge.cli.train",      # train-drafter
    "engine_bridge.cli.rpc",        # rpc-server, rpc-devices
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dflash-studio",
        description="DFlash speculative decoding on llama.cpp: pair, chat, profile, bench.",
    )
    parser.add_argument("--screenshot", metavar="PATH",
                        help="start the app offscreen on the default pair, run one prompt, save a PNG, exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:   # a real import error inside the module must surface
                raise
            continue               # a partial checkout still gets the other commands
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
