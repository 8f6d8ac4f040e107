"""The engine's test corpus: prompts, and the losslessness assertion used by chain and tree tests."""

from __future__ import annotations

from engine_bridge.runtime import near_tie

#: The near-tie rule lives in engine_bridge.runtime.near_tie (the bench's lossless flag uses it too).
NEAR_TIE = near_tie.NEAR_TIE

PROMPTS = [
    "Hello world",
    "The quick brown fox",
    "def main():\n    print(",
    "1, 2, 3, 4,",
    "Once upon a time",
    "import numpy as np\n",
    "SELECT * FROM users WHERE",
    "Dear team,",
    "The capital of France is",
    "for i in range(10):",
    "<html><body>",
    "Question: what is 2+2?\nAnswer:",
    "Lorem ipsum dolor",
    "class Engine:\n    def __init__(self):",
    "Step 1:",
    "user: hi\nassistant:",
    "# Title\n\nSome text",
    "λ calculus and ünïcödé",
    "x = [",
    "In 1969, the first",
]
# Longer than the fixture's n_ubatch (64) and than one draft-side injection chunk.
LONG_PROMPT = " ".join(f"token{i} and" for i in range(120))


def assert_lossless(
    engine,
    prompt,
    reference: list[int],
    produced: list[int],
    what: str = "",
    tol: float = NEAR_TIE,
    replay: bool = True,
    verify_batches=(),
) -> None:
    """``produced`` must equal the autoregressive ``reference``, except that both may part at a
    floating-point near-tie of the target's own logits, or where the target itself, replayed in one
    of the verify's batch shapes, picks what ``produced`` holds (near_tie.replay_gaps); then the
    shared prefix is what counts."""
    prompt_tokens = engine.tokenize(prompt) if isinstance(prompt, str) else list(prompt)
    part = near_tie.parting(
        engine, prompt_tokens, reference, produced, tolerance=tol, replay=replay, verify_batches=verify_batches
    )
    assert part is None or part.near_tie, (
        f"{what}: speculative output differs at token {part.index} "
        f"({produced[part.index] if part.index < len(produced) else 'end'} vs "
        f"{reference[part.index] if part.index < len(reference) else 'end'}) where the target's margin is "
        f"{part.margin:.4f}"
        + (
            f"; replayed, the target keeps its pick under every batch shape (gaps {part.shape_gaps})"
            if part.shape_gaps
            else ""
        )
    )
