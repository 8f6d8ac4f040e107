"""RPC devices (issue 18): a real rpc-server from this engine build on 127.0.0.1, a pair with its
layers on the server's CPU device, lossless against the local run; the server killed or frozen
mid-generation: a clear error naming it, and the engine rebuilt once it is back."""

from __future__ import annotations

import socket
import threading

import pytest

from engine_bridge.common.errors import UnsupportedSettingError
from engine_bridge.runtime import rpc
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime.engine_process import EngineProcess, EngineProcessError
from engine_bridge.runtime.rpc_server import RpcServerProcess, free_port

from engine_corpus import PROMPTS

GREEDY = dict(max_tokens=24, stop_at_eog=False)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    assert rpc.supported(), "build_engine.sh builds with -DGGML_RPC=ON: this engine has no RPC backend"
    srv = RpcServerProcess(threads=1, log=tmp_path_factory.mktemp("rpc") / "server.log").start()
    yield srv
    srv.stop()


def _local_gpus() -> list[str]:
    """This machine's GPUs as the engine lists a model's devices: after the RPC devices (none on CI)."""
    from engine_bridge.runtime import llama_ffi

    if llama_ffi.build_info().get("backend", "cpu") == "cpu":
        return []
    return [f"{g['name']} ({g['description']})" for g in llama_ffi.gpus()]


def _config(pair, **kw) -> EngineConfig:
    target, draft = pair
    # flash attention named in both runs: an RPC device says it supports every op, so "auto" could
    # resolve differently from the local CPU
    return EngineConfig(
        target=target, draft=draft, n_ctx=1024, n_batch=256, n_ubatch=64, n_threads=1, flash_attn="off", **kw
    )


@pytest.fixture(scope="module")
def local_runs(tiny_pair):
    """The reference: the same pair in this process on the local CPU, AR, chain and tree."""
    out = {}
    with Engine.load(_config(tiny_pair), preflight=PAIR_PREFLIGHT) as eng:
        for p in PROMPTS[:4]:
            for mode, budget in (("ar", 1), ("chain", 7), ("tree", 12)):
                eng.reset()
                out[(p, mode)] = eng.generate(p, GenerationSettings(mode=mode, budget=budget, **GREEDY)).tokens
    return out


def test_endpoints_parse_and_refuse_with_a_reason():
    assert rpc.parse_endpoints(" 10.0.0.2:50052, gpu-box:6000 ,10.0.0.2:50052") == ("10.0.0.2:50052", "gpu-box:6000")
    assert rpc.parse_endpoints("gpu-box") == ("gpu-box:50052",)
    assert rpc.parse_endpoints("") == ()
    for bad, says in (
        ("host:x", "port must be a number"),
        ("host:0", "1-65535"),
        ("[::1]:5", "IPv6"),
        (":5", "expected host:port"),
    ):
        with pytest.raises(ValueError, match=says.replace("[", r"\[")):
            rpc.parse_endpoints(bad)


def test_probe_tells_unreachable_busy_and_not_rpc_apart():
    with pytest.raises(rpc.RpcError) as err:
        rpc.probe(f"127.0.0.1:{free_port()}", timeout=1.0)
    assert err.value.reason == "unreachable" and "refused" in str(err.value).lower()
    # a listener that never answers (as a server busy with another client does)
    quiet = socket.socket()
    quiet.bind(("127.0.0.1", 0))
    quiet.listen(1)
    # something that answers, but not as an RPC server (an HTTP server's reply)
    talker = socket.socket()
    talker.bind(("127.0.0.1", 0))
    talker.listen(1)

    def talk():
        conn, _ = talker.accept()
        conn.recv(64)
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
        conn.close()

    t = threading.Thread(target=talk, daemon=True)
    t.start()
    try:
        with pytest.raises(rpc.RpcError) as err:
            rpc.probe(f"127.0.0.1:{quiet.getsockname()[1]}", timeout=0.5)
        assert err.value.reason == "busy" and "one client at a time" in str(err.value)
        with pytest.raises(rpc.RpcError) as err:
            rpc.probe(f"127.0.0.1:{talker.getsockname()[1]}", timeout=2.0)
        assert err.value.reason == "protocol" and "did not answer as an RPC server" in str(err.value)
    finally:
        quiet.close()
        talker.close()
        t.join(5)


def test_probe_lists_the_servers_device(server):
    info = rpc.probe(server.endpoint)
    assert info.version[:2] == (rpc.PROTO_MAJOR, rpc.PROTO_MINOR)
    assert len(info.devices) == 1  # no GPU here: the server offers its CPU
    dev = info.devices[0]
    assert 0 < dev.memory_free <= dev.memory_total
    assert rpc.describe_device(dev).startswith(f"RPC {server.endpoint}: ")


def test_pair_on_the_rpc_device_is_lossless_against_the_local_run(server, tiny_pair, local_runs):
    with EngineProcess.load(_config(tiny_pair, rpc_servers=(server.endpoint,)), preflight=PAIR_PREFLIGHT) as eng:
        d = eng.describe()
        # every offloaded layer of both models sits on the server's device
        assert d["target_devices"] == [f"RPC0 ({server.endpoint})"] + _local_gpus(), d["target_devices"]
        if not _local_gpus():
            assert d["draft_devices"] == [f"RPC0 ({server.endpoint})"], d["draft_devices"]
        assert d["rpc_devices"][0].startswith(f"RPC {server.endpoint}")
        for (prompt, mode), reference in local_runs.items():
            eng.reset()
            steps = []
            res = eng.generate(
                prompt,
                GenerationSettings(mode=mode, budget={"ar": 1, "chain": 7, "tree": 12}[mode], **GREEDY),
                on_step=steps.append,
            )
            # the same ggml-cpu kernels on the same f32/f16 weights: bit-identical, not near-tie equal
            assert res.tokens == reference, f"{mode} on RPC parts from the local run for {prompt!r}"
            assert len(steps) == res.summary.n_steps
            if mode != "ar":
                assert res.summary.n_drafted > 0


def test_a_target_split_over_two_servers_puts_the_drafter_beside_its_output(server, tiny_pair, local_runs, tmp_path):
    """Two servers are two devices: the target's layers split over both (llama.cpp's layer split, as
    over two GPUs), the drafter whole on the device that holds the target's output; still lossless."""
    with RpcServerProcess(threads=1, log=tmp_path / "second.log") as second:
        eps = (server.endpoint, second.endpoint)
        with EngineProcess.load(_config(tiny_pair, rpc_servers=eps), preflight=PAIR_PREFLIGHT) as eng:
            d = eng.describe()
            assert d["target_devices"] == [f"RPC0 ({eps[0]})", f"RPC1 ({eps[1]})"] + _local_gpus(), d["target_devices"]
            if not _local_gpus():
                assert d["draft_devices"] == [f"RPC1 ({eps[1]})"], d["draft_devices"]
            for (prompt, mode), reference in list(local_runs.items())[:6]:
                eng.reset()
                res = eng.generate(
                    prompt, GenerationSettings(mode=mode, budget={"ar": 1, "chain": 7, "tree": 12}[mode], **GREEDY)
                )
                assert res.tokens == reference, f"{mode} split over two servers parts from the local run"


def test_a_server_killed_mid_generation_is_named_and_the_engine_is_rebuilt(tiny_pair, local_runs, tmp_path):
    srv = RpcServerProcess(threads=1, log=tmp_path / "server.log").start()
    prompt = PROMPTS[0]
    eng = EngineProcess.load(_config(tiny_pair, rpc_servers=(srv.endpoint,)), preflight=PAIR_PREFLIGHT)
    try:
        got = []

        def kill_after_five(ev):
            got.append(ev.token)
            if len(got) == 5:
                srv.kill()

        with pytest.raises(rpc.RpcError) as err:
            eng.generate(
                prompt,
                GenerationSettings(mode="chain", budget=2, max_tokens=400, stop_at_eog=False),
                on_token=kill_after_five,
            )
        exc = err.value
        assert exc.reason == "lost" and exc.endpoint == srv.endpoint
        msg = str(exc)
        assert f"RPC server {srv.endpoint} was lost mid-generation" in msg and "unreachable" in msg
        assert "Remote RPC server crashed" in msg  # llama.cpp's own last words, from the child
        # the tokens streamed before the loss are the local run's (a batch computed before the kill may
        # still arrive after it, past the reference's 24 tokens: compared where both have them)
        ref = local_runs[(prompt, "chain")]
        assert len(got) >= 5 and got[: len(ref)] == ref[: len(got)]
        # the engine is gone and says so, without touching the dead server
        with pytest.raises(EngineProcessError, match="reload the pair"):
            eng.generate(prompt, GenerationSettings(max_tokens=4))
        # the server comes back on its port: the same configuration loads again and answers the same
        srv = RpcServerProcess(port=srv.port, threads=1, log=tmp_path / "server2.log").start()
        eng.reload()
        res = eng.generate(prompt, GenerationSettings(mode="chain", budget=7, **GREEDY))
        assert res.tokens == local_runs[(prompt, "chain")]
    finally:
        eng.close()
        srv.stop()


def test_a_server_that_freezes_trips_the_watchdog(tiny_pair, tmp_path):
    srv = RpcServerProcess(threads=1, log=tmp_path / "server.log").start()
    eng = EngineProcess.load(_config(tiny_pair, rpc_servers=(srv.endpoint,)), watchdog_s=3.0, preflight=PAIR_PREFLIGHT)
    try:
        got = []

        def freeze_after_three(ev):
            got.append(ev)
            if len(got) == 3:
                srv.pause()  # SIGSTOP: the socket stays open, nothing answers

        with pytest.raises(rpc.RpcError) as err:
            eng.generate(
                PROMPTS[1],
                GenerationSettings(mode="ar", max_tokens=400, stop_at_eog=False),
                on_token=freeze_after_three,
            )
        assert err.value.reason == "lost" and err.value.endpoint == srv.endpoint
        assert "no answer for 3 s" in str(err.value) and "busy" not in err.value.reason
    finally:
        eng.close()
        srv.stop()


def test_the_exact_verify_refuses_rpc_devices_and_says_why(server, tiny_pair):
    """RPC devices cannot switch to batch-invariant kernels (patch 0016 is CUDA's): refused at load."""
    with pytest.raises(UnsupportedSettingError, match="RPC devices"):
        EngineProcess.load(_config(tiny_pair, rpc_servers=(server.endpoint,), exact=True), preflight=PAIR_PREFLIGHT)


def test_an_unreachable_server_refuses_the_load_and_nothing_aborts(tiny_pair):
    port = free_port()
    with pytest.raises(rpc.RpcError) as err:
        EngineProcess.load(_config(tiny_pair, rpc_servers=(f"127.0.0.1:{port}",)), preflight=PAIR_PREFLIGHT)
    assert err.value.reason == "unreachable" and f"127.0.0.1:{port}" in str(err.value)
    # in this very process too: the probe refuses before ggml's client could abort us
    with pytest.raises(rpc.RpcError, match="unreachable"):
        Engine.load(_config(tiny_pair, rpc_servers=(f"127.0.0.1:{port}",)), preflight=PAIR_PREFLIGHT)


def test_the_engine_process_behaves_as_the_engine_for_the_app(tiny_pair):
    """Without RPC (isolate=True): a cancel stops within a step, a callback that raises reaches the
    caller after the child stopped (the next request is clean), errors keep their type and report."""
    from engine_bridge.common.errors import IncompatiblePairError
    from engine_bridge.runtime.engine_process import open_engine
    from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT

    eng = open_engine(_config(tiny_pair), isolate=True, preflight=PAIR_PREFLIGHT)
    try:
        assert isinstance(eng, EngineProcess) and eng.has_drafter
        cancel = threading.Event()
        seen = []

        def stop_at_six(ev):
            seen.append(ev)
            if len(seen) == 6:
                cancel.set()

        res = eng.generate(
            PROMPTS[2], GenerationSettings(max_tokens=400, stop_at_eog=False), on_token=stop_at_six, cancel=cancel
        )
        assert res.summary.finish_reason == "cancelled" and 6 <= len(res.tokens) < 400

        def boom(ev):
            raise KeyError("from the callback")

        with pytest.raises(KeyError, match="from the callback"):
            eng.generate(PROMPTS[2], GenerationSettings(max_tokens=400, stop_at_eog=False), on_token=boom)
        again = eng.generate(PROMPTS[3], GenerationSettings(max_tokens=5))
        assert len(again.tokens) == 5
        with pytest.raises(IncompatiblePairError) as err:
            eng.swap_drafter(tiny_pair[0])  # a target is no drafter: the pairing check says so
        assert err.value.report is not None and err.value.failures
        assert eng.generate(PROMPTS[3], GenerationSettings(max_tokens=5)).tokens == again.tokens
    finally:
        eng.close()
    assert eng.dead is None and eng._proc.returncode is not None
