"""gpu/gpu_synth_drafter.py: a random drafter of a given shape for a real target (issue 30's step cost
on the GPU machine, where the trained drafter is not at hand): the shape asked for, the type asked
for, and a pair the checks accept."""

from __future__ import annotations

from pathlib import Path

from engine_bridge.models import compat
from engine_bridge.models.gguf_header import read_header

GPU = Path(__file__).resolve().parents[1] / "gpu"


def test_the_drafter_has_the_shape_and_type_asked_and_pairs_with_the_target(tiny_pair, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(GPU))
    import gpu_synth_drafter as sd

    target, _ = tiny_pair
    out = tmp_path / "d.gguf"
    args = [str(target), str(out), "--layers", "2", "--ffn", "96", "--target-layers", "1,3", "--type", "q8_0"]
    assert sd.main(args) == 0
    h = read_header(out)
    f = h.fields
    assert f["general.architecture"] == "dflash"
    assert f["dflash.block_count"] == 2 and f["dflash.feed_forward_length"] == 96
    assert list(f["dflash.target_layers"]) == [1, 3]
    assert f["general.file_type"] == 7  # q8_0
    assert {t.ggml_type for n, t in h.tensors.items() if n.endswith("ffn_up.weight")} == {8}  # GGML_TYPE_Q8_0
    assert compat.check(target, out).ok
