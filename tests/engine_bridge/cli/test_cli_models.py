"""The model subcommands end to end through the real dispatcher (engine_bridge.cli.dispatch)."""

from __future__ import annotations

import json

import pytest

import modelfiles as mf
from engine_bridge.models import synth
from engine_bridge.cli import main
from engine_bridge.models.modelinfo import inspect_model
from hubserver import FakeHub


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    with mf.fast_vocab():
        tspec = synth.TargetSpec()
        target, drafter = synth.write_pair(d, tspec, synth.DrafterSpec())
        nomask = synth.write_drafter(d / "nomask.gguf", tspec, synth.DrafterSpec(with_mask_token=False))
        hf = mf.write_hf_drafter(d / "hf", tspec, synth.DrafterSpec(), rope="nested")
        hf_bad = mf.write_hf_drafter(d / "hf-bad", tspec, synth.DrafterSpec(), rope="missing")
    return dict(dir=d, target=target, drafter=drafter, nomask=nomask, hf=hf, hf_bad=hf_bad)


@pytest.fixture(autouse=True)
def data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("DFLASH_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


def run(capsys, *argv):
    code = main(list(map(str, argv)))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_inspect(capsys, pair, tmp_path):
    code, out, _ = run(capsys, "inspect", pair["drafter"])
    assert code == 0 and "role            dflash" in out and "mask token      50255" in out
    code, out, _ = run(capsys, "inspect", pair["target"], "--json")
    assert code == 0 and json.loads(out)["arch"] == "qwen3"
    junk = tmp_path / "junk.gguf"
    junk.write_text("no model here, sorry\n" * 3)
    code, _, err = run(capsys, "inspect", junk)
    assert code == 2 and "not a GGUF" in err


def test_check_exit_codes(capsys, pair, tmp_path):
    code, out, _ = run(capsys, "check", pair["target"], pair["drafter"])
    assert code == 0 and "compatible, 0 warning(s)" in out
    code, out, _ = run(capsys, "check", pair["target"], pair["nomask"])
    assert code == 1 and "FAIL  mask_token" in out and "NOT compatible" in out
    code, out, _ = run(capsys, "check", pair["target"], tmp_path / "missing.gguf")
    assert code == 2 and "drafter_readable" in out
    code, out, _ = run(
        capsys,
        "check",
        pair["target"],
        pair["drafter"],
        "--kv-k",
        "f16",
        "--kv-v",
        "q8_0",
        "--flash-attn",
        "off",
        "--json",
    )
    data = json.loads(out)
    assert (
        code == 1
        and not data["ok"]
        and {"kv_types_target", "kv_types_drafter"} <= {c["name"] for c in data["checks"] if c["status"] == "FAIL"}
    )
    code, _, err = run(capsys, "check", pair["target"], pair["drafter"], "--kv-k", "q9_9")
    assert code == 2 and "unknown KV cache type" in err
    lora = mf.write_lora(tmp_path / "l.gguf", pair["drafter"], arch="qwen3")
    code, out, _ = run(capsys, "check", pair["target"], pair["drafter"], "--adapter", lora)
    assert code == 1 and "FAIL  lora_adapter" in out
    code, out, _ = run(capsys, "check", pair["target"])
    assert code == 0 and "drafter_role" not in out


def test_convert_and_quantize(capsys, pair, tmp_path):
    out_path = tmp_path / "conv.gguf"
    code, out, _ = run(capsys, "convert", pair["hf"], "--target", pair["target"], "--out", out_path, "--type", "f32")
    assert code == 0 and "rope_parameters" in out and inspect_model(out_path).role == "dflash"
    code, _, err = run(capsys, "convert", pair["hf"], "--target", pair["target"], "--out", out_path)
    assert code == 1 and "exists" in err
    code, _, err = run(capsys, "convert", pair["hf_bad"], "--target", pair["target"], "--out", tmp_path / "bad.gguf")
    assert code == 1 and "rope_theta" in err and not (tmp_path / "bad.gguf").exists()
    code, _, _ = run(capsys, "convert", tmp_path / "nowhere", "--target", pair["target"], "--out", tmp_path / "x.gguf")
    assert code == 2
    code, out, _ = run(capsys, "quantize", out_path, "--type", "q4_0")
    assert code == 0 and (tmp_path / "conv-q4_0.gguf").is_file()
    assert "Q4_0" in inspect_model(tmp_path / "conv-q4_0.gguf").quant_types
    code, _, err = run(capsys, "quantize", pair["target"], "--out", tmp_path / "t.gguf")
    assert code == 1 and "not a DFlash drafter" in err
    # an output that cannot be written (a read-only install; here a "folder" that is a file): a sentence
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    code, _, err = run(capsys, "quantize", out_path, "--type", "q4_0", "--out", blocker / "v.gguf")
    assert (
        code == 1 and err.startswith(f"dflash-studio: could not write {blocker / 'v.gguf'}") and "Traceback" not in err
    )
    code, _, err = run(capsys, "convert", pair["hf"], "--target", pair["target"], "--out", blocker / "c.gguf")
    assert code == 1 and "could not write" in err


def test_pull_search_and_library(capsys, pair, data_dir, monkeypatch, tmp_path):
    import huggingface_hub.constants as hc

    hub = FakeHub().start()
    try:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.delenv("HF_TOKEN", raising=False)
        monkeypatch.setattr(hc, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
        hub.add("me/tiny-GGUF", "tiny-target-F32.gguf", pair["target"].read_bytes())
        hub.add("me/tiny-DFlash", "config.json", (pair["hf"] / "config.json").read_bytes(), lfs=False)
        hub.add("me/tiny-DFlash", "model.safetensors", (pair["hf"] / "model.safetensors").read_bytes())

        code, out, _ = run(capsys, "search", "tiny")
        assert code == 0 and "me/tiny-GGUF" in out and "me/tiny-DFlash" in out
        code, out, err = run(capsys, "pull", "me/tiny-GGUF")
        assert code == 1 and "tiny-target-F32.gguf" in out and "F32" in out
        code, out, err = run(capsys, "pull", "me/tiny-GGUF", "tiny-target-F32.gguf")
        target = data_dir / "models" / "me" / "tiny-GGUF" / "tiny-target-F32.gguf"
        assert code == 0 and target.is_file() and "(target, qwen3)" in out and "MiB" in err
        code, out, _ = run(capsys, "pull", "me/tiny-DFlash")
        assert code == 0 and "(dflash, dflash)" in out
        code, _, _ = run(capsys, "pull", "me/tiny-GGUF", "../../evil.gguf")
        assert code == 2
        code, _, err = run(capsys, "pull", "nobody/nothing", "x.gguf")
        assert code == 1 and "nobody/nothing" in err
    finally:
        hub.stop()
    code, out, _ = run(capsys, "pull", "me/tiny-GGUF", "tiny-target-F32.gguf", "--offline")
    assert code == 0
    code, out, _ = run(capsys, "pull", "me/tiny-GGUF", "other.gguf", "--offline")
    assert code == 1

    code, out, _ = run(capsys, "library", "list", "--json")
    roles = {e["role"] for e in json.loads(out)}
    assert code == 0 and {"target", "dflash"} <= roles
    drafter_dir = data_dir / "models" / "me" / "tiny-DFlash"
    code, out, _ = run(
        capsys, "convert", drafter_dir, "--target", target, "--out", drafter_dir.parent / "tiny-dflash.gguf"
    )
    assert code == 0
    code, out, _ = run(capsys, "library", "scan")
    assert code == 0 and "tiny-dflash.gguf" in out
    code, out, _ = run(capsys, "library", "groups")
    assert code == 0 and "tiny-dflash.gguf" in out
    code, out, _ = run(capsys, "library", "catalog")
    assert code == 0 and "z-lab/Qwen3-8B-DFlash-b16" in out
    code, out, _ = run(capsys, "library", "pairs")
    assert code == 0


def test_library_list_on_a_corrupt_cache(capsys, pair, data_dir):
    """issue 32: a damaged library.sqlite printed a traceback; it is a cache, so it is rebuilt."""
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "library.sqlite").write_bytes(b"garbage " * 1000)
    code, out, err = run(capsys, "library", "list")
    assert code == 0 and "Traceback" not in err
    assert "moved to" in err and "rebuilt" in err
