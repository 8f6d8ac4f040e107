"""Ordinary mistakes get one line and an exit code from the CLI, never a traceback (issue 32).

An empty prompt, invalid UTF-8 in --prompt, sampling values out of range, a runaway --threads
and a write that fails part way (the process's file-size limit makes the kernel refuse the
write, as a full disk does) each printed a traceback or left a truncated report behind.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import modelfiles as mf
from engine_bridge.cli import main
from engine_bridge.models import synth

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli-errors")
    with mf.fast_vocab():
        tspec = synth.TargetSpec()
        target, drafter = synth.write_pair(d, tspec, synth.DrafterSpec())
        hf = mf.write_hf_drafter(d / "hf", tspec, synth.DrafterSpec())
    return dict(target=target, drafter=drafter, hf=hf)


def run(capsys, *argv):
    code = main(list(map(str, argv)))
    out = capsys.readouterr()
    return code, out.out, out.err


def _one_line(err: str) -> None:
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize(
    "flag,value,named",
    [
        ("--temp", "-0.5", "temperature"),
        ("--temp", "nan", "temperature"),
        ("--top-p", "1.5", "top_p"),
        ("--top-p", "nan", "top_p"),
        ("--top-k", "-1", "top_k"),
        ("--p-min", "2", "p_min"),
        ("--p-min", "-0.1", "p_min"),
        ("--threads", "0", "threads"),
    ],
)
def test_sampling_values_out_of_range_are_refused_before_loading(capsys, pair, flag, value, named):
    code, out, err = run(capsys, "generate", "--target", pair["target"], "--prompt", "hi", flag, value)
    assert code == 2 and named in err, err
    _one_line(err)


@pytest.mark.parametrize("prompt", ["", "   \n"])
def test_empty_prompt(capsys, pair, prompt):
    code, _, err = run(capsys, "generate", "--target", pair["target"], "--prompt", prompt)
    assert code == 2 and "empty" in err
    _one_line(err)


def test_invalid_utf8_in_the_prompt_argument(pair):
    # the bytes as a shell passes them; Python turns them into lone surrogates
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "engine_bridge.cli",
            "generate",
            "--target",
            str(pair["target"]),
            "--prompt",
            b"caf\xe9 \xff".decode("utf-8", "surrogateescape"),
        ],
        capture_output=True,
        cwd=ROOT,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 2 and "UTF-8" in err, err
    _one_line(err)


def test_threads_are_capped_at_a_multiple_of_the_cores(capsys, pair):
    code, _, err = run(
        capsys, "generate", "--target", pair["target"], "--prompt", "hi", "--max-tokens", "2", "--threads", "10000"
    )
    cap = 4 * (os.cpu_count() or 1)
    assert code == 0 and f"--threads 10000: capped at {cap}" in err, err


def _limited(limit: int):
    def setup():  # in the child: writes past `limit` bytes fail with EFBIG instead of killing it
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return setup


def _cli_limited(args: list[str], limit: int = 64 * 1024) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "engine_bridge.cli", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        preexec_fn=_limited(limit),
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def test_convert_on_a_full_disk(pair, tmp_path):
    out = tmp_path / "out" / "d.gguf"
    proc = _cli_limited(["convert", pair["hf"], "--target", pair["target"], "--out", out])
    assert proc.returncode == 1 and "could not write" in proc.stderr, proc.stderr
    _one_line(proc.stderr)
    assert not out.exists() and list(out.parent.iterdir()) == []  # nothing half-written left


def test_quantize_on_a_full_disk(pair, tmp_path):
    out = tmp_path / "q.gguf"
    proc = _cli_limited(["quantize", pair["drafter"], "--type", "q8_0", "--out", out])
    assert proc.returncode == 1 and "could not write" in proc.stderr, proc.stderr
    _one_line(proc.stderr)
    assert list(tmp_path.iterdir()) == []


_WRITE_REPORT = """
import sys
from engine_bridge.bench.export import write_report
report = {"rows": [], "big": "x" * 200000}
write_report(report, json_path=sys.argv[1])
"""


def test_a_report_write_that_fails_leaves_the_old_report_whole(tmp_path):
    old = tmp_path / "r.json"
    old.write_text('{"old": true}')
    proc = subprocess.run(
        [sys.executable, "-c", _WRITE_REPORT, str(old)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        preexec_fn=_limited(64 * 1024),
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode != 0
    assert json.loads(old.read_text()) == {"old": True}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


def test_bench_report_to_an_unwritable_path_is_one_line(capsys, pair, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a file, not a folder")
    code, _, err = run(
        capsys,
        "bench",
        "--target",
        pair["target"],
        "--suite",
        "code",
        "--limit",
        "1",
        "--reps",
        "1",
        "--max-tokens",
        "2",
        "--no-warmup",
        "--quiet",
        "--draft",
        pair["drafter"],
        "--out",
        blocker / "r.json",
    )
    assert code == 1 and "could not write" in err and str(blocker / "r.json") in err, err
    assert "Traceback" not in err
