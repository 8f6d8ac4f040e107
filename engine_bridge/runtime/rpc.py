"""Remote devices through llama.cpp's RPC backend (ggml-rpc): an ``rpc-server`` on another machine
(or this one, engine_bridge.runtime.rpc_server) shows up as a device that layers can be put on.

Two facts of ggml-rpc shape this module (docs/design/rpc-plan.md has the source lines):

* its client aborts the process on any failed send or receive, and ``ggml_backend_rpc_add_server``
  connects at once: an unreachable endpoint handed to it kills the caller. So every endpoint is
  probed here first, in Python, with timeouts (``probe``), and an engine with RPC devices runs in a
  child process that can die alone (runtime.engine_process);
* a server serves one client at a time: while an engine is connected, a probe gets through TCP
  connect but no HELLO answer -- reported as "busy", not "unreachable".

The probe speaks ggml-rpc's own wire format (protocol 7): ``u8 cmd | u64 size | payload`` out,
``u64 size | payload`` back, HELLO first.
"""

from __future__ import annotations

import ctypes
import socket
import struct
from dataclasses import dataclass, field

from ..common.errors import EngineError

#: the protocol this build's client speaks (ggml-rpc.h RPC_PROTO_*_VERSION)
PROTO_MAJOR, PROTO_MINOR = 7, 0
_HELLO, _GET_DEVICE_MEMORY, _DEVICE_COUNT = 14, 11, 15
_CONN_CAPS = 24  # RPC_CONN_CAPS_SIZE: zeros = plain TCP, no RDMA
DEFAULT_PORT = 50052
#: ggml-rpc's own limit (GGML_RPC_MAX_SERVERS)
MAX_SERVERS = 16


class RpcError(EngineError):
    """An RPC server cannot be used; ``endpoint`` names it, ``reason`` is one of
    unreachable / busy / version / protocol / no-devices / lost / unsupported."""

    def __init__(self, endpoint: str, reason: str, message: str):
        super().__init__(message)
        self.endpoint = endpoint
        self.reason = reason

    def __reduce__(self):  # raised in the engine's child process, read in the app's
        return (type(self), (self.endpoint, self.reason, str(self)))


@dataclass(frozen=True)
class RpcDevice:
    endpoint: str
    index: int  # the device's number on its server
    memory_free: int
    memory_total: int

    @property
    def label(self) -> str:
        return self.endpoint if self.index == 0 else f"{self.endpoint}#{self.index}"

    def as_gpu(self) -> dict:
        """The dict shape of llama_ffi.gpus(), for the device plan and the split check."""
        return {
            "name": f"RPC {self.label}",
            "description": f"RPC {self.label}",
            "type": "rpc",
            "endpoint": self.endpoint,
            "memory_free": self.memory_free,
            "memory_total": self.memory_total,
        }


@dataclass(frozen=True)
class ServerInfo:
    endpoint: str
    version: tuple[int, int, int]
    devices: tuple[RpcDevice, ...] = field(default=())


def parse_endpoints(text: str | None) -> tuple[str, ...]:
    """``host:port,host:port`` (the CLI's --rpc, the settings' list) -> normalised endpoints; raises
    ValueError naming the bad entry. A bare host gets ggml-rpc-server's default port."""
    out: list[str] = []
    for raw in (text or "").replace(";", ",").replace("\n", ",").split(","):
        item = raw.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep:
            host, port = item, str(DEFAULT_PORT)
        if not host or any(c.isspace() for c in host):
            raise ValueError(f"RPC server {item!r}: expected host:port")
        if host.startswith("[") or ":" in host:
            # ggml-rpc resolves with gethostbyname (AF_INET): an IPv6 literal cannot be reached
            raise ValueError(f"RPC server {item!r}: IPv6 addresses are not supported by llama.cpp's RPC backend")
        try:
            p = int(port)
        except ValueError:
            raise ValueError(f"RPC server {item!r}: the port must be a number") from None
        if not 0 < p < 65536:
            raise ValueError(f"RPC server {item!r}: the port must be 1-65535")
        ep = f"{host}:{p}"
        if ep not in out:
            out.append(ep)
    if len(out) > MAX_SERVERS:
        raise ValueError(f"at most {MAX_SERVERS} RPC servers, not {len(out)}")
    return tuple(out)


def _split(endpoint: str) -> tuple[str, int]:
    host, _, port = endpoint.rpartition(":")
    return host, int(port)


def _recv(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("the server closed the connection")
        buf += chunk
    return bytes(buf)


def _call(sock: socket.socket, cmd: int, payload: bytes) -> bytes:
    sock.sendall(struct.pack("<BQ", cmd, len(payload)) + payload)
    (size,) = struct.unpack("<Q", _recv(sock, 8))
    if size > 1 << 20:
        raise ValueError(f"answer of {size} bytes to a {cmd} request")
    return _recv(sock, size)


def probe(endpoint: str, timeout: float = 3.0) -> ServerInfo:
    """Connects, says HELLO, asks the device count and each device's memory -- with timeouts, in
    Python, so nothing here can abort the process. Raises RpcError with the reason."""
    host, port = _split(endpoint)
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except socket.timeout:
        raise RpcError(
            endpoint, "unreachable", f"RPC server {endpoint}: no answer to connect within {timeout:g} s"
        ) from None
    except OSError as exc:
        why = exc.strerror or str(exc)
        raise RpcError(endpoint, "unreachable", f"RPC server {endpoint} is unreachable: {why}") from None
    with sock:
        try:
            hello = _call(sock, _HELLO, bytes(_CONN_CAPS))
        except socket.timeout:
            raise RpcError(
                endpoint,
                "busy",
                f"RPC server {endpoint} accepted the connection but did not answer within "
                f"{timeout:g} s: it serves one client at a time and is probably in use",
            ) from None
        except (OSError, ConnectionError, ValueError, struct.error) as exc:
            raise RpcError(endpoint, "protocol", f"{endpoint} did not answer as an RPC server ({exc})") from None
        if len(hello) < 4:
            raise RpcError(
                endpoint, "protocol", f"{endpoint} did not answer as an RPC server (HELLO of {len(hello)} bytes)"
            )
        version = (hello[0], hello[1], hello[2])
        if version[0] != PROTO_MAJOR or version[1] > PROTO_MINOR:
            raise RpcError(
                endpoint,
                "version",
                f"RPC server {endpoint} speaks protocol {'.'.join(map(str, version))}; this engine speaks "
                f"{PROTO_MAJOR}.{PROTO_MINOR}: run an rpc-server built from the same llama.cpp",
            )
        try:
            (count,) = struct.unpack("<I", _call(sock, _DEVICE_COUNT, b""))
            devices = []
            for i in range(count):
                free, total = struct.unpack("<QQ", _call(sock, _GET_DEVICE_MEMORY, struct.pack("<I", i)))
                devices.append(RpcDevice(endpoint, i, free, total))
        except (OSError, ConnectionError, ValueError, struct.error) as exc:
            raise RpcError(
                endpoint, "protocol", f"RPC server {endpoint} broke off while listing its devices ({exc})"
            ) from None
    if not devices:
        raise RpcError(endpoint, "no-devices", f"RPC server {endpoint} exposes no devices")
    return ServerInfo(endpoint, version, tuple(devices))


def probe_all(endpoints, timeout: float = 3.0) -> list[ServerInfo]:
    """Every server's devices, in the order given; the first failure raises."""
    return [probe(ep, timeout) for ep in endpoints]


def describe_device(dev: RpcDevice) -> str:
    return f"RPC {dev.label}: {dev.memory_free / 2**30:.1f} of {dev.memory_total / 2**30:.1f} GiB free"


# -- in the engine's process only: register servers with ggml ----------------------------------------
_ADD_SERVER = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_char_p)
#: endpoint -> its ggml device handles, for the servers registered in this process
_registered: dict[str, list[int]] = {}


def proc_address(name: str) -> int | None:
    """A function of ggml's RPC backend by name (its registry's get_proc_address: the backend exports
    ``ggml_backend_rpc_add_server`` and ``ggml_backend_rpc_start_server`` no other way); None when
    this build has no RPC backend."""
    from .llama_ffi import _lib as lib

    lib.ggml_backend_reg_by_name.argtypes = [ctypes.c_char_p]
    lib.ggml_backend_reg_by_name.restype = ctypes.c_void_p
    lib.ggml_backend_reg_get_proc_address.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.ggml_backend_reg_get_proc_address.restype = ctypes.c_void_p
    reg = lib.ggml_backend_reg_by_name(b"RPC")
    return (reg and lib.ggml_backend_reg_get_proc_address(reg, name.encode())) or None


def supported() -> bool:
    from .llama_ffi import C

    fn = getattr(C, "llama_supports_rpc", None)
    return bool(fn and fn())


def register(endpoints, timeout: float = 3.0) -> list[int]:
    """Probes each endpoint, then hands it to ggml (``ggml_backend_rpc_add_server`` +
    ``ggml_backend_register``); returns the ggml device handles, servers in the order given.

    Only call this in a process that may die: from here on, a server that goes away aborts it."""
    from .llama_ffi import _lib
    from .native import ensure_backend

    if not supported():
        raise RpcError(
            ",".join(endpoints),
            "unsupported",
            "this engine was built without the RPC backend: run `make engine` (build_engine.sh adds -DGGML_RPC=ON)",
        )
    ensure_backend()
    # a server this process already holds a connection to would answer a probe "busy"
    infos = probe_all([ep for ep in endpoints if ep not in _registered], timeout)
    lib = _lib
    lib.ggml_backend_register.argtypes = [ctypes.c_void_p]
    lib.ggml_backend_register.restype = None
    lib.ggml_backend_reg_dev_count.argtypes = [ctypes.c_void_p]
    lib.ggml_backend_reg_dev_count.restype = ctypes.c_size_t
    lib.ggml_backend_reg_dev_get.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    lib.ggml_backend_reg_dev_get.restype = ctypes.c_void_p
    addr = proc_address("ggml_backend_rpc_add_server")
    if not addr:
        raise RpcError(
            ",".join(endpoints), "unsupported", "this engine's RPC backend has no ggml_backend_rpc_add_server"
        )
    add_server = _ADD_SERVER(addr)
    for info in infos:
        reg = add_server(info.endpoint.encode())
        if not reg:
            raise RpcError(info.endpoint, "no-devices", f"RPC server {info.endpoint} exposes no devices")
        lib.ggml_backend_register(reg)  # a second registration of the same server is skipped by ggml
        _registered[info.endpoint] = [
            lib.ggml_backend_reg_dev_get(reg, i) for i in range(lib.ggml_backend_reg_dev_count(reg))
        ]
    return [dev for ep in endpoints for dev in _registered[ep]]


def devices(endpoints, timeout: float = 3.0) -> list[RpcDevice]:
    """The servers' devices with their memory: through ggml's own connection for a server this
    process registered (a probe would find it busy with us), by a probe otherwise."""
    from . import llama_ffi

    out: list[RpcDevice] = []
    for ep in endpoints:
        if ep in _registered:
            out.extend(RpcDevice(ep, i, *llama_ffi.device_memory(dev)) for i, dev in enumerate(_registered[ep]))
        else:
            out.extend(probe(ep, timeout).devices)
    return out
