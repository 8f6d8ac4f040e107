"""What the engine's CPU code was built for, read from its build flags, and whether this CPU would run
a build made on it faster (packaging/build_engine.sh builds for the instruction sets of the CPU that
builds it; a portable build, DFLASH_CPU_NATIVE=0 or the one-file bundle's, runs on any x86-64)."""

from __future__ import annotations


def cpu_flags() -> set[str]:
    """This machine's CPU feature flags (Linux /proc/cpuinfo; empty elsewhere)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


#: the CMake options packaging/build_engine.sh adds for the instruction sets of the CPU that builds it
CPU_ISA_OPTIONS = (
    "GGML_AVX512",
    "GGML_AVX512_VBMI",
    "GGML_AVX512_VNNI",
    "GGML_AVX512_BF16",
    "GGML_AMX_TILE",
    "GGML_AMX_INT8",
    "GGML_AVX_VNNI",
)
PORTABLE = "any x86-64 with AVX2 (portable)"


def cpu_build_advice(cmake_args: str, cpu_flags: set[str]) -> tuple[str, str | None]:
    """(what the engine's CPU code was built for, advice or None). A portable build on a CPU with
    AMX-INT8 leaves ~2x of decoding speed unused there (docs/benchmarks.md, "An engine built for
    the CPU it runs on"); a build for a CPU's instruction sets is for such CPUs only."""
    if "GGML_NATIVE=ON" in cmake_args:
        return "the CPU it was built on (GGML_NATIVE=ON; not for other machines)", None
    isa = [o.removeprefix("GGML_") for o in CPU_ISA_OPTIONS if f"-D{o}=ON" in cmake_args]
    if isa:
        return f"this CPU's instruction sets ({', '.join(isa)}; not for every x86-64)", None
    if "GGML_NATIVE=OFF" not in cmake_args:
        return "unknown", None
    if "amx_int8" in cpu_flags:
        return PORTABLE, (
            "this CPU has AMX-INT8: an engine built on it (`make engine` in a checkout) decoded the "
            "default pair 2.0-2.2x faster on a 2-vCPU Xeon (docs/benchmarks.md)"
        )
    return PORTABLE, None


def engine_cpu_build() -> tuple[str, str | None]:
    """``cpu_build_advice`` for the installed engine on this machine (("unknown", None) without one)."""
    try:
        from .llama_ffi import build_info

        cmake = str(build_info().get("cmake_args", ""))
    except Exception:  # noqa: BLE001 - no engine: nothing to say of its build
        return "unknown", None
    return cpu_build_advice(cmake, cpu_flags())
