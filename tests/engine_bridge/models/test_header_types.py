"""GGUF header fields of the wrong type (issue 32; mypy found where an ``object`` from the header
flowed on as a string or an integer): a string field that holds a number names nothing, and the
converter refuses a target whose block count or rope sections are not integers, naming the
target's key (it blamed config.json and the checkpoint before)."""

from __future__ import annotations

import pytest

import modelfiles as mf
from engine_bridge.models import synth
from engine_bridge.models.convert import ConversionError, convert_hf_drafter
from engine_bridge.models.gguf_header import read_header
from engine_bridge.models.modelinfo import inspect_model


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("header-types")
    with mf.fast_vocab():
        tspec = synth.TargetSpec()
        target = synth.write_target(d / "t.gguf", tspec)
        hf = mf.write_hf_drafter(d / "hf", tspec, synth.DrafterSpec())
    return dict(target=target, hf=hf, arch=read_header(target).fields["general.architecture"])


def test_string_fields_holding_numbers_name_nothing(pair, tmp_path):
    bad = mf.rewrite_gguf(
        pair["target"],
        tmp_path / "bad.gguf",
        set_kv={"general.name": 7, "tokenizer.ggml.model": 3, "tokenizer.ggml.pre": 4},
    )
    info = inspect_model(bad)
    assert (info.name, info.tokenizer_model, info.tokenizer_pre) == (None, None, None)
    assert info.arch == pair["arch"]


@pytest.mark.parametrize("key, value", [("block_count", "twelve"), ("rope.dimension_sections", 5)])
def test_converter_names_a_target_key_of_the_wrong_type(pair, tmp_path, key, value):
    bad = mf.rewrite_gguf(pair["target"], tmp_path / "bad.gguf", set_kv={f"{pair['arch']}.{key}": value})
    out = tmp_path / "out" / "d.gguf"
    with pytest.raises(ConversionError, match=f"target .*{pair['arch']}.{key} .* not") as info:
        convert_hf_drafter(pair["hf"], bad, out)
    assert "config.json" not in str(info.value)
    assert not out.exists()
