"""The app on the default pair: SmolLM2-135M-Instruct (the real target ``make test`` fetched into the
models cache) answers a chat question sensibly.

With the trained drafter shipped in resources/models/smollm2/, the pair comes the way a new user
gets it: the first start's offer, through ``engine_bridge.models.demo.demo_pair``. Without it (the
drafter is trained separately) a synthetic drafter of SmolLM2's shape is loaded with the real
target instead: greedy output is the target's own either way, so the answer is checked the same.
"""

from __future__ import annotations

import pytest

from engine_bridge.models import demo, registry_models, synth
from engine_bridge.runtime.default_mode import default_mode

from app_helpers import LOAD_TIMEOUT_MS, ask, load_pair

QUESTION = "Give me three tips for staying healthy."
#: read at import, before the app fixtures point DFLASH_DATA_DIR at a private folder
CACHED_TARGET = registry_models.cached()


@pytest.fixture
def smollm2_target():
    target = CACHED_TARGET
    if target is None:
        pytest.skip("the default target is not in the models cache: run `dflash-studio fetch-default`")
    return target


def test_the_default_pair_answers_a_chat_question(qtbot, make_window, smollm2_target, private_dirs):
    w = make_window(max_tokens=48, mode="ar")
    if demo.smollm2_drafter() is not None:
        # the private data folder's models cache holds the fetched target (a link: no 94 MiB copy)
        models = private_dirs / "data" / "models"
        models.mkdir(parents=True, exist_ok=True)
        (models / smollm2_target.name).symlink_to(smollm2_target)
        assert w.pairing.demo_offer.isVisible()
        with qtbot.waitSignal(w.pairLoaded, timeout=LOAD_TIMEOUT_MS):
            w.pairing.demo_button.click()
        assert w.settings.drafter == str(demo.smollm2_drafter())
    else:
        drafter = synth.write_drafter_for(
            smollm2_target, private_dirs / "smollm2-synthetic-dflash.gguf", synth.DrafterSpec(n_layer=1)
        )
        load_pair(qtbot, w, (smollm2_target, drafter))
    assert smollm2_target.name in w.status.pair.text()
    text = ask(qtbot, w, QUESTION).text.lower()
    assert sum(word in text for word in ("water", "exercise", "sleep", "diet", "eat")) >= 2, text


def test_a_first_start_with_the_default_pair_present_loads_it_without_a_click(
    qtbot, make_window, smollm2_target, private_dirs
):
    """Issue 33, item 1: nothing configured and SmolLM2 + its drafter on disk -> the window loads them."""
    if demo.smollm2_drafter() is None:
        pytest.skip("the SmolLM2 drafter is not shipped in this checkout")
    models = private_dirs / "data" / "models"
    models.mkdir(parents=True, exist_ok=True)
    (models / smollm2_target.name).symlink_to(smollm2_target)
    w = make_window(first_run=True)
    qtbot.waitUntil(lambda: w.engine.state == "ready", timeout=LOAD_TIMEOUT_MS)
    assert not w.pairing.demo_offer.isVisible()
    # the mode a new user starts in: auto on this CPU build (chain there runs slower than the target
    # alone), chain on a GPU one; the settings panel shows it
    assert w.settings.mode == default_mode(True) and w.settings_panel.mode.currentData() == w.settings.mode
    assert w.settings.target == str(models / smollm2_target.name)
    assert w.settings.drafter == str(demo.smollm2_drafter())
    assert smollm2_target.name in w.status.pair.text() and w.chat.send_button.isEnabled()
