"""Starting the server: the API key rule for addresses beyond loopback (checked without binding
one), stop strings over a stream, and `dflash-studio serve` itself in a process of its own."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from engine_bridge.cli.dispatch import main
from engine_bridge.models.demo import reference_pair
from engine_bridge.serve.binding import KEY_ENV, is_loopback, resolve_binding
from engine_bridge.serve.stops import StopFilter

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    "host, loop",
    [
        ("127.0.0.1", True),
        ("127.1.2.3", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("192.168.1.5", False),
        ("::", False),
        ("myhost.lan", False),
    ],
)
def test_loopback(host, loop):
    assert is_loopback(host) is loop


def test_other_address_needs_a_key():
    with pytest.raises(ValueError, match="--api-key"):
        resolve_binding("0.0.0.0", 8080, None, {})
    b = resolve_binding("0.0.0.0", 8080, None, {KEY_ENV: "k1"})
    assert (b.api_key, b.key_source) == ("k1", KEY_ENV)
    b = resolve_binding("0.0.0.0", 8080, "k2", {KEY_ENV: "k1"})  # the flag wins over the environment
    assert (b.api_key, b.key_source) == ("k2", "--api-key")
    b = resolve_binding("127.0.0.1", 8080, None, {})
    assert (b.api_key, b.key_source, b.url) == (None, "none", "http://127.0.0.1:8080/v1")
    with pytest.raises(ValueError, match="empty"):
        resolve_binding("127.0.0.1", 8080, "  ", {})
    with pytest.raises(ValueError, match="port"):
        resolve_binding("127.0.0.1", 70000, None, {})


def test_cli_refuses_a_public_address_without_a_key(capsys, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    assert main(["serve", "--host", "0.0.0.0", "--port", "0"]) == 2
    assert "--api-key" in capsys.readouterr().err


def test_cli_refuses_a_missing_variant(capsys, tmp_path):
    target, draft = reference_pair()
    assert (
        main(
            [
                "serve",
                "--target",
                str(target),
                "--draft",
                str(draft),
                "--port",
                "0",
                "--threads",
                "1",
                "--variant",
                str(tmp_path / "nope.gguf"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "--variant" in err and "no such file" in err


def test_stop_filter_holds_back_what_may_become_a_stop():
    f = StopFilter(["</s>", "END"])
    out = [f.feed(p) for p in ("abc<", "/", "x", " EN", "D tail")]
    assert out == ["abc", "", "</x", " ", ""] and f.hit
    f = StopFilter(["stop"])
    assert f.feed("a st") == "a " and f.flush() == "st" and not f.hit
    assert StopFilter([]).feed("as is") == "as is"


def test_serve_command_serves_and_stops_on_ctrl_c():
    target, draft = reference_pair()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop(KEY_ENV, None)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "engine_bridge.cli",
            "serve",
            "--target",
            str(target),
            "--draft",
            str(draft),
            "--port",
            "0",
            "--n-ctx",
            "512",
            "--threads",
            "1",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("dflash-studio serve: http://127.0.0.1:"), (
            line,
            proc.stderr.read() if proc.poll() else "",
        )
        assert "no API key (loopback only)" in line
        url = line.split()[2]
        req = urllib.request.Request(
            url + "/chat/completions",
            json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}).encode(),
            {"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=30) as r:
            body = json.load(r)
        assert body["object"] == "chat.completion" and body["usage"]["completion_tokens"] >= 1
        assert body["timings"]["prompt_n"] >= 1
        proc.send_signal(signal.SIGINT)
        assert proc.wait(20) == 0
        assert "stopped after 1 requests" in proc.stdout.read()
        assert "Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
