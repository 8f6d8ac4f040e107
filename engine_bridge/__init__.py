"""DFlash Studio's engine bridge: everything that is not Qt, in six sub-packages.
common (shared basics), runtime (FFI, speculative loop), models (files, checks, conversion, Hub, library), bench, cli, training.
May import: never Qt (PySide6, shiboken, pyqtgraph) nor app; each sub-package's rule is in its __init__ (tests/test_layout.py holds them).
"""

__version__ = "0.1.0"
