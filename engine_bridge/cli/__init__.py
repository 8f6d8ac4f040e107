"""The ``dflash-studio`` command line: the dispatcher and one module per group of subcommands.
dispatch (parser, ``main``, the hand-over to the app), engine (generate, doctor), calibrate, models, bench, train, serve.
May import: every engine_bridge sub-package; app only by name, through dispatch's launcher; never Qt.
"""

from .dispatch import main  # noqa: F401  (the console script's entry point: engine_bridge.cli:main)
