"""The engine's test corpus: prompts, and the losslessness assertion used by chain and tree tests."""

from __future__ import annotations

import numpy as np

#: Batched and single-token decodes differ by ~1e-4 relative in the logits (as in upstream
#: llama.cpp), so two greedy runs may part where the target's top two logits are this close.
NEAR_TIE = 0.02

PROMPTS = [
    "Hello world", "The quick brown fox", "def main():\n    print(", "1, 2, 3, 4,", "Once upon a time",
    "import numpy as np\n", "SELECT * FROM users WHERE", "Dear team,", "The capital of France is",
    "for i in range(10):", "<html><body>", "Question: what is 2+2?\nAnswer:", "Lorem ipsum dolor",
    "class Engine:\n    def __init__(self):", "Step 1:", "user: hi\nassistant:", "# Title\n\nSome text",
    "λ calculus and ünïcödé", "x = [", "In 1969, the first",
]
# Longer than the fixture's n_ubatch (64) and than one draft-side injection chunk.
LONG_PROMPT = " ".join(f"token{i} and" for i in range(120))


def assert_lossless(engine, prompt, reference: list[int], produced: list[int], what: str = "",
                    tol: float = NEAR_TIE) -> None:
    """``produced`` must equal the autoregressive ``reference``, except that both may part at a
    floating-point near-tie of the target's own logits; then the shared prefix is what counts."""
    if produced == reference:
        return
    k = next((i for i, (a, b) in enumerate(zip(reference, produced)) if a != b), None)
    assert k is not None, f"{what}: lengths differ ({len(produced)} vs {len(reference)}) on a common prefix"
    prompt_tokens = engine.tokenize(prompt) if isinstance(prompt, str) else list(prompt)
    logits = engine.next_token_logits(prompt_tokens + reference[:k])
    top2 = np.sort(logits)[-2:]
    margin = float(top2[1] - top2[0])
    assert margin < tol, (f"{what}: speculative output differs at token {k} "
                               f"({produced[k]} vs {reference[k]}) where the target's margin is {margin:.4f}")
