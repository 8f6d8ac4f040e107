"""CLI subcommands for llama.cpp's RPC devices: ``rpc-server`` (serve this machine's devices) and
``rpc-devices`` (what the listed servers offer, or why one cannot be used)."""

from __future__ import annotations

import json
import sys

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def register(sub) -> None:
    s = sub.add_parser(
        "rpc-server",
        help="serve this machine's devices to an engine elsewhere (llama.cpp RPC)",
        description="Runs llama.cpp's RPC server from this very engine build, so client and server "
        "speak one protocol. One client at a time. Listening beyond 127.0.0.1 lets "
        "anyone on that network run code on these devices.",
        epilog="It serves until stopped (Ctrl-C). exit codes: 1 it could not serve (no RPC in this build, "
        "an unknown device, the port in use); 2 a bad argument",
    )
    s.add_argument(
        "-H", "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)"
    )
    s.add_argument("-p", "--port", type=int, default=None, help="port to listen on (default 50052)")
    s.add_argument("-t", "--threads", type=int, default=None, help="CPU threads (default: half the cores)")
    s.add_argument(
        "-d", "--device", default="", help="ggml devices, e.g. CUDA0,CUDA1 (default: every GPU, else the CPU)"
    )
    s.add_argument("-c", "--cache", default=None, help="folder to cache large tensors between runs")
    s.set_defaults(func=cmd_rpc_server)

    d = sub.add_parser(
        "rpc-devices",
        help="the devices RPC servers offer, with their memory",
        description="Probes each server (HELLO, device count, memory) with a timeout; says which "
        "one is unreachable, busy with another client, or of another llama.cpp version.",
        epilog="exit codes: 0 every server answered; 1 at least one could not be used; 2 a bad --rpc list",
    )
    d.add_argument("--rpc", required=True, metavar="HOST:PORT,...", help="the servers to probe, comma-separated")
    d.add_argument("--timeout", type=float, default=3.0, help="seconds to wait for each server (default 3)")
    d.add_argument("--json", action="store_true", help="print the servers and devices as JSON")
    d.set_defaults(func=cmd_rpc_devices)


def cmd_rpc_server(args) -> int:
    from ..runtime import rpc, rpc_server

    argv = ["--host", args.host, "--port", str(args.port or rpc.DEFAULT_PORT)]
    if args.threads:
        argv += ["--threads", str(args.threads)]
    if args.device:
        argv += ["--device", args.device]
    if args.cache:
        argv += ["--cache", args.cache]
    return rpc_server.main(argv)


def cmd_rpc_devices(args) -> int:
    from ..runtime import rpc

    try:
        endpoints = rpc.parse_endpoints(args.rpc)
    except ValueError as exc:
        print(f"dflash-studio rpc-devices: {exc}", file=sys.stderr)
        return EXIT_USAGE
    rows: list[dict] = []
    failed = 0
    for ep in endpoints:
        try:
            info = rpc.probe(ep, args.timeout)
            rows.append(
                {
                    "endpoint": ep,
                    "ok": True,
                    "version": ".".join(map(str, info.version)),
                    "devices": [
                        {"index": d.index, "memory_free": d.memory_free, "memory_total": d.memory_total}
                        for d in info.devices
                    ],
                }
            )
        except rpc.RpcError as exc:
            failed += 1
            rows.append({"endpoint": ep, "ok": False, "reason": exc.reason, "message": str(exc)})
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        for r in rows:
            if not r["ok"]:
                print(f"{r['endpoint']}  {r['reason'].upper()}: {r['message']}")
                continue
            for d in r["devices"]:
                dev = rpc.RpcDevice(r["endpoint"], d["index"], d["memory_free"], d["memory_total"])
                print(f"{r['endpoint']}  protocol {r['version']}  {rpc.describe_device(dev)}")
    return EXIT_FAIL if failed else EXIT_OK
