"""Hostile Hugging Face folders: the converter refuses each with ConversionError, never a traceback,
and writes nothing (issue 32: 11 of 25 such folders printed a traceback, 6 wrote a bad file)."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

import modelfiles as mf
from engine_bridge.cli import main
from engine_bridge.models import synth
from engine_bridge.models.convert import ConversionError, convert_hf_drafter


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostile-convert")
    with mf.fast_vocab():
        tspec = synth.TargetSpec()
        target = synth.write_target(d / "t.gguf", tspec)
    return dict(target=target, tspec=tspec)


def _config(edit):
    def apply(folder):
        path = folder / "config.json"
        cfg = json.loads(path.read_text())
        path.write_text(json.dumps(edit(cfg)))

    return apply


def _header(edit):
    """Rewrites the safetensors header (the tensor bytes stay where they were)."""

    def apply(folder):
        path = folder / "model.safetensors"
        raw = path.read_bytes()
        n = struct.unpack("<Q", raw[:8])[0]
        table = json.loads(raw[8 : 8 + n])
        edit(table)
        head = json.dumps(table).encode().ljust(n)
        assert len(head) == n, "the edited header must keep its length"
        path.write_bytes(raw[:8] + head + raw[8 + n :])

    return apply


def _first(table):
    return next(k for k in table if k != "__metadata__")


def _nan_weights(folder):
    path = folder / "model.safetensors"
    raw = bytearray(path.read_bytes())
    n = struct.unpack("<Q", raw[:8])[0]
    table = json.loads(raw[8 : 8 + n])
    b = table["fc.weight"]["data_offsets"][0]
    raw[8 + n + b : 8 + n + b + 4] = np.float32(np.nan).tobytes()
    path.write_bytes(bytes(raw))


HOSTILE = {
    "config_is_a_list": (lambda f: (f / "config.json").write_text("[1, 2, 3]"), "not a JSON object"),
    "hidden_size_is_text": (_config(lambda c: {**c, "hidden_size": "sixty-four"}), "hidden_size"),
    "layer_count_is_huge": (_config(lambda c: {**c, "num_hidden_layers": 10**30}), "num_hidden_layers"),
    "architectures_is_a_number": (_config(lambda c: {**c, "architectures": 5}), "architectures"),
    "fractional_layer_ids": (
        _config(lambda c: {**c, "dflash_config": {**c["dflash_config"], "target_layer_ids": [0.5, 2]}}),
        "target_layer_ids",
    ),
    "text_layer_ids": (
        _config(lambda c: {**c, "dflash_config": {**c["dflash_config"], "target_layer_ids": ["a"]}}),
        "target_layer_ids",
    ),
    "mask_token_is_text": (
        _config(lambda c: {**c, "dflash_config": {**c["dflash_config"], "mask_token_id": "x"}}),
        "mask_token_id",
    ),
    "partial_rotary_factor_is_text": (
        _config(
            lambda c: {
                **c,
                "partial_rotary_factor": "half",
                "rope_parameters": {"rope_theta": 10000.0, "partial_rotary_factor": "half"},
            }
        ),
        "partial_rotary_factor",
    ),
    "sliding_window_is_huge": (
        _config(
            lambda c: {**c, "use_sliding_window": True, "sliding_window": 2**40, "layer_types": ["sliding_attention"]}
        ),
        "sliding_window",
    ),
    "reversed_offsets": (
        _header(lambda t: t[_first(t)].update(data_offsets=list(reversed(t[_first(t)]["data_offsets"])))),
        "byte range",
    ),
    "shape_disagrees_with_bytes": (
        _header(lambda t: t["fc.weight"].update(shape=[t["fc.weight"]["shape"][0], 1])),
        "fc.weight",
    ),
    "entry_not_an_object": (_header(lambda t: t.update({_first(t): [1]})), "not an object"),
    "nan_weights": (_nan_weights, "not finite"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_folder_is_refused_by_name(pair, tmp_path, case):
    damage, named = HOSTILE[case]
    with mf.fast_vocab():
        hf = mf.write_hf_drafter(tmp_path / "hf", pair["tspec"], synth.DrafterSpec())
    damage(hf)
    out = tmp_path / "out" / "d.gguf"
    with pytest.raises(ConversionError) as info:
        convert_hf_drafter(hf, pair["target"], out)
    assert named in str(info.value), str(info.value)
    assert not out.parent.exists() or list(out.parent.iterdir()) == []


def test_cli_says_one_line(pair, tmp_path, capsys):
    with mf.fast_vocab():
        hf = mf.write_hf_drafter(tmp_path / "hf", pair["tspec"], synth.DrafterSpec())
    (hf / "config.json").write_text("[]")
    code = main(["convert", str(hf), "--target", str(pair["target"]), "--out", str(tmp_path / "d.gguf")])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
