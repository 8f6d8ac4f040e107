"""What `dflash-studio --help` and each command's --help tell a new user (issue 33, item 9), and the
prompt of `generate` read from a file or standard input -- the real CLI in a real process."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine_bridge.cli.dispatch import build_parser
from engine_bridge.runtime.config import KV_TYPES

ROOT = Path(__file__).resolve().parents[3]


def cli(*args, stdin: str | bytes | None = None, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "engine_bridge.cli", *map(str, args)],
        cwd=ROOT,
        input=stdin.encode() if isinstance(stdin, str) else stdin,
        capture_output=True,
        timeout=timeout,
    )


def _commands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_top_level_help_says_that_no_command_starts_the_app_and_command_is_optional():
    proc = cli("--help")
    out = proc.stdout.decode()
    assert proc.returncode == 0
    usage = " ".join(out.split("\n\n")[0].split())
    assert usage == "usage: dflash-studio [-h] [--version] [--screenshot PATH] [COMMAND [ARGS ...]]", usage
    flat = " ".join(out.split())
    assert "With no COMMAND it starts the desktop app" in flat
    assert "no subcommand starts the app" in flat
    assert "130 interrupted" in flat


def test_version_prints_the_package_version():
    """The bundle's name and --version come from engine_bridge.__version__: it must be pyproject's."""
    import tomllib

    import engine_bridge

    proc = cli("--version")
    assert proc.returncode == 0
    assert proc.stdout.decode().strip() == f"dflash-studio {engine_bridge.__version__}"
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"] == engine_bridge.__version__


def test_every_command_has_a_description_help_for_every_argument_and_its_exit_codes():
    missing = {}
    for name, p in _commands().items():
        gaps = [
            a.option_strings[-1] if a.option_strings else a.dest
            for a in p._actions
            if not a.help and not isinstance(a, argparse._HelpAction)
        ]
        if not p.description:
            gaps.append("(description)")
        if not p.epilog or "exit codes" not in p.epilog:
            gaps.append("(exit codes)")
        if gaps:
            missing[name] = gaps
    assert not missing, missing
    # a command's usage line names the command, not the top-level usage
    assert cli("check", "--help").stdout.decode().startswith("usage: dflash-studio check [-h]")


def test_check_help_describes_the_command_its_arguments_and_exit_codes():
    out = " ".join(cli("check", "--help").stdout.decode().split())
    assert "Runs the pairing checks" in out
    assert "target target GGUF" in out and "draft drafter GGUF" in out
    assert "exit codes: 0 every check passed or warned; 1 at least one FAIL; 2" in out


def test_generate_help_lists_the_kv_types_and_names_the_default_pair():
    out = " ".join(cli("generate", "--help").stdout.decode().split())
    assert f"target K cache type: {', '.join(KV_TYPES)}" in out
    assert "SmolLM2-135M-Instruct" in out and "reference pair" in out
    for flag, words in (
        ("--threads", "CPU threads"),
        ("--top-k", "most likely tokens"),
        ("--seed", "sampling seed"),
        ("--prompt-file", "UTF-8 file"),
        ("--prompt", "- reads it from standard input"),
    ):
        assert f"{flag} " in out and words in out, flag


def test_generate_refuses_an_unreadable_prompt_file_or_an_empty_stdin_with_a_sentence(tmp_path):
    proc = cli("generate", "--prompt-file", tmp_path / "nowhere.txt")
    err = proc.stderr.decode()
    assert proc.returncode == 2 and "--prompt-file" in err and "No such file" in err and "Traceback" not in err
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("caf\xe9".encode("latin-1"))
    proc = cli("generate", "--prompt-file", bad)
    assert proc.returncode == 2 and "not UTF-8" in proc.stderr.decode()
    proc = cli("generate", "--prompt", "-", stdin="")
    assert proc.returncode == 2 and "the prompt is empty (standard input)" in proc.stderr.decode()
    proc = cli("generate", "--prompt", "x", "--prompt-file", bad)  # one source only
    assert proc.returncode == 2 and "not allowed with argument" in proc.stderr.decode()


def test_a_prompt_from_a_file_or_stdin_generates_what_the_same_prompt_as_an_argument_does(tiny_pair, tmp_path):
    target, draft = tiny_pair
    prompt = "The quick brown fox jumps over"
    base = ("generate", "--target", target, "--draft", draft, "--max-tokens", "6", "--json")
    f = tmp_path / "prompt.txt"
    f.write_text(prompt + "\n", encoding="utf-8")  # the editor's trailing newline is dropped
    runs = {
        "arg": cli(*base, "--prompt", prompt),
        "file": cli(*base, "--prompt-file", f),
        "stdin": cli(*base, "--prompt", "-", stdin=prompt + "\n"),
    }
    for how, proc in runs.items():
        assert proc.returncode == 0, (how, proc.stderr.decode()[-2000:])
    tokens = {how: json.loads(proc.stdout)["tokens"] for how, proc in runs.items()}
    assert tokens["arg"] and tokens["file"] == tokens["arg"] and tokens["stdin"] == tokens["arg"]


def test_a_prompt_longer_than_the_argument_limit_goes_through_stdin_and_a_file(tmp_path):
    """~150 kB: an argument this long fails in the shell ("Argument list too long" is per argument,
    128 kB on Linux); read from a file or stdin it reaches the CLI whole."""
    from engine_bridge.cli.engine import read_prompt

    long = ("word " * 30_000) + "é"
    f = tmp_path / "long.txt"
    f.write_text(long + "\n", encoding="utf-8")
    assert read_prompt(argparse.Namespace(prompt=None, prompt_file=str(f))) == long

    with open(f, encoding="ascii") as stream:  # a real text stream whose locale is not UTF-8: the bytes decide
        assert read_prompt(argparse.Namespace(prompt="-", prompt_file=None), stdin=stream) == long
    with pytest.raises(OSError):  # the limit itself, as the shell meets it (execve: E2BIG)
        subprocess.run(["true", long], capture_output=True)
