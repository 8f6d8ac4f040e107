"""gpu/gpu_render_prompts.py: the public prompts, rendered, in the order the bench reads its suites."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from engine_bridge.training.evaluate_chat import public_prompts

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gpu"))
import gpu_render_prompts  # noqa: E402


def test_each_category_holds_its_first_n_prompts_rendered(tiny_pair, tmp_path):
    counts = gpu_render_prompts.render(str(tiny_pair[0]), tmp_path, 3, ("chat", "code"))
    assert counts == {"chat": 3, "code": 3}
    assert not (tmp_path / "math-rendered.jsonl").exists()
    items = public_prompts()
    for cat in ("chat", "code"):
        rows = [json.loads(x) for x in (tmp_path / f"{cat}-rendered.jsonl").read_text().splitlines()]
        want = [r for r in items if r["category"] == cat][:3]
        assert [r["id"] for r in rows] == [r["id"] for r in want]
        for row, it in zip(rows, want, strict=True):
            assert it["messages"][0]["content"] in row["prompt"]
