"""The small pieces the window stands on: throttle, ring buffer, stream channel, settings."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from app.shell.app_settings import StudioSettings, config_changes, open_settings
from app.common.ring_buffer import RingBuffer
from app.common.stream_channel import StreamChannel
from app.common.throttle import Throttle
from engine_bridge.runtime.config import KVTypes


def test_throttle_runs_first_call_at_once_and_merges_a_burst(qtbot):
    calls = []
    t = Throttle(lambda: calls.append(1), interval_ms=50)
    t()
    assert calls == [1]  # no delay for a lone event
    for _ in range(500):  # a burst while the timer runs
        t()
    assert calls == [1] and t.pending
    qtbot.waitUntil(lambda: len(calls) == 2, timeout=1000)  # merged into one call
    assert not t.pending
    qtbot.wait(120)
    assert len(calls) == 2  # idle: nothing more runs


def test_throttle_keeps_redraws_under_twenty_a_second(qtbot):
    from PySide6.QtCore import QElapsedTimer, QTimer

    t = Throttle(lambda: None, interval_ms=50)
    clock = QElapsedTimer()
    clock.start()
    pump = QTimer()
    pump.timeout.connect(t)  # a call every millisecond, for half a second
    pump.start(1)
    qtbot.waitUntil(lambda: clock.elapsed() >= 500, timeout=2000)
    pump.stop()
    assert 5 <= t.calls <= 12  # <= 20/s (+1 for the immediate first call)


def test_throttle_flush_and_cancel(qtbot):
    calls = []
    t = Throttle(lambda: calls.append(1), interval_ms=10_000)
    t()
    t()
    t.flush()
    assert len(calls) == 2
    t()
    t.cancel()
    qtbot.wait(30)
    assert len(calls) == 2 and not t.pending


def test_ring_buffer_keeps_the_newest_rows_in_order():
    rb = RingBuffer(4, 2)
    for i in range(6):
        rb.append((i, 10 * i))
    assert len(rb) == 4 and rb.total == 6
    assert rb.column(0).tolist() == [2, 3, 4, 5]
    rb.extend(np.arange(20).reshape(10, 2))
    assert rb.column(0).tolist() == [12, 14, 16, 18] and rb.total == 16
    rb.clear()
    assert len(rb) == 0 and rb.values().shape == (0, 2)
    with pytest.raises(ValueError):
        RingBuffer(0)


def test_stream_channel_notifies_once_per_drain_and_loses_nothing(qtbot):
    ch = StreamChannel()
    notes = []
    ch.ready.connect(lambda: notes.append(1))
    n = 20_000

    def produce():
        for i in range(n):
            ch.push_token(i)
            if i % 7 == 0:
                ch.push_step(-i)

    th = threading.Thread(target=produce)
    th.start()
    got_tokens, got_steps = [], []
    while th.is_alive() or notes:
        qtbot.wait(5)
        tokens, steps = ch.drain()
        got_tokens += tokens
        got_steps += steps
        notes.clear()
    th.join()
    tokens, steps = ch.drain()
    got_tokens += tokens
    got_steps += steps
    assert got_tokens == list(range(n))
    assert got_steps == [-i for i in range(0, n, 7)]


def test_settings_survive_an_ini_round_trip(tmp_path):
    qs = open_settings(tmp_path / "s.ini")
    s = StudioSettings(
        target="/m/t.gguf",
        drafter="/m/d.gguf",
        adapters=[["/m/a.gguf", 0.5]],
        n_ctx=8192,
        budget=7,
        temperature=0.7,
        top_p=0.9,
        highlight_drafts=False,
        flash_attn="on",
        target_v="q8_0",
    )
    s.save(qs)
    back = StudioSettings.load(open_settings(tmp_path / "s.ini"))
    assert back == s


def test_config_changes_split_reload_from_drafter_swap():
    base = StudioSettings(target="/m/t.gguf", drafter="/m/d.gguf").engine_config()
    assert config_changes(base, base) == ([], [])
    assert config_changes(base, base.replace(n_ctx=1024)) == (["n_ctx"], [])
    assert config_changes(base, base.replace(draft=base.draft.with_name("d-q8.gguf"))) == ([], ["draft"])
    reload, swap = config_changes(base, base.replace(target_kv=KVTypes("q8_0", "q8_0"), adapters=(("a", 1.0),)))
    assert reload == ["target_kv"] and swap == ["adapters"]
    assert config_changes(base, base.replace(draft=None))[0] == ["draft"]


def test_a_job_that_finishes_at_once_still_delivers_its_result(qtbot):
    from app.common.tasks import TaskRunner

    runner = TaskRunner()
    results = []
    for i in range(20):  # instant jobs: the result must not beat the connect
        job = runner.start("instant", lambda job, x: x * 2, i)
        job.succeeded.connect(results.append)
    qtbot.waitUntil(lambda: len(results) == 20, timeout=5000)
    assert sorted(results) == [2 * i for i in range(20)]
    failed = []
    job = runner.start("boom", lambda job: 1 / 0)
    job.failed.connect(failed.append)
    qtbot.waitUntil(lambda: len(failed) == 1, timeout=5000)
    assert isinstance(failed[0], ZeroDivisionError)
    assert runner.shutdown() and not runner.running()


def test_cpu_budget_stretches_and_relaxes_the_redraw_interval(monkeypatch):
    from app.common import ui_budget

    clock = {"cpu": 0.0, "wall": 0.0}
    monkeypatch.setattr(ui_budget.time, "thread_time", lambda: clock["cpu"])
    monkeypatch.setattr(ui_budget.time, "perf_counter", lambda: clock["wall"])
    b = ui_budget.CpuBudget(budget=0.03, min_ms=50, max_ms=1000)
    seen = []
    for _ in range(12):  # drawing takes 20 % of the time: back off
        clock["cpu"] += 0.05
        clock["wall"] += 0.25
        seen.append(b.update())
    assert seen == sorted(seen) and seen[-1] == 1000 and b.share > 0.03
    clock["cpu"] += 0.01  # a window that is too short is not judged
    clock["wall"] += 0.1
    assert b.update() == 1000
    for _ in range(12):  # drawing got cheap (or the answer ended): speed up again
        clock["cpu"] += 0.001
        clock["wall"] += 0.25
        b.update()
    assert b.interval_ms == 50


def test_file_names_tell_same_named_files_apart():
    from app.common.file_names import distinct_labels, short_path

    assert short_path("/m/smollm2/drafter.gguf") == "smollm2/drafter.gguf" and short_path("x.gguf") == "x.gguf"
    paths = ["/a/models/smollm2/drafter.gguf", "/a/models/drafter.gguf", "/b/x/models/drafter.gguf", "/c/t.gguf"]
    assert distinct_labels(paths) == [
        "smollm2/drafter.gguf",
        "a/models/drafter.gguf",
        "x/models/drafter.gguf",
        "c/t.gguf",
    ]
    assert len(set(distinct_labels(paths))) == len(paths)
