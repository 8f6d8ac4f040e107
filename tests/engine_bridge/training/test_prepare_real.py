"""The prepare stage (engine_bridge/training/chat_data.py) on the shipped real prompt set, with a
user's prompt file, on the real SmolLM2 GGUF (llama.cpp's tokenizer and the target's template).

* the default source is the real set: training prompts from its train split, held-out prompts
  (chat, code, math) and val.npz from its val split; sources and licences recorded in meta.json;
* a user's JSONL file (text / prompt / messages, optional category) is added and recorded;
* a prompt file holding a public benchmark question is refused naming the file's line and the set,
  before anything is written; a malformed line is reported with its number; the CLI says both
  without a traceback.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from engine_bridge.models import registry_models
from engine_bridge.training import chat_prompts, decontam, real_prompts


def smollm2_path():
    p = registry_models.cached()
    if p is None:
        pytest.skip("SmolLM2-135M-Instruct is not in the models cache: run `dflash-studio fetch-default`")
    return p


@pytest.fixture(scope="module")
def real_data(tmp_path_factory):
    from engine_bridge.training.chat_data import prepare

    src = tmp_path_factory.mktemp("mine") / "mine.jsonl"
    src.write_text(
        "\n".join(
            [
                json.dumps({"text": "Write a short note to my neighbour about the parcel I took in for them."}),
                "",
                "# a comment line",
                json.dumps({"prompt": "Sort the list [5, 3, 9] in Python without sorted().", "category": "code"}),
                json.dumps(
                    {
                        "messages": [
                            {"role": "system", "content": "Be brief."},
                            {"role": "user", "content": "What is a good name for a grey kitten?"},
                        ]
                    }
                ),
            ]
        )
        + "\n"
    )
    out = tmp_path_factory.mktemp("real-data")
    meta = prepare(smollm2_path(), out, n_per_category=5, variants=1, extra_prompts=src, log=lambda s: None)
    return out, meta, src


def test_prepare_draws_from_the_real_sets_train_split(real_data):
    from engine_bridge.training.chat_data import load_prompts, load_rows

    folder, meta, _ = real_data
    ids, cats, _ = load_prompts(folder)
    assert meta["prompt_source"] == "real" and meta["n_prompts"] == len(ids) == 6 * 5 + 3
    rows = load_rows(folder)
    train_texts = {r["text"] for r in real_prompts.load("train")}
    val_texts = {r["text"] for r in real_prompts.load("val")}
    shipped = [r for r in rows if not r["source"].startswith("user:")]
    assert len(shipped) == 30 and all(r["text"] in train_texts for r in shipped)
    assert {r["category"] for r in shipped} == set(chat_prompts.CATEGORIES)
    assert [chat_prompts.CATEGORIES[c] for c in cats.tolist()] == [r["category"] for r in rows]
    # the user's three prompts, with the category the file gave (chat by default)
    mine = {r["text"]: r["category"] for r in rows if r["source"] == "user:mine.jsonl"}
    assert mine == {
        "Write a short note to my neighbour about the parcel I took in for them.": "chat",
        "Sort the list [5, 3, 9] in Python without sorted().": "code",
        "What is a good name for a grey kitten?": "chat",
    }
    # the same seed, the same draw (the card's command reproduces the data)
    assert [r["id"] for r in real_prompts.sample(5, "train", 0, chat_prompts.CATEGORIES)] == [
        r["id"] for r in real_prompts.sample(5, "train", 0, chat_prompts.CATEGORIES)
    ]
    assert not val_texts & {r["text"] for r in rows}


def test_heldout_and_val_come_from_the_val_split(real_data):
    from engine_bridge.bench.suites import load_suite
    from engine_bridge.training.chat_data import load_prompts, load_rows

    folder, meta, _ = real_data
    val_texts = {r["text"] for r in real_prompts.load("val")}
    held = [json.loads(line) for line in (folder / "heldout.jsonl").read_text().splitlines()]
    assert meta["heldout_split"] == "val" and meta["heldout_counts"] == {"chat": 16, "code": 16, "math": 16}
    assert len(held) == 48 and all(h["messages"][0]["content"] in val_texts for h in held)
    assert {h["category"] for h in held} == set(chat_prompts.EVAL_CATEGORIES)
    assert len(load_suite(folder / "heldout.jsonl").prompts) == 48  # the bench reads it
    vids, vcats, _ = load_prompts(folder, "val")
    vrows = load_rows(folder, "val")
    assert len(vids) == len(vrows) == meta["val"]["n"] > 100 and all(r["text"] in val_texts for r in vrows)
    assert set(np.unique(vcats).tolist()) == set(range(len(chat_prompts.CATEGORIES)))


def test_meta_records_sources_licences_and_the_check(real_data):
    folder, meta, src = real_data
    known = real_prompts.sources()["sources"]
    used = {s for s in meta["counts_by_source"]}
    assert "user:mine.jsonl" in used and "gsm8k-train" in used
    for s in used - {"user:mine.jsonl"}:
        assert s in known and known[s]["licence"] in meta["sources"][s]
    assert "user:mine.jsonl" in meta["sources"]
    assert meta["extra_prompts"]["n"] == 3 and meta["extra_prompts"]["sha256"]
    assert meta["decontamination"]["hits"] == 0
    assert set(meta["decontamination"]["fingerprints"]) >= {"mt-bench", "humaneval", "gsm8k-test", "mbpp"}
    assert "MBPP" in meta["benchmarks_excluded"]


def test_a_contaminated_prompt_file_is_refused_before_anything_is_written(tmp_path):
    from engine_bridge.training.chat_data import prepare

    q = json.loads((real_prompts.folder().parent / "public" / "gsm8k_test.jsonl").read_text().splitlines()[7])
    bad = tmp_path / "mine.jsonl"
    bad.write_text(
        json.dumps({"text": "Hello, how are you today?"})
        + "\n"
        + json.dumps({"text": q["messages"][0]["content"], "category": "math"})
        + "\n"
    )
    with pytest.raises(decontam.ContaminationError, match=r"mine\.jsonl line 2 matches gsm8k-test"):
        prepare(smollm2_path(), tmp_path / "out", n_per_category=2, extra_prompts=bad, log=lambda s: None)
    assert not (tmp_path / "out").exists()


def test_a_malformed_line_is_reported_with_its_number(tmp_path):
    from engine_bridge.training.chat_data import PromptFileError, prepare

    bad = tmp_path / "mine.jsonl"
    cases = {
        '{"text": "fine"}\n{"text": "also fine"\n': r"mine\.jsonl line 2: not JSON",
        '{"text": "fine"}\n\n["a list"]\n': r"mine\.jsonl line 3: each line must be a JSON object",
        '{"prompt": ""}\n': r"mine\.jsonl line 1: give a non-empty string",
        '{"text": "x y z", "category": "poetry"}\n': r"mine\.jsonl line 1: unknown category 'poetry'",
        '{"messages": [{"role": "assistant", "content": "hi"}]}\n': r"mine\.jsonl line 1: 'messages' has no user",
    }
    for body, pattern in cases.items():
        bad.write_text(body)
        with pytest.raises(PromptFileError, match=pattern):
            prepare(smollm2_path(), tmp_path / "out", n_per_category=2, extra_prompts=bad, log=lambda s: None)


def test_the_cli_refuses_bad_prompt_files_without_a_traceback(tmp_path, capsys):
    from engine_bridge.cli import main

    q = json.loads((real_prompts.folder().parent / "public" / "mt_bench.jsonl").read_text().splitlines()[0])
    contaminated = tmp_path / "c.jsonl"
    contaminated.write_text(json.dumps({"messages": q["messages"]}) + "\n")
    malformed = tmp_path / "m.jsonl"
    malformed.write_text('{"text": "ok"}\nnot json\n')
    base = [
        "train-drafter",
        "--target",
        str(smollm2_path()),
        "--out",
        str(tmp_path / "d.gguf"),
        "--stage",
        "prepare",
        "--per-category",
        "2",
    ]
    assert main(base + ["--prompts", str(contaminated)]) == 1
    err = capsys.readouterr().err
    assert "c.jsonl line 1 matches mt-bench" in err and "Traceback" not in err
    assert main(base + ["--prompts", str(malformed)]) == 1
    err = capsys.readouterr().err
    assert "m.jsonl line 2: not JSON" in err and "Traceback" not in err
    assert main(base + ["--prompts", str(tmp_path / "missing.jsonl")]) == 2
    assert "no such file" in capsys.readouterr().err
