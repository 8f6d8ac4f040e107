"""The 15.7 M reference pair (resources/models/): a trained qwen3 target and its trained DFlash drafter.

Random-weight pairs prove correctness but accept almost nothing; this pair is the fixture behind
every acceptance figure. Its card (resources/models/card.md) has the training details and the
measured figures; these tests hold the engine to them on held-out prompts (never trained on).
"""

from __future__ import annotations

import json

import pytest

from engine_bridge.models import demo
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.common.resources import resource

import engine_corpus

PAIR = demo.shipped_pair()

#: Measured on CPU for exactly this test (6 held-out prompts x 64 tokens, pooled): 2.37 at budget 7,
#: 2.40 at 15 (card.md has the 15-prompt figures). The floor leaves room for numerical differences
#: between builds, not for a bug that shifts the drafts by one block slot (that measured 1.28).
MIN_MEAN_COMMIT_B7 = 1.5
N_PROMPTS, MAX_TOKENS = 6, 64
#: The pair is q8_0: llama.cpp's batched (verify) and single-token (AR) q8_0 matmuls differ by up to
#: ~0.5 % of a logit, so greedy runs may part where the target's top two logits are this close.
#: Measured with this pair: tree runs parted from AR 9 times in 30, at margins 0.0001-0.061; the
#: f32 export of the same weights parts never. engine_corpus.NEAR_TIE (0.02) is for f32/f16 fixtures.
NEAR_TIE_Q8 = 0.1


def assert_lossless(engine, prompt: str, reference: list[int], produced: list[int], what: str) -> None:
    engine_corpus.assert_lossless(engine, prompt, reference, produced, what, tol=NEAR_TIE_Q8)


def heldout_prompts(n: int | None = None) -> list[str]:
    lines = resource("models", "prompts.jsonl").read_text().splitlines()
    out = [json.loads(x)["prompt"] for x in lines if x.strip()]
    return out[:n] if n else out


@pytest.fixture(scope="module")
def engine():
    from engine_bridge.runtime.engine import Engine
    from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT

    assert PAIR is not None, "the reference pair must ship in resources/models/ (target.gguf, drafter.gguf)"
    target, draft = PAIR
    eng = Engine.load(
        EngineConfig(target=target, draft=draft, n_ctx=1024, n_batch=512, n_ubatch=512, n_threads=1),
        preflight=PAIR_PREFLIGHT,
    )
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def ar_runs(engine):
    out = []
    for p in heldout_prompts(N_PROMPTS):
        engine.reset()
        out.append(engine.generate(p, GenerationSettings(mode="ar", max_tokens=MAX_TOKENS)))
    return out


def test_the_reference_pair_is_the_default_until_smollm2_is_fetched(tmp_path, monkeypatch):
    # the default is SmolLM2 + its drafter once the target is in the models cache (test_default_pair)
    monkeypatch.setenv("DFLASH_DATA_DIR", str(tmp_path / "data"))
    assert demo.demo_pair() == PAIR


def test_sizes_card_and_metadata():
    from engine_bridge.models.modelinfo import inspect_model

    assert PAIR is not None, "the reference pair must ship in resources/models/ (target.gguf, drafter.gguf)"
    target, draft = PAIR
    assert target.stat().st_size + draft.stat().st_size <= 40 * 1024 * 1024
    card = resource("models", "card.md").read_text()
    for word in ("PSF-2.0", "MIT", "mean commit length", "tokenizer"):
        assert word in card
    t, d = inspect_model(target), inspect_model(draft)
    assert t.arch == "qwen3" and d.arch == "dflash"
    assert d.tokens_hash == t.tokens_hash  # the drafter carries the target's tokenizer
    assert d.target_layers and max(d.target_layers) < t.n_layer


def test_tokenizer_round_trip(engine):
    text = "def add(a, b):\n    return a + b\n"
    ids = engine.tokenize(text)
    assert ids[0] == 0  # <|endoftext|> opens every document
    assert engine.detokenize(ids[1:]) == text
    assert engine.drafter.mask_token == 1


def test_target_writes_python(ar_runs):
    text = "".join(r.text for r in ar_runs)
    assert any(k in text for k in ("self", "return", "def ", "if ", "=")), text[:300]


@pytest.mark.parametrize("budget", [7, 15])
def test_chain_is_lossless_and_accepts(engine, ar_runs, budget):
    committed = steps = 0
    for p, ref in zip(heldout_prompts(N_PROMPTS), ar_runs):
        engine.reset()
        r = engine.generate(p, GenerationSettings(mode="chain", budget=budget, max_tokens=MAX_TOKENS))
        assert_lossless(engine, p, list(ref.tokens), list(r.tokens), f"chain budget {budget}")
        committed += r.summary.n_generated
        steps += r.summary.n_steps
    mean_commit = committed / steps
    assert mean_commit > MIN_MEAN_COMMIT_B7, f"budget {budget}: mean commit length {mean_commit:.2f}"


def test_tree_is_lossless(engine, ar_runs):
    if not engine.tree_capable:
        pytest.skip(engine.tree_reason)
    for p, ref in zip(heldout_prompts(N_PROMPTS), ar_runs):
        for budget in (8, 16):
            engine.reset()
            r = engine.generate(p, GenerationSettings(mode="tree", budget=budget, max_tokens=MAX_TOKENS))
            assert_lossless(engine, p, list(ref.tokens), list(r.tokens), f"tree budget {budget}")


def test_bench_on_the_reference_pair():
    from engine_bridge.bench.runner import BenchSpec, parse_sweep, run_bench
    from engine_bridge.bench.report import build_report
    from engine_bridge.bench.suites import load_suite

    assert PAIR is not None, "the reference pair must ship in resources/models/ (target.gguf, drafter.gguf)"
    target, draft = PAIR
    spec = BenchSpec(
        engine=EngineConfig(target=target, draft=draft, n_ctx=1024, n_batch=512, n_ubatch=512, n_threads=1),
        suite=load_suite(resource("models", "prompts.jsonl")).head(3),
        reps=1,
        max_tokens=48,
        sweep=parse_sweep(["budget=7"]),
    )
    res = run_bench(spec)
    assert all(r.status == "ok" for r in res.rows), [(r.id, r.error) for r in res.rows]
    spec_rows = [r for r in res.rows if r.kind == "spec"]
    ms = res.of_row(spec_rows[0].id)
    commits = [c for m in ms for c in m.commit_lens]
    assert sum(commits) / len(commits) > MIN_MEAN_COMMIT_B7
    report = {r["id"]: r for r in build_report(res)["rows"]}
    assert report[spec_rows[0].id]["lossless"] is True
