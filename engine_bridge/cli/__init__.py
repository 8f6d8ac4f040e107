"""The ``dflash-studio`` command line: the dispatcher and one module per group of subcommands."""

from .dispatch import main  # noqa: F401  (the console script's entry point: engine_bridge.cli:main)
