"""A/B of served TTFT: headless vs servers from several trees, alternating per prompt, one run."""

import json
import socket
import os
import subprocess
import sys
import time
import statistics
from pathlib import Path
from urllib.parse import urlparse

sys.path.insert(0, os.getcwd())
from benchmarks.bench_server import prompts, headless
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine
from openai import OpenAI

now = time.perf_counter
M = Path.home() / ".local/share/dflash-studio/models/SmolLM2-135M-Instruct.Q4_1.gguf"
D = Path("resources/models/smollm2/drafter.gguf").resolve()
N, R, MT = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
servers = {}  # name -> (cwd, extra PYTHONPATH)
for spec in sys.argv[4:]:
    name, cwd, *pp = spec.split(":")
    servers[name] = (cwd, pp[0] if pp else None)
cfg = EngineConfig(target=M, draft=D, n_ctx=1024, n_threads=1)
st = GenerationSettings(mode="chain", budget=7, max_tokens=MT)
eng = Engine.load(cfg, preflight=PAIR_PREFLIGHT)
procs, clients, traces = {}, {}, {}
for name, (cwd, pp) in servers.items():
    traces[name] = f"/tmp/serve31/trace-{name}.jsonl"
    if os.path.exists(traces[name]):
        os.remove(traces[name])
    env = dict(os.environ, DFLASH_TRACE=traces[name], PYTHONPATH=cwd + (":" + pp if pp else ""))
    procs[name] = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "engine_bridge.cli",
            "serve",
            "--target",
            str(M),
            "--draft",
            str(D),
            "--port",
            "0",
            "--mode",
            "chain",
            "--budget",
            "7",
            "--n-ctx",
            "1024",
            "--threads",
            "1",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=cwd,
    )
    url = procs[name].stdout.readline().split()[2]
    clients[name] = OpenAI(base_url=url, api_key="none", max_retries=0, timeout=600)


def served(name, p):
    t0 = now()
    first = None
    parts = []
    for ch in clients[name].completions.create(model=M.stem, prompt=p, max_tokens=MT, stream=True, temperature=0):
        if ch.choices and ch.choices[0].text:
            if first is None:
                first = now()
            parts.append(ch.choices[0].text)
    return t0, first, "".join(parts)


def raw(name, p):
    u = urlparse(str(clients[name].base_url))
    body = json.dumps({"model": M.stem, "prompt": p, "max_tokens": MT, "stream": True, "temperature": 0}).encode()
    head = (
        f"POST /v1/completions HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    sk = socket.create_connection((u.hostname, u.port))
    sk.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    t0 = now()
    sk.sendall(head + body)
    buf, first, parts = b"", None, []
    while True:
        c = sk.recv(65536)
        if not c:
            break
        buf += c
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            i = ev.find(b"data: ")
            if i < 0 or ev[i + 6 :].startswith(b"[DONE]"):
                continue
            d = json.loads(ev[i + 6 :])
            t = d["choices"][0]["text"] if d.get("choices") else ""
            if t:
                if first is None:
                    first = now()
                parts.append(t)
    sk.close()
    return t0, first, "".join(parts)


ps = prompts(N)
headless(eng, ps[0], st)
for n in servers:
    (raw if os.environ.get("AB_RAW") == "1" else served)(n, ps[0])
RAW = os.environ.get("AB_RAW") == "1"
kinds = ["headless"] + list(servers)
H = {k: [] for k in kinds}
S = {n: [] for n in servers}
bad = 0
for r in range(R):
    for i, p in enumerate(ps):
        k0 = (r * len(ps) + i) % len(kinds)
        order = kinds[k0:] + kinds[:k0]
        texts = {}
        for k in order:
            if k == "headless":
                res = headless(eng, p, st)
                H[k].append(res[1] * 1e3)
                texts[k] = res[0]
            else:
                t0, f, txt = (raw if RAW else served)(k, p)
                H[k].append((f - t0) * 1e3)
                S[k].append((t0, f))
                texts[k] = txt
        bad += len(set(texts.values())) != 1
for pr in procs.values():
    pr.terminate()
    pr.wait(30)
print(f"prompts {N} x rounds {R}, max_tokens {MT}, text mismatches {bad}")
for k in kinds:
    print(f"TTFT {k:10s} median {statistics.median(H[k]):8.2f} mean {statistics.mean(H[k]):8.2f} ms")
for n in servers:
    add = [s - h for s, h in zip(H[n], H["headless"])]
    print(f"added {n:10s} median {statistics.median(add):7.2f} mean {statistics.mean(add):7.2f} ms")
keys = ["route", "submitted", "taken", "tokenized", "first_token", "first_emit", "first_yield"]
for n in servers:
    trs = [json.loads(x) for x in open(traces[n])][1:]
    segs = {}
    for (t0, first), tr in zip(S[n], trs):
        prev, pk = t0, "client_t0"
        for k in keys + ["client_first"]:
            t = first if k == "client_first" else tr[k]
            segs.setdefault(f"{pk}->{k}", []).append((t - prev) * 1e3)
            prev, pk = t, k
    segs["outside engine (sum)"] = [
        sum(v[j] for kk, v in segs.items() if kk != "tokenized->first_token") for j in range(len(trs))
    ]
    print(f"[{n}] server-side segments, median / mean ms:")
    for k, v in segs.items():
        print(f"    {k:28s} {statistics.median(v):7.3f} {statistics.mean(v):7.3f}")
if len(sys.argv) > 0 and os.environ.get("AB_JSON"):
    json.dump({"H": H}, open(os.environ["AB_JSON"], "w"))
