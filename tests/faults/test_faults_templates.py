"""Chat templates from GGUF metadata that try to leave the sandbox, loop or build huge strings:
each ends in a ChatTemplateError that says why, the engine keeps working, the app's memory is
untouched, and an honest template renders afterwards."""

from __future__ import annotations

import pytest

from fault_outcomes import REFUSED
from fault_templates import HOSTILE, case_honest_after, case_template


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_template(tiny_pair, tmp_path, name):
    out = case_template(tiny_pair[0], tmp_path, name)
    assert out.kind == REFUSED and out.lost == 0


def test_honest_template_after_hostile_ones(tiny_pair, tmp_path):
    case_template(tiny_pair[0], tmp_path, "loop: nested ranges")  # kills the renderer
    out = case_honest_after(tiny_pair[0], tmp_path)
    assert out.figures["renderer_starts"] >= 2


def test_cli_reports_a_hostile_template(tiny_pair, tmp_path):
    """The CLI user sees the message and an exit code, not a traceback."""
    import subprocess
    import sys
    from pathlib import Path

    from fault_templates import template_target

    path = template_target(tiny_pair[0], tmp_path, "cli", HOSTILE["escape: dunder attributes"][0])
    exe = Path(sys.executable).parent / "dflash-studio"
    r = subprocess.run(
        [str(exe), "generate", "--target", str(path), "--chat", "--prompt", "hi", "--max-tokens", "4"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1, r.stderr
    assert "sandbox forbids" in r.stderr and "Traceback" not in r.stderr
