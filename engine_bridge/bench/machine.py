"""What a bench report records about the machine and the build, so a run can be reproduced.

Everything here is best effort: a missing tool (no nvidia-smi on a CPU box) leaves a field empty
rather than failing the bench.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys

#: llama.cpp commits vendored by llama-cpp-python releases, for builds whose build info file does
#: not record one (the stock wheel). Reports need the commit: speed changes between commits.


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def gpus() -> list[dict]:
    """NVIDIA GPUs as nvidia-smi reports them (name, driver, memory); [] without one."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return []
    try:
        out = subprocess.run(
            [exe, "--query-gpu=name,driver_version,memory.total,compute_cap", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    if out.returncode != 0:
        return []
    found = []
    for line in out.stdout.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3:
            found.append(
                {
                    "name": parts[0],
                    "driver": parts[1],
                    "memory_mib": parts[2],
                    "compute_cap": parts[3] if len(parts) > 3 else "",
                }
            )
    return found


def llama_devices() -> list[dict]:
    """The devices llama.cpp itself sees (what the run could actually use)."""
    try:
        from ..runtime.llama_ffi import devices

        return devices()
    except Exception:  # an older FFI without device listing: the report just lacks it
        return []


def machine_info() -> dict:
    g = gpus()
    devs = llama_devices()
    if not g:  # no nvidia-smi (AMD, Apple, a container): fall back to llama.cpp's GPU devices
        g = [
            {
                "name": d["description"] or d["name"],
                "driver": "",
                "memory_mib": str(d["memory_total"] // 2**20),
                "compute_cap": "",
            }
            for d in devs
            if d["type"] in ("gpu", "igpu")
        ]
    return {
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "cpu": cpu_model(),
        "n_cpus": os.cpu_count() or 0,
        "memory_bytes": memory_bytes(),
        "gpus": g,
        # llama-bench's gpu_info: the GPU names, comma-separated ("" on a CPU-only machine)
        "gpu_info": ", ".join(x["name"] for x in g),
        "driver": ", ".join(sorted({x["driver"] for x in g if x["driver"]})),
        "llama_devices": devs,
    }


def build_info() -> dict:
    from ..runtime.llama_ffi import build_info as ffi_build_info

    info = dict(ffi_build_info())
    info["build_commit"] = info["llama_cpp_commit"]  # llama-bench's name for it
    return info
