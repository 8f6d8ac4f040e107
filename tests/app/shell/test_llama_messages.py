"""llama.cpp's warnings from a load reach the user in the status bar (its own log stays quiet)."""

from __future__ import annotations

from app_helpers import load_pair


def test_a_context_past_the_trained_length_is_warned_about_in_the_status_bar(qtbot, make_window, tiny_pair):
    w = make_window(n_ctx=8192)  # the tiny target was trained for 4096
    load_pair(qtbot, w, tiny_pair)
    shown = w.status.currentMessage()
    assert "llama.cpp warning:" in shown and "n_ctx_seq (8192) > n_ctx_train (4096)" in shown


def test_the_default_context_is_the_models_own_and_nothing_is_warned(qtbot, make_window, tiny_pair):
    w = make_window()  # n_ctx 0: the model's own length
    assert w.settings.n_ctx == 0
    got = []
    w.pairLoaded.connect(got.append)
    load_pair(qtbot, w, tiny_pair)
    assert got[0].describe["n_ctx"] == 4096 and got[0].llama_messages == ()
    assert "llama.cpp warning" not in w.status.currentMessage()
