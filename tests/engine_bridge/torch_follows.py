"""The torch GGUF target teacher-forced on llama.cpp's own greedy answers: on quantised files llama.cpp
quantises activations for its dot products, so the logits differ a little. Torch must pick
llama.cpp's token almost everywhere, and where it does not, llama.cpp's token must be a near-tie
in torch's logits too. Shared by the SmolLM2 (Q4_1) and Qwen2.5 (Q4_K_M) tests."""

from __future__ import annotations


def assert_torch_follows_llama_cpp(model, runs, *, tie: float = 1.5, share: float = 0.9) -> None:
    """``runs``: (prompt ids, llama.cpp's greedy continuation) pairs."""
    import torch

    same = total = 0
    with torch.no_grad():
        for p, ar in runs:
            logits = model(torch.tensor([list(p) + list(ar)]))[0][0].float()
            for j, tok in enumerate(ar):
                row = logits[len(p) - 1 + j]
                total += 1
                if int(row.argmax()) == tok:
                    same += 1
                else:
                    assert float(row.max() - row[tok]) < tie, (j, tok, int(row.argmax()))
    assert total and same / total >= share, f"{same}/{total}"
