"""Lint, format and type checks in ``make test`` (issue 32): ruff and mypy, pinned in the dev extra
and configured in pyproject.toml ([tool.ruff], [tool.mypy]).

* ``ruff check`` on the whole tree: pyflakes, pycodestyle errors and warnings, bugbear, pylint's
  errors (the rule set and its exceptions are in pyproject.toml).
* ``ruff format --check`` on the whole tree (it was formatted once, mechanically, when no branch
  was in flight; run ``ruff format`` before committing).
* ``mypy`` on engine_bridge/ (the Qt-free package).

Each check is also shown to fail on a planted violation, so a broken invocation (a wrong path, a
config that selects nothing) cannot pass silently.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "pyproject.toml"


# a module with an unused import and one that ruff's formatter would rewrite
PLANTED_LINT = "import os\n\n\ndef f():\n    return 1\n"
PLANTED_FORMAT = "x = {  'a':1 }\n"
# a None reaching arithmetic: mypy's strict-Optional check, on in our config
PLANTED_TYPE = "def f(x: int | None) -> int:\n    return x + 1\n"


def _tool(module: str, *args: str) -> subprocess.CompletedProcess:
    if importlib.util.find_spec(module) is None:
        pytest.fail(
            f"{module} is not installed in this environment: `make setup` installs the dev extra "
            "(pyproject.toml), which pins it"
        )
    return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


def _said(proc: subprocess.CompletedProcess) -> str:
    return (proc.stdout + proc.stderr)[-6000:]


def test_ruff_check_passes_on_the_tree():
    proc = _tool("ruff", "check", "--config", str(CONFIG), ".")
    assert proc.returncode == 0, _said(proc)


def test_ruff_check_fails_on_a_planted_violation(tmp_path):
    bad = tmp_path / "planted.py"
    bad.write_text(PLANTED_LINT)
    proc = _tool("ruff", "check", "--no-cache", "--config", str(CONFIG), str(bad))
    assert proc.returncode == 1 and "F401" in proc.stdout, _said(proc)


def test_ruff_format_check_passes_on_the_tree():
    proc = _tool("ruff", "format", "--check", "--config", str(CONFIG), ".")
    assert proc.returncode == 0, _said(proc) + "\n(run `ruff format` on the file(s) named above)"


def test_ruff_format_check_fails_on_a_planted_file(tmp_path):
    bad = tmp_path / "planted.py"
    bad.write_text(PLANTED_FORMAT)
    proc = _tool("ruff", "format", "--check", "--no-cache", "--config", str(CONFIG), str(bad))
    assert proc.returncode == 1, _said(proc)


def test_mypy_passes_on_engine_bridge_and_fails_on_a_planted_error(tmp_path):
    """One run (mypy's cold start is most of its time): engine_bridge plus a planted module, whose
    error must be the only one."""
    bad = tmp_path / "planted_mypy.py"
    bad.write_text(PLANTED_TYPE)
    proc = _tool("mypy", "--config-file", str(CONFIG), "engine_bridge", str(bad))
    errors = [line for line in proc.stdout.splitlines() if ": error:" in line]
    # by name: mypy's cache may replay the planted module's error under an earlier run's tmp_path
    planted = [line for line in errors if Path(line.split(":", 1)[0]).name == bad.name]
    others = [line for line in errors if line not in planted]
    assert not others, "\n".join(others)
    assert proc.returncode == 1 and len(planted) == 1 and "[operator]" in planted[0], _said(proc)
