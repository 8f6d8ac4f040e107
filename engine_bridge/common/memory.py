"""How much memory this machine can still give: the default context size and the pairing checks'
KV estimate both ask it (runtime.context_size, models.compat)."""

from __future__ import annotations

import os


def available_memory() -> int | None:
    """Bytes the system can still give (MemAvailable), None where it cannot tell."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
