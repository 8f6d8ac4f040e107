"""The verify mode a request runs in when nobody chose one: chain on a GPU build, auto on a CPU-only
one (where chain is slower than the target alone), AR without a drafter; and the app, ``generate``
and ``serve`` all start from it."""

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
