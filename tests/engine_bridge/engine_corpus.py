"""The engine's test corpus: prompts for losslessness checks (chain, tree, sampling)."""

PROMPTS = [
    "Hello world", "The quick brown fox", "def main():\n    print(", "1, 2, 3, 4,", "Once upon a time",
    "import numpy as np\n", "SELECT * FROM users WHERE", "Dear team,", "The capital of France is",
    "for i in range(10):", "<html><body>", "Question: what is 2+2?\nAnswer:", "Lorem ipsum dolor",
    "class Engine:\n    def __init__(self):", "Step 1:", "user: hi\nassistant:", "# Title\n\nSome text",
    "λ calculus and ünïcödé", "x = [", "In 1969, the first",
]
# Longer than the fixture's n_ubatch (64) and than one draft-side injection chunk.
LONG_PROMPT = " ".join(f"token{i} and" for i in range(120))
