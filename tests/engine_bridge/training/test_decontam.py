"""Decontamination (engine_bridge/training/decontam.py) against the shipped fingerprints of the public
evaluation sets, and the shipped real prompt set (engine_bridge/training/real_prompts.py) against it.

* the whole shipped prompt set (both splits) is clean; its val split shares no text with train;
* one evaluation item put among clean prompts (a GSM8K test question, a HumanEval prompt, an
  MT-Bench question) is refused, and the error names the set and the prompt;
* a near copy (case, whitespace, punctuation) is refused; a short evaluation item inside a longer
  text is refused; unrelated prompts pass, and so does a 12-word piece of an evaluation item.
"""

from __future__ import annotations

import json

import pytest

from engine_bridge.common.resources import resource
from engine_bridge.training import chat_prompts, decontam, real_prompts


def suite_texts(name: str) -> list[str]:
    lines = resource("prompts", "public", name).read_text().splitlines()
    return [json.loads(line)["messages"][0]["content"] for line in lines if line.strip()]


@pytest.fixture(scope="module")
def clean():
    """Unrelated prompts: our own templates (no public benchmark text in them)."""
    train, _ = chat_prompts.compose(n_per_category=40, seed=3)
    return [p["text"] for p in train]


def test_fingerprints_cover_the_evaluation_sets():
    fp = decontam.load()
    items = {k: v["items"] for k, v in fp.info.items()}
    assert items == {
        "mt-bench": 80,
        "vicuna-80": 80,
        "humaneval": 164,
        "gsm8k-test": 1319,
        "alpaca-eval": 805,
        "mbpp": 974,
        "math-test": 5000,
    }
    assert len(fp.gram) > 100_000 and (fp.gram[1:] > fp.gram[:-1]).all()  # sorted, distinct
    assert len(fp.full) > 9000


def test_the_shipped_prompt_set_is_clean():
    rows = real_prompts.load(split=None)
    assert len(rows) > 25_000
    rep = decontam.require_clean([r["text"] for r in rows], [r["id"] for r in rows])
    assert rep["n"] == len(rows) and rep["n_hit"] == 0
    train = {r["text"] for r in rows if r["split"] == "train"}
    val = {r["text"] for r in rows if r["split"] == "val"}
    assert val and not train & val
    assert 0.01 < len(val) / len(rows) < 0.03


@pytest.mark.parametrize(
    "suite,where,expect",
    [
        ("gsm8k_test.jsonl", 37, "gsm8k-test"),
        ("humaneval.jsonl", 101, "humaneval"),
        ("mt_bench.jsonl", 12, "mt-bench"),
    ],
)
def test_one_evaluation_item_among_clean_prompts_is_refused(clean, suite, where, expect):
    item = suite_texts(suite)[where]
    texts = clean[:50] + [item] + clean[50:]
    labels = [f"prompt {i}" for i in range(len(texts))]
    with pytest.raises(decontam.ContaminationError) as exc:
        decontam.require_clean(texts, labels)
    msg = str(exc.value)
    assert "1 of" in msg and "prompt 50 matches" in msg and expect in msg
    rep = decontam.check(texts)
    assert [h["index"] for h in rep["hits"]] == [50] and expect in rep["hits"][0]["sets"]


def test_a_near_copy_is_refused(clean):
    q = suite_texts("gsm8k_test.jsonl")[3]
    near = "  " + q.upper().replace(" ", "   \n ").replace(".", " . ") + " !!"
    rep = decontam.check(clean + [near])
    assert rep["n_hit"] == 1 and rep["hits"][0]["set"] == "gsm8k-test"
    # a HumanEval prompt re-indented and with its docstring quotes changed still shares 13-grams
    he = suite_texts("humaneval.jsonl")[0].replace('"""', "'''").replace("    ", "\t")
    assert decontam.check([he])["hits"][0]["set"] == "humaneval"


def test_a_short_evaluation_item_inside_a_longer_text_is_refused():
    # Vicuna-80's first question has 8 words: too short for a 13-gram, caught as a whole item
    rep = decontam.check(["Quick one before my meeting. How can I improve my time-management skills?? Thanks a lot"])
    assert rep["n_hit"] == 1 and rep["hits"][0]["kind"] == "short item" and "vicuna-80" in rep["hits"][0]["sets"]
    rep = decontam.check(["how can i improve my time management skills"])
    assert rep["hits"][0]["kind"] == "exact"


def test_unrelated_prompts_and_short_pieces_pass(clean):
    assert decontam.require_clean(clean)["n_hit"] == 0
    q = decontam.words(suite_texts("gsm8k_test.jsonl")[0])
    piece = " ".join(q[:12])  # 12 words of a test question: under the 13-gram rule
    assert decontam.check([piece, "What is 2 + 2?", ""])["n_hit"] == 0


def test_built_fingerprints_find_their_own_items(tmp_path):
    fp = decontam.build(
        {
            "a": ["one two three four five six seven eight nine ten eleven twelve thirteen fourteen"],
            "b": ["alpha beta gamma delta epsilon zeta eta theta iota"],
        }
    )
    decontam.save(fp, tmp_path / "fp.npz")
    decontam.load.cache_clear()
    fp2 = decontam.load(tmp_path / "fp.npz")
    assert fp2.sets == ("a", "b")
    rep = decontam.check(
        [
            "x " + "two three four five six seven eight nine ten eleven twelve thirteen fourteen",
            "zz Alpha, beta, gamma: delta epsilon zeta eta theta iota zz",
            "alpha beta gamma",
        ],
        fingerprints=fp2,
    )
    assert [(h["index"], h["set"], h["kind"]) for h in rep["hits"]] == [(0, "a", "13-gram"), (1, "b", "short item")]


def test_the_command_line_check_lists_hits_by_line(tmp_path, capsys):
    f = tmp_path / "gen.jsonl"
    q = suite_texts("mt_bench.jsonl")[40]
    f.write_text(json.dumps({"text": "Tell me about owls."}) + "\n\n" + json.dumps({"prompt": q}) + "\n")
    assert decontam.main([str(f)]) == 1
    out = capsys.readouterr().out
    assert "2 prompts, 1 overlap" in out and "line 3: mt-bench" in out
    f.write_text(json.dumps({"text": "Tell me about owls."}) + "\n")
    assert decontam.main([str(f)]) == 0
