"""A native failure never takes the window down (issue 32): the app's engine runs in a child
process, so a llama.cpp abort, a crash or a kill ends that process only. The window names what
happened, keeps the conversation and every token committed before, and reloads on request.

Real parts throughout: a real window (offscreen), real llama.cpp in a real child process, a drafter
file that really aborts llama.cpp (tests/engine_bridge/runtime/test_engine_process.py proves it on a
bare process) and a real SIGKILL.
"""

from __future__ import annotations

import os
import signal
import sqlite3
from pathlib import Path

from app_helpers import ANSWER_TIMEOUT_MS, LOAD_TIMEOUT_MS, ask, load_pair

from engine_bridge.models import synth
from engine_bridge.runtime.config import EngineConfig
from engine_bridge.runtime.engine_process import EngineProcessError


def _stored(store_file) -> list[tuple[str, str]]:
    return sqlite3.connect(store_file).execute("SELECT role, content FROM messages ORDER BY id").fetchall()


def test_a_drafter_that_aborts_llama_cpp_leaves_the_window_up(qtbot, make_window, tiny_pair, store_file, tmp_path):
    bad = synth.write_drafter(
        tmp_path / "negative-eps-dflash.gguf",
        synth.TargetSpec(arch="qwen3", vocab="gpt2"),
        synth.DrafterSpec(rms_eps=-1.0),
    )
    w = make_window(n_ctx=1024, max_tokens=8)
    # loaded as `--no-check` does: the pairing checks skipped, straight to llama.cpp
    with qtbot.waitSignal(w.pairLoaded, timeout=LOAD_TIMEOUT_MS):
        w.engine.load(EngineConfig(target=tiny_pair[0], draft=bad, n_ctx=1024), check=False)
    pid = w.engine.engine_pid
    assert pid is not None and pid != os.getpid()
    with qtbot.waitSignal(w.answerFailed, timeout=ANSWER_TIMEOUT_MS) as failed:
        w.chat.input.setPlainText("Hello")
        w.chat.send_button.click()
    exc = failed.args[0]
    assert isinstance(exc, EngineProcessError) and exc.reason == "aborted"
    qtbot.waitUntil(lambda: w.engine.state == "empty", timeout=LOAD_TIMEOUT_MS)
    assert w.isVisible()
    status = w.chat.status.text()
    assert status.startswith("The engine stopped mid-generation: llama.cpp aborted the engine (SIGABRT")
    assert "GGML_ASSERT(eps >= 0.0f) failed" in status and "The window and the conversation are kept." in status
    assert w.chat.reload_button.isVisible() and not w.chat.send_button.isEnabled()
    assert "llama.cpp aborted" in w.pairing.message.text()
    # the question is kept, in the window and the store; no empty answer was left behind
    assert [(m.role, m.content) for m in w.chat.transcript.messages] == [("user", "Hello")]
    assert _stored(store_file) == [("user", "Hello")]
    # a good pair loads in a fresh child and answers, in the same conversation
    load_pair(qtbot, w, tiny_pair)
    assert not w.chat.reload_button.isVisible()
    assert w.engine.engine_pid not in (None, pid)
    res = ask(qtbot, w, "Hello again")
    assert res.summary.n_generated > 0
    assert [m.role for m in w.chat.transcript.messages] == ["user", "user", "assistant"]


def test_killing_the_engine_mid_answer_keeps_the_committed_text(qtbot, make_window, tiny_pair, store_file):
    w = make_window(n_ctx=2048, max_tokens=8)
    load_pair(qtbot, w, tiny_pair)
    first = ask(qtbot, w, "Hello")
    w.settings = w.settings.replace(max_tokens=4000)
    with qtbot.waitSignal(w.answerFailed, timeout=ANSWER_TIMEOUT_MS) as failed:
        w.chat.input.setPlainText("Tell me a long story")
        w.chat.send_button.click()
        qtbot.waitUntil(lambda: len(w.chat.transcript.messages[-1].tokens) >= 5, timeout=ANSWER_TIMEOUT_MS)
        os.kill(w.engine.engine_pid, signal.SIGKILL)  # as the out-of-memory killer would
    exc = failed.args[0]
    assert isinstance(exc, EngineProcessError) and exc.reason in ("killed", "out_of_memory")
    qtbot.waitUntil(lambda: w.engine.state == "empty", timeout=LOAD_TIMEOUT_MS)
    assert w.isVisible() and w.chat.reload_button.isVisible()
    status = w.chat.status.text()
    assert status.startswith("The engine stopped mid-generation: ") and "(SIGKILL" in status
    # what the engine committed before it died is kept, in the window and in the store
    msgs = w.chat.transcript.messages
    assert [(m.role, m.content) for m in msgs[:3]] == [
        ("user", "Hello"),
        ("assistant", first.text),
        ("user", "Tell me a long story"),
    ]
    cut = msgs[3]
    assert cut.role == "assistant" and len(cut.tokens) >= 5 and cut.content == "".join(p for p, _, _ in cut.tokens)
    assert not w.chat.transcript.streaming
    assert _stored(store_file) == [(m.role, m.content) for m in msgs]
    # Reload brings the same pair back; regenerating the cut answer, greedy, gives the same tokens
    with qtbot.waitSignal(w.pairLoaded, timeout=LOAD_TIMEOUT_MS):
        w.chat.reload_button.click()
    assert not w.chat.reload_button.isVisible() and w.engine.state == "ready"
    w.settings = w.settings.replace(max_tokens=len(cut.tokens))
    with qtbot.waitSignal(w.answerFinished, timeout=ANSWER_TIMEOUT_MS) as again:
        w.chat.regenerate_button.click()
    assert again.args[0].text == cut.content
    assert _stored(store_file)[-1] == ("assistant", cut.content) and len(_stored(store_file)) == 4


def test_the_in_process_setting_keeps_the_engine_in_the_window(qtbot, make_window, tiny_pair):
    w = make_window(n_ctx=1024, max_tokens=4, engine_in_process=True)
    assert w.settings_panel.in_process.isChecked()
    load_pair(qtbot, w, tiny_pair)
    assert w.engine.engine_pid is None
    assert ask(qtbot, w, "Hello").summary.n_generated > 0
    # unticking it applies at the next load: the engine goes back to a child
    w.settings_panel.in_process.setChecked(False)
    assert w.settings.engine_in_process is False
    with qtbot.waitSignal(w.pairLoaded, timeout=LOAD_TIMEOUT_MS):
        w.load_pair()
    assert w.engine.engine_pid is not None


def test_the_child_engine_swaps_adapters_resets_and_cancels_a_load(qtbot, make_window, tiny_pair, tmp_path):
    """What the app asks of its engine besides chat, through the child: LoRA adapters and a drafter swap
    (drafterChanged with the child's config), reset, and a load cancelled mid-way (the child is killed)."""
    lora = synth.write_lora(tmp_path / "variant-lora.gguf", scale=3.0)
    other = synth.write_drafter(
        tmp_path / "other-dflash.gguf", synth.TargetSpec(arch="qwen3", vocab="gpt2"), synth.DrafterSpec(seed=11)
    )
    w = make_window(n_ctx=1024, max_tokens=6)
    load_pair(qtbot, w, tiny_pair)
    e = w.engine
    with qtbot.waitSignal(e.drafterChanged, timeout=LOAD_TIMEOUT_MS) as changed:
        e.set_adapters([(str(lora), 1.0)])
    info = changed.args[0]
    assert info.describe["adapters"] == [(str(lora), 1.0)] and info.config.adapters == ((Path(lora), 1.0),)
    with qtbot.waitSignal(e.drafterChanged, timeout=LOAD_TIMEOUT_MS) as changed:
        e.swap_drafter(other)
    assert changed.args[0].config.draft == Path(other) and e.info.config.draft == Path(other)
    assert e.last_load.config.draft == Path(other)  # a reload would bring this drafter back
    assert ask(qtbot, w, "Hello").summary.n_generated > 0
    e.reset()
    assert ask(qtbot, w, "Go on").summary.n_prompt_reused == 0  # the reset reached the child's cache
    assert ask(qtbot, w, "And on").summary.n_prompt_reused > 0  # (without one, the prefix is reused)
    # a load cancelled while the child loads (held stopped here, as a slow disk would): the child is
    # killed and the window says so; in the app's own process llama.cpp could not be interrupted
    old = e.engine_pid
    w.load_pair()
    qtbot.waitUntil(lambda: _loading_child(old) is not None, timeout=LOAD_TIMEOUT_MS)
    child = _loading_child(old)
    os.kill(child, signal.SIGSTOP)
    with qtbot.waitSignal(w.pairLoadFailed, timeout=LOAD_TIMEOUT_MS) as cancelled:
        w.engine.cancel_load()
    assert type(cancelled.args[0]).__name__ == "LoadCancelled"
    assert w.pairing.message.text() == "load cancelled" and w.engine.state == "empty"
    qtbot.waitUntil(lambda: not Path(f"/proc/{child}").exists() or _state(child) == "Z", timeout=10_000)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def _loading_child(other_than: int | None) -> int | None:
    """This process's engine child that is running (not yet a zombie), if one exists."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            cmd = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if (
            int(stat[1]) == os.getpid()
            and stat[0] != "Z"
            and int(entry.name) != other_than
            and b"engine_bridge.runtime.engine_process" in cmd
        ):
            return int(entry.name)
    return None
