"""``python -m engine_bridge.cli``: the same as ``dflash-studio``."""

import sys

from engine_bridge.cli import main

sys.exit(main())
