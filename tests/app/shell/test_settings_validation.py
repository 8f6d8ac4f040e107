"""Hand-edited settings files never stop the app; each reset field is named (issue 32).

An integer beyond a spin box's range, an unknown KV type, a badly shaped adapter list or a
non-integer ui/conversation each aborted the window at start. Here the ini file is written by
hand, as a user or an older version would leave it, then loaded and opened in a real window.
"""

from __future__ import annotations

import math

import pytest

from app.shell.app_settings import FLOAT_RANGES, INT_RANGES, StudioSettings, open_settings


def _ini(path, lines: dict[str, str], group: str = "studio") -> None:
    body = "\n".join(f"{k}={v}" for k, v in lines.items())
    path.write_text(f"[{group}]\n{body}\n")


HOSTILE = {
    "n_ctx": ("999999999999", INT_RANGES["n_ctx"][1]),
    "draft_window": ("50", 128),  # EngineConfig takes 0 or at least 128
    "budget": ("-5", INT_RANGES["budget"][0]),
    "seed": ("99999999999999999999", INT_RANGES["seed"][1]),
    "max_tokens": ("1e9", StudioSettings().max_tokens),  # not an integer: the default
    "n_gpu_layers": ("lots", StudioSettings().n_gpu_layers),
    "main_gpu": ("100000", INT_RANGES["main_gpu"][1]),
    "temperature": ("nan", StudioSettings().temperature),
    "top_p": ("7.5", FLOAT_RANGES["top_p"][1]),
    "top_k": ("-1", 0),
    "target_k": ("q9_9", "f16"),
    "draft_v": ("", "f16"),
    "flash_attn": ("maybe", "auto"),
    "split_mode": ("diagonal", "layer"),
    "mode": ("warp", StudioSettings().mode),  # the default: chain on a GPU build, auto on a CPU-only one
    "adapters": ('[["a.gguf"]]', []),
    "highlight_drafts": ("perhaps", True),
    "engine_in_process": ("sometimes", False),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_each_out_of_range_or_unknown_value_is_reset_and_named(tmp_path, name):
    raw, expected = HOSTILE[name]
    path = tmp_path / "s.ini"
    _ini(path, {name: raw, "target": "/m/t.gguf"})
    settings, resets = StudioSettings.load_checked(open_settings(path))
    assert getattr(settings, name) == expected
    assert [r.split(":")[0] for r in resets] == [name], resets
    assert settings.target == "/m/t.gguf"
    settings.engine_config()  # builds: no ValueError from a reset field
    settings.generation_settings()


def test_a_context_or_window_below_its_smallest_is_raised_and_zero_is_kept(tmp_path):
    path = tmp_path / "s.ini"
    _ini(path, {"n_ctx": "5", "draft_window": "0", "target": "/m/t.gguf"})
    settings, resets = StudioSettings.load_checked(open_settings(path))
    assert (settings.n_ctx, settings.draft_window) == (16, 0)
    assert resets == ["n_ctx: 5 is below the smallest context 16; 16 used"]
    assert settings.engine_config().draft_window == 0


@pytest.mark.parametrize("adapters", ['{"a": 1}', '[["a.gguf", "half"]]', '[["a.gguf", NaN]]', "[[1, 2]]", "nope"])
def test_badly_shaped_adapters_are_reset(tmp_path, adapters):
    path = tmp_path / "s.ini"
    _ini(path, {"adapters": adapters})
    settings, resets = StudioSettings.load_checked(open_settings(path))
    assert settings.adapters == [] and resets and resets[0].startswith("adapters")


def test_good_values_are_kept_and_nothing_is_reported(tmp_path):
    path = tmp_path / "s.ini"
    good = StudioSettings(
        target="/m/t.gguf",
        adapters=[["/m/a.gguf", 0.5]],
        n_ctx=8192,
        temperature=0.7,
        top_k=0,
        target_k="q8_0",
        mode="auto",
        seed=2**31 - 1,
    )
    good.save(open_settings(path))
    settings, resets = StudioSettings.load_checked(open_settings(path))
    assert settings == good and resets == []
    assert all(math.isfinite(getattr(settings, f)) for f in FLOAT_RANGES)


def test_the_window_starts_on_a_hand_edited_file_and_says_what_was_reset(make_window, settings_file):
    settings_file.write_text(
        "[studio]\nn_ctx=999999999999\ntarget_k=q9_9\nadapters=[[1]]\nbudget=100000\n[ui]\nconversation=not-a-number\n"
    )
    w = make_window(first_run=True)  # the file exactly as edited
    assert w.settings_panel.n_ctx.value() == INT_RANGES["n_ctx"][1]
    assert w.settings_panel.budget.value() == INT_RANGES["budget"][1]
    text = w.chat.status.text()
    for name in ("n_ctx", "target_k", "adapters", "budget", "ui/conversation"):
        assert name in text, text
    assert w.session.conversation_id is None
