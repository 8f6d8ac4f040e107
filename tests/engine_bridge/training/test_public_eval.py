"""The public evaluation suite the drafter figures are reported on (evaluate_chat.public_prompts):
MT-Bench's 80 first turns as chat, the first 100 GSM8K test problems as math, HumanEval's 164 as code,
one user message each, and every one of them refused as training data by the decontamination check."""

from __future__ import annotations

import collections

from engine_bridge.training import decontam
from engine_bridge.training.evaluate_chat import public_prompts


def test_public_suite_has_the_three_benchmarks_as_categories():
    items = public_prompts()
    assert collections.Counter(it["category"] for it in items) == {"chat": 80, "math": 100, "code": 164}
    assert all(len(it["messages"]) == 1 and it["messages"][0]["role"] == "user" for it in items)
    assert len({it["id"] for it in items}) == len(items)
    code = [it for it in items if it["category"] == "code"]
    assert all("```python" in it["messages"][0]["content"] for it in code)


def test_every_public_prompt_would_be_refused_as_training_data():
    texts = [it["messages"][0]["content"] for it in public_prompts()]
    rep = decontam.check(texts)
    assert rep["n_hit"] == len(texts)


def test_evaluate_chat_runs_the_categories_and_budgets_it_is_given(tmp_path):
    """--categories / --budgets / --tree-budgets (one process per category on the GPU machine): the
    report holds exactly those; an unknown category is refused before anything loads."""
    import json

    import pytest

    from engine_bridge.models import demo, registry_models
    from engine_bridge.training.evaluate_chat import main

    target, drafter = registry_models.cached(), demo.smollm2_drafter()
    if target is None or drafter is None:
        pytest.skip("the default pair is not in the models cache: run `dflash-studio fetch-default`")
    with pytest.raises(SystemExit) as e:
        main(["--target", str(target), "--draft", str(drafter), "--public", "--categories", "poetry"])
    assert e.value.code == 2
    out = tmp_path / "eval.json"
    main(
        [
            "--target",
            str(target),
            "--draft",
            str(drafter),
            "--public",
            "--categories",
            "math",
            "--n-per-category",
            "1",
            "--max-tokens",
            "6",
            "--budgets",
            "3",
            "--tree-budgets",
            "",
            "--threads",
            "1",
            "--gpu-layers",
            "0",
            "--json",
            str(out),
        ]
    )
    res = json.loads(out.read_text())
    assert list(res["categories"]) == ["math"] and res["modes"] == ["chain-3"]
    assert res["categories"]["math"]["n"] == 1
