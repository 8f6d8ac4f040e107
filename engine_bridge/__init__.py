"""DFlash Studio's engine bridge: everything that is not Qt.

The FFI over llama-cpp-python, the speculative loop and its statistics, model inspection, pairing
checks, conversion, downloads, bench and reports, and the CLI. Never imports Qt.
"""

__version__ = "0.1.0"
