"""The verify mode a request runs in when nobody chose one: chain on a GPU build, auto on a CPU-only
one (where chain is slower than the target alone), AR without a drafter; its budget: 5 for chain on a
GPU build, else 7; and the app, ``generate`` and ``serve`` all start from them."""

from __future__ import annotations

import json

import pytest

from engine_bridge.cli import main as cli_main
from engine_bridge.runtime import default_mode as dm
from engine_bridge.runtime import llama_ffi


@pytest.mark.parametrize(
    "backend, has_drafter, want",
    [
        ("cpu", True, "auto"),
        ("cuda", True, "chain"),
        ("metal", True, "chain"),
        ("cpu", False, "ar"),
        ("cuda", False, "ar"),
    ],
)
def test_the_default_follows_the_build(monkeypatch, backend, has_drafter, want):
    monkeypatch.setattr(llama_ffi, "build_info", lambda: {"backend": backend})
    assert dm.default_mode(has_drafter) == want


def test_an_engine_that_cannot_say_its_build_keeps_chain(monkeypatch):
    def broken():
        raise OSError("no libllama")

    monkeypatch.setattr(llama_ffi, "build_info", broken)
    assert dm.default_mode(True) == "chain"


@pytest.mark.parametrize(
    "backend, mode, want",
    [
        ("cuda", "chain", 5),
        ("metal", "chain", 5),
        ("cuda", "tree", 7),  # below 7 a tree's top-k runs on the host
        ("cuda", "auto", 7),
        ("cpu", "chain", 7),
        ("cpu", "auto", 7),
        ("cpu", "tree", 7),
    ],
)
def test_the_default_budget_follows_the_build_and_mode(monkeypatch, backend, mode, want):
    monkeypatch.setattr(llama_ffi, "build_info", lambda: {"backend": backend})
    assert dm.default_budget(mode) == want


def test_an_engine_that_cannot_say_its_build_keeps_budget_7(monkeypatch):
    def broken():
        raise OSError("no libllama")

    monkeypatch.setattr(llama_ffi, "build_info", broken)
    assert dm.default_budget("chain") == 7


def test_a_gpu_builds_first_run_is_chain_5_in_the_app(monkeypatch):
    from app.shell.app_settings import StudioSettings

    monkeypatch.setattr(llama_ffi, "build_info", lambda: {"backend": "cuda"})
    s = StudioSettings()
    assert (s.mode, s.budget) == ("chain", 5)
    monkeypatch.setattr(llama_ffi, "build_info", lambda: {"backend": "cpu"})
    s = StudioSettings()
    assert (s.mode, s.budget) == ("auto", 7)


def test_generate_without_budget_runs_the_default_and_an_explicit_one_wins(tiny_pair, tmp_path, monkeypatch, capsys):
    """``generate`` in chain without --budget runs the build's default (7 on the CPU build the tests
    run), and --budget 3 runs 3: the step records never draft more than the budget."""
    monkeypatch.setenv("DFLASH_DATA_DIR", str(tmp_path / "data"))
    t, d = map(str, tiny_pair)
    base = ["generate", "--target", t, "--draft", d, "--n-ctx", "1024", "--prompt", "Hello", "--max-tokens", "24"]
    base += ["--mode", "chain", "--json"]
    want = dm.default_budget("chain")
    for extra, budget in (([], want), (["--budget", "3"], 3)):
        assert cli_main(base + extra) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["summary"]["budget_requested"] == budget
        drafted = [s["drafted"] for s in out["steps"]]
        assert 0 < max(drafted) <= budget


def test_this_cpu_build_defaults_to_auto_in_the_app_and_in_generate(tiny_pair, tmp_path, monkeypatch, capsys):
    """The engine the tests run is a CPU build: a new user's settings say auto, and ``generate``
    without --mode runs auto, saying on stderr that it measures the step costs first."""
    from app.shell.app_settings import StudioSettings

    if llama_ffi.build_info().get("backend", "cpu") != "cpu":
        pytest.skip("a GPU build starts in chain (test_the_default_follows_the_build)")
    assert StudioSettings().mode == "auto"
    monkeypatch.setenv("DFLASH_DATA_DIR", str(tmp_path / "data"))
    t, d = map(str, tiny_pair)
    base = ["generate", "--target", t, "--n-ctx", "1024", "--prompt", "Hello", "--max-tokens", "8", "--json"]
    assert cli_main(base + ["--draft", d]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["summary"]["mode"] == "auto"
    assert cli_main(base[:-1] + ["--draft", d]) == 0  # text: the calibration is cached now, nothing said
    assert "calibrating" not in capsys.readouterr().err
    monkeypatch.setenv("DFLASH_DATA_DIR", str(tmp_path / "data2"))
    assert cli_main(base[:-1] + ["--draft", d]) == 0
    err = capsys.readouterr().err
    assert "dflash-studio generate: calibrating AR: step costs 1/" in err
    assert cli_main(base) == 0  # no drafter: AR
    assert json.loads(capsys.readouterr().out)["summary"]["mode"] == "ar"


def test_bench_without_budget_measures_the_default(tiny_pair, tmp_path, monkeypatch):
    """``bench`` with no --budget and no budget sweep runs chat's default budget (7 on this CPU build)."""
    monkeypatch.setenv("DFLASH_DATA_DIR", str(tmp_path / "data"))
    t, d = map(str, tiny_pair)
    out = tmp_path / "r.json"
    args = ["bench", "--target", t, "--draft", d, "--threads", "1", "--n-ctx", "512", "--suite", "code"]
    args += ["--limit", "1", "--reps", "1", "--max-tokens", "8", "--quiet", "--out", str(out)]
    assert cli_main(args) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["budget"] for r in rows] == [0, dm.default_budget("chain")]
