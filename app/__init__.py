"""DFlash Studio's desktop app (Qt): the shell and one sub-package per tab.
common (building blocks), shell (window, settings, worker), chat, pairing, diagnostics, bench, models, training,
serve (the local server switch).
May import: PySide6, pyqtgraph and all of engine_bridge; each sub-package's rule is in its __init__ (tests/test_layout.py holds them).
"""
