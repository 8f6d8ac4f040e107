"""An RPC server from this very engine build: ``dflash-studio rpc-server`` or
``python -m engine_bridge.runtime.rpc_server --port 50052``.

It does what llama.cpp's ``ggml-rpc-server`` tool does (tools/rpc/rpc-server.cpp): pick devices and
call ``ggml_backend_rpc_start_server`` -- but through the wheel's own libggml-rpc, so the server
speaks exactly the client's protocol and runs the same kernels (and our patches) with nothing more
to compile. It serves one client at a time and blocks until killed; SIGTERM ends it.

``RpcServerProcess`` starts one as a child process and waits until it answers a probe (its banner
goes to a pipe unflushed, so readiness is the probe, not the output).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from . import rpc

_START_SERVER = ctypes.CFUNCTYPE(
    None, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)
)
_CPU, _ACCEL = 0, 3


def _devices(names: list[str]) -> list[int]:
    """The named ggml devices, or, as ggml-rpc-server: every accelerator, else the CPU."""
    from . import llama_ffi

    _, lib = llama_ffi._ggml_devices_api()  # dev_count / dev_get / dev_type, bound once there
    lib.ggml_backend_dev_by_name.argtypes = [ctypes.c_char_p]
    lib.ggml_backend_dev_by_name.restype = ctypes.c_void_p
    lib.ggml_backend_dev_by_type.argtypes = [ctypes.c_int]
    lib.ggml_backend_dev_by_type.restype = ctypes.c_void_p
    if names:
        out = []
        for n in names:
            dev = lib.ggml_backend_dev_by_name(n.encode())
            if not dev:
                raise SystemExit(f"rpc-server: no device {n!r} in this build")
            out.append(dev)
        return out
    out = [lib.ggml_backend_dev_get(i) for i in range(lib.ggml_backend_dev_count())]
    out = [d for d in out if lib.ggml_backend_dev_type(d) not in (_CPU, _ACCEL)]
    return out or [lib.ggml_backend_dev_by_type(_CPU)]


def serve(
    host: str = "127.0.0.1",
    port: int = rpc.DEFAULT_PORT,
    threads: int | None = None,
    devices: list[str] | None = None,
    cache_dir: str | None = None,
) -> None:
    """Blocks serving clients until the process is killed."""
    from .native import ensure_backend

    ensure_backend()
    addr = rpc.proc_address("ggml_backend_rpc_start_server") if rpc.supported() else None
    if not addr:
        raise SystemExit("rpc-server: this engine was built without the RPC backend (make engine adds -DGGML_RPC=ON)")
    start = _START_SERVER(addr)
    devs = _devices(devices or [])
    arr = (ctypes.c_void_p * len(devs))(*devs)
    if host != "127.0.0.1":
        print(
            f"rpc-server: listening on {host}: anyone who reaches this port can run code on this machine's "
            "devices; never expose it to an open network",
            file=sys.stderr,
        )
    n_threads = threads or max(1, (os.cpu_count() or 2) // 2)
    start(f"{host}:{port}".encode(), cache_dir.encode() if cache_dir else None, n_threads, len(devs), arr)
    # start_server returns only when it could not listen (the port is taken) or init failed
    raise SystemExit(f"rpc-server: could not serve on {host}:{port} (is the port in use?)")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class RpcServerProcess:
    """A local rpc-server child: ``start()`` waits until it answers a probe; ``kill()`` drops it
    at once (a server lost mid-generation), ``stop()`` ends it politely."""

    def __init__(
        self,
        port: int | None = None,
        host: str = "127.0.0.1",
        threads: int = 1,
        devices: list[str] | None = None,
        log: Path | None = None,
    ):
        self.host = host
        self.port = port or free_port(host)
        self.threads = threads
        self.devices = devices or []
        self.log = log
        self.proc: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = 30.0) -> "RpcServerProcess":
        cmd = [
            sys.executable,
            "-m",
            "engine_bridge.runtime.rpc_server",
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--threads",
            str(self.threads),
        ]
        if self.devices:
            cmd += ["--device", ",".join(self.devices)]
        out = open(self.log, "ab") if self.log else subprocess.DEVNULL
        try:
            self.proc = subprocess.Popen(
                cmd, stdout=out, stderr=out if self.log else subprocess.PIPE, cwd=Path(__file__).resolve().parents[2]
            )
        finally:
            if self.log:
                out.close()
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                raise RuntimeError(f"rpc-server on {self.endpoint} exited with {self.proc.returncode}: {err.strip()}")
            try:
                rpc.probe(self.endpoint, timeout=1.0)
                return self
            except rpc.RpcError:
                if time.monotonic() > deadline:
                    self.kill()
                    raise
                time.sleep(0.1)

    def pause(self) -> None:
        """SIGSTOP: the server hangs without closing its socket (a host gone quiet)."""
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="dflash-studio rpc-server",
        description="serve this machine's devices to a DFlash Studio engine on another machine "
        "(llama.cpp's RPC backend; one client at a time)",
    )
    ap.add_argument(
        "-H",
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1; anything else is reachable by anyone on that network)",
    )
    ap.add_argument("-p", "--port", type=int, default=rpc.DEFAULT_PORT)
    ap.add_argument("-t", "--threads", type=int, default=None, help="CPU threads (default: half the cores)")
    ap.add_argument(
        "-d", "--device", default="", help="ggml devices to serve, e.g. CUDA0,CUDA1 (default: every GPU, else the CPU)"
    )
    ap.add_argument("-c", "--cache", default=None, help="a folder where large tensors are cached between runs")
    a = ap.parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)
    # the server blocks inside C, where Python's own SIGINT handler never runs: Ctrl-C ends it at once
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    serve(a.host, a.port, a.threads, [d for d in a.device.split(",") if d], a.cache)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
