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
