"""Header values out of llama.cpp's domain fail the pairing checks (issue 32).

A well-formed GGUF whose RMS-norm epsilon is negative or NaN passed every structural check and
then aborted the process at the first decode (GGML_ASSERT(eps >= 0.0f)), window included. Each
case here is a real file written by synth (or a copy with one header value changed); the check
must FAIL with the key and the value, for target and drafter alike, and the engine's pre-flight
must refuse the pair before llama.cpp sees it.
"""

from __future__ import annotations


import pytest

import modelfiles as mf
from engine_bridge.common.errors import IncompatiblePairError
from engine_bridge.models import compat, header_values, synth
from engine_bridge.models.compat import FAIL, PASS
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime.config import EngineConfig

CPU = {"backend": "cpu"}
NAN = float("nan")
INF = float("inf")


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("values")
    with mf.fast_vocab():
        tspec = synth.TargetSpec()
        t, dr = synth.write_pair(d, tspec, synth.DrafterSpec(), stem="good")
    return dict(dir=d, target=t, drafter=dr, tspec=tspec)


# role, how the bad file is made (pair, tmp) -> path, the key it must name, the value as printed
def _target(**spec):
    return lambda p, tmp: synth.write_target(tmp / "bad-target.gguf", p["tspec"], **spec)


def _drafter(**spec):
    return lambda p, tmp: synth.write_drafter(tmp / "bad-drafter.gguf", p["tspec"], synth.DrafterSpec(**spec))


def _edit(role, **set_kv):
    return lambda p, tmp: mf.rewrite_gguf(p[role], tmp / f"edited-{role}.gguf", set_kv=set_kv)


CASES = {
    "target_eps_nan": ("target", _target(rms_eps=NAN), "qwen3.attention.layer_norm_rms_epsilon", "nan"),
    "target_eps_negative": ("target", _target(rms_eps=-1e-6), "qwen3.attention.layer_norm_rms_epsilon", "-1e-06"),
    "target_eps_zero": ("target", _target(rms_eps=0.0), "qwen3.attention.layer_norm_rms_epsilon", "0"),
    "target_rope_base_inf": ("target", _target(rope_theta=INF), "qwen3.rope.freq_base", "inf"),
    "target_rope_base_negative": ("target", _target(rope_theta=-10000.0), "qwen3.rope.freq_base", "-10000"),
    "target_context_zero": ("target", _target(n_ctx=0), "qwen3.context_length", "0"),
    "target_softcap_nan": (
        "target",
        _target(extra_kv={"qwen3.final_logit_softcapping": NAN}),
        "qwen3.final_logit_softcapping",
        "nan",
    ),
    "target_embedding_scale_inf": (
        "target",
        _target(extra_kv={"qwen3.embedding_scale": INF}),
        "qwen3.embedding_scale",
        "inf",
    ),
    "target_absurd_layer_count": (
        "target",
        _edit("target", **{"qwen3.block_count": 4_000_000_000}),
        "qwen3.block_count",
        "4000000000",
    ),
    "target_zero_kv_heads": (
        "target",
        _edit("target", **{"qwen3.attention.head_count_kv": 0}),
        "qwen3.attention.head_count_kv",
        "0",
    ),
    "drafter_eps_nan": ("drafter", _drafter(rms_eps=NAN), "dflash.attention.layer_norm_rms_epsilon", "nan"),
    "drafter_eps_negative": ("drafter", _drafter(rms_eps=-0.5), "dflash.attention.layer_norm_rms_epsilon", "-0.5"),
    "drafter_rope_base_nan": ("drafter", _drafter(rope_theta=NAN), "dflash.rope.freq_base", "nan"),
    "drafter_logit_scale_inf": (
        "drafter",
        _drafter(extra_kv={"dflash.logit_scale": -INF}),
        "dflash.logit_scale",
        "-inf",
    ),
    "drafter_zero_width": (
        "drafter",
        _edit("drafter", **{"dflash.embedding_length": 0}),
        "dflash.embedding_length",
        "0",
    ),
}


def test_good_pair_passes_the_value_checks(pair):
    report = compat.check(pair["target"], pair["drafter"], build=CPU)
    assert report.get("header_values_target").status == PASS
    assert report.get("header_values_drafter").status == PASS
    assert report.ok, report.summary()


@pytest.mark.parametrize("case", sorted(CASES))
def test_out_of_domain_value_fails_with_key_and_value(pair, tmp_path, case):
    role, make, key, shown = CASES[case]
    with mf.fast_vocab():
        bad = make(pair, tmp_path)
    target, drafter = (bad, pair["drafter"]) if role == "target" else (pair["target"], bad)
    report = compat.check(target, drafter, build=CPU)
    check = report.get(f"header_values_{role}")
    assert check is not None and check.status == FAIL, [c.line() for c in report.checks]
    assert key in check.reason and shown in check.reason.lower(), check.reason
    assert not report.ok and key in report.summary()
    # the engine's pre-flight (what Engine.load runs before llama.cpp sees a file) refuses it
    with pytest.raises(IncompatiblePairError) as info:
        PAIR_PREFLIGHT.check(EngineConfig(target=target, draft=drafter), [])
    assert key in str(info.value)


def test_engine_load_refuses_before_loading(pair, tmp_path):
    """Engine.load on a NaN-epsilon drafter raises the typed error; llama.cpp never loads it (it would
    abort the process at the first decode)."""
    from engine_bridge.runtime.engine import Engine

    with mf.fast_vocab():
        bad = synth.write_drafter(tmp_path / "nan-eps.gguf", pair["tspec"], synth.DrafterSpec(rms_eps=NAN))
    with pytest.raises(IncompatiblePairError, match="layer_norm_rms_epsilon"):
        Engine.load(EngineConfig(target=pair["target"], draft=bad), preflight=PAIR_PREFLIGHT)


def test_per_layer_arrays_may_hold_zero_but_not_negative():
    assert header_values.problems("x", {"x.attention.head_count_kv": [8, 0, 8]}) == []
    assert header_values.problems("x", {"x.attention.head_count_kv": [8, -1]})
    assert header_values.problems("x", {"x.final_logit_softcapping": 0.0}) == []  # 0: no softcap
    assert header_values.problems("x", {"x.attention.layer_norm_epsilon": "1e-5"})  # a string is not a number
