"""What the engine's CPU code was built for (engine_bridge.runtime.cpu_build; `dflash-studio doctor`
prints it, checked with the installed engine in test_engine_patches.py): any x86-64 or this CPU's
instruction sets, and the advice to build on this CPU where a portable engine runs on one with
AMX-INT8 (packaging/build_engine.sh builds for the CPU it runs on unless DFLASH_CPU_NATIVE=0)."""

from __future__ import annotations

from engine_bridge.runtime.cpu_build import cpu_build_advice

PORTABLE = "-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF"
NATIVE = "-DLLAVA_BUILD=OFF -DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF"
#: what packaging/build_engine.sh passes on a Sapphire Rapids class CPU
THIS_CPU = (
    "-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON "
    "-DGGML_AVX512_BF16=ON -DGGML_AMX_TILE=ON -DGGML_AMX_INT8=ON -DGGML_AVX_VNNI=ON -DLLAMA_BUILD_TESTS=OFF"
)


def test_a_portable_build_on_an_amx_cpu_is_advised_to_build_for_it():
    built, advice = cpu_build_advice(PORTABLE, {"avx2", "avx512_vnni", "amx_int8", "amx_tile"})
    assert built.startswith("any x86-64")
    assert advice is not None and "`make engine` in a checkout" in advice


def test_no_advice_without_amx_or_for_a_native_build():
    assert cpu_build_advice(PORTABLE, {"avx2", "avx512f", "avx512_vnni"}) == (
        "any x86-64 with AVX2 (portable)",
        None,
    )
    built, advice = cpu_build_advice(NATIVE, {"amx_int8"})
    assert "the CPU it was built on" in built and advice is None
    built, advice = cpu_build_advice(THIS_CPU, {"amx_int8"})
    assert advice is None
    assert built == (
        "this CPU's instruction sets (AVX512, AVX512_VBMI, AVX512_VNNI, AVX512_BF16, AMX_TILE, AMX_INT8, "
        "AVX_VNNI; not for every x86-64)"
    )
    # AVX-VNNI alone (a desktop CPU without AVX-512) is a build for that CPU too
    assert cpu_build_advice(PORTABLE.replace("NATIVE=OFF", "NATIVE=OFF -DGGML_AVX_VNNI=ON"), set())[0].startswith(
        "this CPU's instruction sets (AVX_VNNI;"
    )
    # a build info without the flag (an engine built before it was recorded) claims nothing
    assert cpu_build_advice("", {"amx_int8"}) == ("unknown", None)
