"""Planning a pair over several GPUs (issue 18): llama.cpp's layer assignment from the GGUF header,
the fit check with its numbers, the drafter beside the target's output, the CLI, and the
placement reaching llama_model_params. The GPUs are described (as `placement --gpus-json` does);
the models are real GGUF files."""

from __future__ import annotations

import json

import pytest

import modelfiles as mf
from engine_bridge.cli import main as cli_main
from engine_bridge.common.placement import Placement
from engine_bridge.models import compat, device_plan, synth
from engine_bridge.models.compat import FAIL, PASS
from engine_bridge.models.gguf_header import read_header

GiB = 2**30


def gpu(desc: str, free_gib: float) -> dict:
    return {"name": desc, "description": desc, "memory_free": int(free_gib * GiB), "memory_total": int(free_gib * GiB)}


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("plan")
    with mf.fast_vocab():
        return synth.write_pair(d, synth.TargetSpec(n_layer=4), synth.DrafterSpec(), stem="plan")


def test_layers_follow_llama_cpps_assignment(pair):
    target, _ = pair
    two = [gpu("A", 10), gpu("B", 10)]
    # shares 1,1 over n_layer + 1 = 5 slots (the output counts as a layer): 0-2 on A, 3 + output on B
    p = device_plan.plan_model(target, Placement(tensor_split=(1, 1)), two)
    assert p.holdings[0].layers == [0, 1, 2] and p.holdings[1].layers == [3] and p.output_device == 1
    # 1,3: the first quarter on A
    p = device_plan.plan_model(target, Placement(tensor_split=(1, 3)), two)
    assert p.holdings[0].layers == [0, 1] and p.holdings[1].layers == [2, 3]
    # no tensor split: shares by free memory; A has almost none, so it gets only layer 0 (llama.cpp's
    # upper_bound gives the first layer to the first GPU whose share is above zero)
    p = device_plan.plan_model(target, Placement(), [gpu("A", 0.01), gpu("B", 10)])
    assert p.holdings[0].layers == [0] and p.holdings[1].layers == [1, 2, 3]
    # split none: everything on the main GPU
    p = device_plan.plan_model(target, Placement(split_mode="none", main_gpu=1), two)
    assert p.holdings[1].layers == [0, 1, 2, 3] and 0 not in p.holdings and p.output_device == 1
    # --ngl 2: the first two layers and the output stay on the CPU, as llama.cpp does
    p = device_plan.plan_model(target, Placement(tensor_split=(1, 1)), two, n_gpu_layers=2)
    assert p.holdings[device_plan.CPU].layers == [0, 1] and p.output_device == device_plan.CPU
    # every byte of the file is somewhere (the tied output counted once more, on its device)
    h = read_header(target)
    total = sum(t.n_bytes for t in h.tensors.values())
    tied = 0 if "output.weight" in h.tensors else h.tensors["token_embd.weight"].n_bytes
    assert sum(x.weights for x in p.holdings.values()) == total + tied


def test_kv_cache_sits_with_its_layers(pair):
    target, _ = pair
    p = device_plan.plan_model(
        target, Placement(tensor_split=(1, 1)), [gpu("A", 10), gpu("B", 10)], n_ctx=1000, kv=("f16", "q8_0")
    )
    # 2 KV heads x head_dim 16 per layer: K f16 2 bytes, V q8_0 34/32 bytes per element
    per_layer = 1000 * int(32 * 2 + 32 * 34 / 32)
    assert p.holdings[0].kv == 3 * per_layer and p.holdings[1].kv == per_layer


def test_a_split_that_cannot_fit_is_refused_with_the_numbers(pair):
    target, drafter = pair
    need = device_plan.plan_model(target, Placement(tensor_split=(1, 1)), [gpu("A", 10), gpu("B", 10)], n_ctx=4096)
    on_a = need.holdings[0].total
    small = (on_a + device_plan.MARGIN_BYTES - 1) / GiB  # one byte short on A
    r = compat.check(
        target,
        drafter,
        gpus=[gpu("A", small), gpu("B", 10)],
        placement=Placement(tensor_split=(1, 1)),
        n_ctx=4096,
        build={"backend": "cuda"},
    )
    fits = r.get("split_fits")
    assert fits.status == FAIL and "GPU0 (A)" in fits.reason and "free" in fits.reason and "--tensor-split" in fits.fix
    assert not r.ok
    r = compat.check(
        target,
        drafter,
        gpus=[gpu("A", small + 0.01), gpu("B", 10)],
        placement=Placement(tensor_split=(1, 1)),
        n_ctx=4096,
        build={"backend": "cuda"},
    )
    assert r.get("split_fits").status == PASS, r.get("split_fits").reason
    # a main GPU this machine lacks: a clear failure, not an exception
    bad = compat.check(
        target, gpus=[gpu("A", 10)], placement=Placement(split_mode="none", main_gpu=3), build={"backend": "cuda"}
    ).get("split_fits")
    assert bad.status == FAIL and "main GPU 3 does not exist" in bad.reason
    # no GPUs: no split check at all
    assert compat.check(target, drafter, build={"backend": "cpu"}).get("split_fits") is None


def test_the_drafter_goes_beside_the_targets_output(pair):
    target, drafter = pair
    two = [gpu("A", 10), gpu("B", 10)]
    assert compat.default_draft_placement(target, Placement(tensor_split=(1, 1)), two) == Placement(
        split_mode="none", main_gpu=1
    )
    assert compat.default_draft_placement(target, Placement(split_mode="none", main_gpu=0), two).main_gpu == 0
    reason = (
        compat.check(target, drafter, gpus=two, placement=Placement(tensor_split=(1, 1)), build={"backend": "cuda"})
        .get("split_fits")
        .reason
    )
    assert "drafter: GPU1 (B)" in reason and "drafter: GPU0" not in reason


@pytest.mark.parametrize(
    "text, error", [("3,x", "numbers separated by commas"), ("-1,2", "shares >= 0"), ("0,0", "positive sum")]
)
def test_bad_tensor_splits_are_refused(text, error):
    with pytest.raises(ValueError, match=error):
        Placement.parse("layer", text, 0)


def test_cli_placement(pair, tmp_path, capsys):
    target, drafter = pair
    gpus = tmp_path / "gpus.json"
    gpus.write_text(json.dumps([gpu("RTX A", 10), gpu("RTX B", 10)]))
    assert (
        cli_main(
            [
                "placement",
                "--target",
                str(target),
                "--draft",
                str(drafter),
                "--gpus-json",
                str(gpus),
                "--tensor-split",
                "1,3",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "GPU0 (RTX A): layers 0" in out and "PASS  split_fits" in out and "drafter (split none, main GPU 1)" in out
    gpus.write_text(json.dumps([gpu("RTX A", 0.001), gpu("RTX B", 10)]))
    assert (
        cli_main(["placement", "--target", str(target), "--gpus-json", str(gpus), "--tensor-split", "1,1", "--json"])
        == 1
    )
    rep = json.loads(capsys.readouterr().out)
    assert rep["fits"] is False and "GPU0 (RTX A)" in rep["reason"]
    assert cli_main(["placement", "--target", str(target), "--gpus-json", str(gpus), "--tensor-split", "a"]) == 2
    assert "numbers separated by commas" in capsys.readouterr().err
