"""The engine in a child process (issue 32): what ends the child is named, never the caller, and
the child does everything the app asks of an in-process engine.

The aborting drafter is a real file llama.cpp refuses by aborting: an RMS-norm epsilon of -1 makes
``GGML_ASSERT(eps >= 0.0f)`` fail at the first decode (loaded without the pairing checks). The
first test proves that on a bare process, so the others cannot pass on a file that no longer aborts.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from engine_bridge.models import synth
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine_process import EngineLoadCancelled, EngineProcess, EngineProcessError, death_of

ROOT = Path(__file__).resolve().parents[3]
GREEDY = dict(max_tokens=12, stop_at_eog=False)


def aborting_drafter(folder: Path) -> Path:
    """A drafter for the tiny target (tests/conftest.py's tiny_pair) with a negative RMS-norm epsilon."""
    return synth.write_drafter(
        folder / "negative-eps-dflash.gguf",
        synth.TargetSpec(arch="qwen3", vocab="gpt2"),
        synth.DrafterSpec(rms_eps=-1.0),
    )


def test_the_aborting_drafter_aborts_a_bare_process(tiny_pair, tmp_path):
    bad = aborting_drafter(tmp_path)
    script = textwrap.dedent(f"""
        from engine_bridge.runtime.config import EngineConfig, GenerationSettings
        from engine_bridge.runtime.engine import Engine
        eng = Engine.load(EngineConfig(target={str(tiny_pair[0])!r}, draft={str(bad)!r}, n_ctx=512), check=False)
        print("loaded", flush=True)
        eng.generate("Hello", GenerationSettings(mode="chain", budget=4, max_tokens=4))
        print("survived", flush=True)
    """)
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env=dict(os.environ, GGML_NO_BACKTRACE="1"),
    )
    assert out.returncode == -signal.SIGABRT, (out.returncode, out.stderr[-2000:])
    assert "loaded" in out.stdout and "survived" not in out.stdout
    assert "GGML_ASSERT(eps >= 0.0f) failed" in out.stderr


def test_an_abort_in_the_child_is_named_and_the_caller_goes_on(tiny_pair, tmp_path):
    bad = aborting_drafter(tmp_path)
    eng = EngineProcess.load(EngineConfig(target=tiny_pair[0], draft=bad, n_ctx=512), check=False)
    try:
        with pytest.raises(EngineProcessError) as err:
            eng.generate("Hello", GenerationSettings(mode="chain", budget=4, max_tokens=4))
        exc = err.value
        assert exc.reason == "aborted"
        msg = str(exc)
        assert msg.startswith("The engine stopped mid-generation: llama.cpp aborted the engine (SIGABRT")
        assert "GGML_ASSERT(eps >= 0.0f) failed" in msg and msg.endswith("Reload the pair.")
        assert eng.dead and eng._proc.returncode == -signal.SIGABRT
        with pytest.raises(EngineProcessError, match="the engine is gone"):
            eng.describe()
        # the same object loads a good pair again in a fresh child
        eng.config = EngineConfig(target=tiny_pair[0], draft=tiny_pair[1], n_ctx=512)
        eng.reload(check=False)
        assert len(eng.generate("Hello", GenerationSettings(mode="chain", budget=4, **GREEDY)).tokens) == 12
    finally:
        eng.close()


def test_a_child_that_dies_while_idle_is_named_at_the_next_request(tiny_pair):
    eng = EngineProcess.load(EngineConfig(target=tiny_pair[0], draft=tiny_pair[1], n_ctx=512), check=False)
    try:
        os.kill(eng.pid, signal.SIGSEGV)
        eng._proc.wait(10)
        with pytest.raises(EngineProcessError) as err:
            eng.reset()
        assert err.value.reason == "crashed" and "while idle" in str(err.value) and "SIGSEGV" in str(err.value)
    finally:
        eng.close()


def test_how_each_end_is_named():
    assert death_of(-signal.SIGABRT, 0, 0)[0] == "aborted"
    assert death_of(-signal.SIGBUS, None, None)[0] == "crashed"
    assert death_of(-signal.SIGKILL, 3, 3) == ("killed", death_of(-signal.SIGKILL, None, None)[1])
    reason, text = death_of(-signal.SIGKILL, 3, 4)  # the memory cgroup counted an OOM kill meanwhile
    assert reason == "out_of_memory" and "ran out of memory" in text
    assert death_of(-signal.SIGTERM, 0, 0) == ("killed", "the engine ended with SIGTERM")
    assert death_of(3, 0, 0) == ("exited", "the engine exited with code 3")


def test_drafter_swaps_adapters_and_snapshots_through_the_child(tiny_pair, models_dir, tmp_path):
    target, draft = tiny_pair
    other = synth.write_drafter(
        tmp_path / "other-drafter.gguf", synth.TargetSpec(), synth.DrafterSpec(seed=11, draft_scale=2.0)
    )
    lora = synth.write_lora(tmp_path / "variant-lora.gguf", scale=3.0)
    eng = EngineProcess.load(EngineConfig(target=target, draft=draft, n_ctx=1024), preflight=PAIR_PREFLIGHT)
    try:
        settings = GenerationSettings(mode="chain", budget=6, **GREEDY)
        base = eng.generate("Hello world", settings)
        eng.swap_drafter(other, check=False)
        # the parent's config follows the child's: a reload loads the drafter in use
        assert eng.config.draft == Path(other) and eng.describe()["draft"] == str(other)
        eng.reset()
        assert eng.generate("Hello world", settings).tokens == base.tokens  # lossless either way
        eng.swap_drafter(draft, check=False)
        eng.set_adapters([(lora, 1.0)], check=False)
        assert eng.config.adapters == ((Path(lora), 1.0),) and eng.describe()["adapters"][0][0] == str(lora)
        eng.set_adapters([], check=False)
        assert eng.config.adapters == ()
        # a snapshot of the target's cache crosses the socket and puts the cache back byte for byte
        eng.reset()
        eng.generate("The first request", GenerationSettings(mode="ar", max_tokens=8))
        snap = eng.snapshot_target()
        first = eng.generate("The first request goes on", GenerationSettings(mode="ar", max_tokens=10))
        eng.generate("Unrelated words", GenerationSettings(mode="ar", max_tokens=6))
        eng.restore_target(snap, keep=first.summary.n_prompt_reused)
        again = eng.generate("The first request goes on", GenerationSettings(mode="ar", max_tokens=10))
        assert again.summary.n_prompt_reused == first.summary.n_prompt_reused and again.tokens == first.tokens
    finally:
        eng.close()


def test_a_load_is_cancelled_by_ending_the_child(tiny_pair):
    cancel = threading.Event()
    started = time.monotonic()
    with pytest.raises(EngineLoadCancelled):
        # the first progress message comes from the child: it is loading; cancel it there
        EngineProcess.load(
            EngineConfig(target=tiny_pair[0], draft=tiny_pair[1], n_ctx=512),
            check=False,
            progress=lambda _: cancel.set(),
            cancel=cancel,
        )
    assert time.monotonic() - started < 60


def test_a_local_child_has_no_generation_watchdog(tiny_pair):
    """A local step (a long prompt's prefill on a CPU) may outlast the RPC watchdog without being hung."""
    eng = EngineProcess.load(EngineConfig(target=tiny_pair[0], draft=tiny_pair[1], n_ctx=512), check=False)
    try:
        assert eng.watchdog_s is None
    finally:
        eng.close()


def test_what_runs_before_the_first_token_reaches_the_caller_from_the_child(tiny_pair, tmp_path, monkeypatch):
    """Auto's first request calibrates in the child: each step of it comes back through on_progress
    before any token (the app's chat shows it), and a plain chain request says nothing."""
    monkeypatch.setenv("DFLASH_DATA_DIR", str(tmp_path / "data"))  # no cached table: it must measure
    eng = EngineProcess.load(EngineConfig(target=tiny_pair[0], draft=tiny_pair[1], n_ctx=512), check=False)
    try:
        events: list[str] = []
        eng.generate(
            "Hello",
            GenerationSettings(mode="auto", budget=4, **GREEDY),
            on_token=lambda ev: events.append("token"),
            on_progress=lambda text: events.append(text),
        )
        said = [e for e in events if e != "token"]
        assert said and said[0].startswith("calibrating AR: step costs 1/")
        assert events.index("token") > events.index(said[-1])
        events.clear()
        eng.generate(
            "Hello",
            GenerationSettings(mode="chain", budget=4, **GREEDY),
            on_token=lambda ev: events.append("token"),
            on_progress=events.append,
        )
        assert set(events) == {"token"}
    finally:
        eng.close()
