"""The CLI over RPC devices (issue 18): `rpc-server`, `rpc-devices`, `generate --rpc` (the same
tokens as the local run), `placement --rpc` and `doctor`'s RPC line -- real processes, 127.0.0.1."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine_bridge.runtime import rpc
from engine_bridge.runtime.rpc_server import free_port

ROOT = Path(__file__).resolve().parents[3]


def cli(*args, timeout=180):
    return subprocess.run(
        [sys.executable, "-m", "engine_bridge.cli", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def cli_server():
    """`dflash-studio rpc-server` itself, as a user starts it on the remote machine."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "engine_bridge.cli", "rpc-server", "--port", str(port), "-t", "1"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    endpoint = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        assert proc.poll() is None, proc.stderr.read().decode()
        try:
            rpc.probe(endpoint, timeout=1.0)
            break
        except rpc.RpcError:
            assert time.monotonic() < deadline, "rpc-server did not answer within 30 s"
            time.sleep(0.1)
    yield endpoint
    proc.terminate()
    proc.wait(10)


def test_rpc_devices_lists_a_server_and_names_one_that_is_down(cli_server):
    dead = f"127.0.0.1:{free_port()}"
    r = cli("rpc-devices", "--rpc", f"{cli_server},{dead}", "--timeout", "1")
    assert r.returncode == 1
    lines = r.stdout.splitlines()
    assert lines[0].startswith(f"{cli_server}  protocol 7.0.0  RPC {cli_server}: ") and "GiB free" in lines[0]
    assert lines[1].startswith(f"{dead}  UNREACHABLE: ") and "refused" in lines[1].lower()
    rows = json.loads(cli("rpc-devices", "--rpc", cli_server, "--json").stdout)
    assert rows[0]["ok"] and rows[0]["devices"][0]["memory_total"] > 0
    bad = cli("rpc-devices", "--rpc", "box:port")
    assert bad.returncode == 2 and "port must be a number" in bad.stderr


def test_generate_over_rpc_prints_what_the_local_run_prints(cli_server, tiny_pair):
    target, draft = tiny_pair
    common = [
        "generate",
        "--target",
        target,
        "--draft",
        draft,
        "--prompt",
        "Hello world",
        "--max-tokens",
        16,
        "--n-ctx",
        512,
        "--flash-attn",
        "off",
        "--threads",
        1,
        "--json",
    ]
    local = cli(*common)
    remote = cli(*common, "--rpc", cli_server)
    assert local.returncode == 0 and remote.returncode == 0, remote.stderr
    lo, rp = json.loads(local.stdout), json.loads(remote.stdout)
    assert rp["tokens"] == lo["tokens"] and len(lo["tokens"]) == 16
    assert rp["engine"]["target_devices"] == [f"RPC0 ({cli_server})"] and lo["engine"]["target_devices"] == []
    # a server that is not there: a sentence and exit 1, no core dump
    dead = cli(
        "generate",
        "--target",
        target,
        "--draft",
        draft,
        "--prompt",
        "x",
        "--max-tokens",
        2,
        "--rpc",
        f"127.0.0.1:{free_port()}",
    )
    assert dead.returncode == 1 and "is unreachable" in dead.stderr and "Traceback" not in dead.stderr


def test_placement_plans_over_the_servers_device(cli_server, tiny_pair):
    target, draft = tiny_pair
    r = cli("placement", "--target", target, "--draft", draft, "--rpc", cli_server, "--n-ctx", 512)
    assert r.returncode == 0, r.stderr
    assert f"GPU0  RPC {cli_server}: " in r.stdout and "PASS  split_fits" in r.stdout


def test_doctor_says_whether_the_build_has_rpc():
    rep = json.loads(cli("doctor", "--json").stdout)
    assert rep["rpc"] is True  # build_engine.sh builds with -DGGML_RPC=ON
    assert "-DGGML_RPC=ON" in rep["cmake_args"]
    assert "RPC devices       yes" in cli("doctor").stdout


def _post(url: str, body: dict, timeout: float = 120) -> tuple[int, dict]:
    import urllib.error
    import urllib.request

    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


def test_serve_over_rpc_answers_what_generate_prints_and_outlives_a_lost_server(tiny_pair):
    """`serve --rpc`: the engine in a child process, layers on the server; a served answer is the local
    `generate`'s; a server killed mid-service is a 500 naming it, and the server process stays up."""
    from engine_bridge.runtime.rpc_server import RpcServerProcess

    target, draft = tiny_pair
    common = [
        "--target",
        target,
        "--draft",
        draft,
        "--n-ctx",
        512,
        "--flash-attn",
        "off",
        "--threads",
        1,
        "--budget",
        7,
    ]
    local = cli("generate", *common, "--prompt", "Hello world", "--max-tokens", 16, "--json")
    assert local.returncode == 0, local.stderr
    remote = RpcServerProcess().start()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "engine_bridge.cli",
            "serve",
            *map(str, common),
            "--rpc",
            remote.endpoint,
            "--port",
            "0",
        ],
        cwd=ROOT,
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
        url = line.split()[2]
        status, body = _post(url + "/completions", {"prompt": "Hello world", "max_tokens": 16})
        assert status == 200 and body["choices"][0]["text"] == json.loads(local.stdout)["text"]
        remote.kill()
        status, body = _post(url + "/completions", {"prompt": "Hello world", "max_tokens": 16})
        assert status == 500 and remote.endpoint in body["error"]["message"], body
        assert proc.poll() is None
        # the next request tries a fresh engine process; the server is still away: a 500 again, said
        status, body = _post(url + "/completions", {"prompt": "Hi", "max_tokens": 4})
        assert status == 500 and body["error"]["code"] == "engine_error"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
        assert "Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        remote.stop()
