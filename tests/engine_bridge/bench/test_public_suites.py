"""The public benchmark suites shipped in resources/prompts/public/ (MT-Bench first turns, the first
100 GSM8K test problems, HumanEval): the bench loads them by name, they are chat suites rendered
with the target's template, and every one of their prompts is caught by the decontamination check
(so none can slip into training)."""

from __future__ import annotations

import pytest

from engine_bridge.bench.suites import PUBLIC_SUITES, SuiteError, builtin_names, load_suite
from engine_bridge.training import decontam


@pytest.mark.parametrize(
    "name,n,first_words,fingerprint",
    [
        ("mt-bench", 80, "Compose an engaging travel blog post", "mt-bench"),
        ("gsm8k", 100, "Janet’s ducks lay 16 eggs per day", "gsm8k-test"),
        ("humaneval", 164, "Complete the following Python function.", "humaneval"),
    ],
)
def test_public_suites_load_by_name_and_are_all_fingerprinted(name, n, first_words, fingerprint):
    assert name in builtin_names()
    suite = load_suite(name)
    assert suite.name == name and len(suite.prompts) == n and len({p.id for p in suite.prompts}) == n
    assert all(p.kind == "chat" and len(p.messages) == 1 and p.messages[0][0] == "user" for p in suite.prompts)
    assert suite.prompts[0].messages[0][1].startswith(first_words)
    rep = decontam.check([p.messages[0][1] for p in suite.prompts])
    assert rep["n_hit"] == n and all(fingerprint in h["sets"] for h in rep["hits"])


def test_humaneval_wording_wraps_the_function_in_a_code_block():
    p = load_suite("humaneval").prompts[0].messages[0][1]
    assert p.startswith("Complete the following Python function.\n\n```python\nfrom typing import List\n")
    assert p.endswith('"""\n```') and "def has_close_elements(" in p


def test_an_unknown_suite_name_lists_the_public_ones():
    with pytest.raises(SuiteError) as exc:
        load_suite("alpaca-eval")
    assert all(name in str(exc.value) for name in PUBLIC_SUITES)
